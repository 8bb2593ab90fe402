"""Secrets masked in every form a server can echo them (Bearer, Basic base64 of
`user:password`, the decoded pair, the raw key, the URL's password) before anything is
printed or written; lm-eval `model_args` secrets masked on every page of output."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from clirun import kveval
from hostile_server import HostileServer

from kveval import masking
from kveval.formats.reader import read_run

KEY = "sk-very-secret-key-1234"
USER, PASSWORD = "alice", "pa55-word-9x"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
LMEVAL = Path(__file__).parent / "fixtures" / "lmeval" / "0.4.13"


def leaked(text: str) -> list[str]:
    return [form for form in (KEY, PASSWORD, BASIC, f"{USER}:{PASSWORD}") if form in text]


def with_password(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{PASSWORD}@")


def run(capsys: Any, url: str, tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Say one.\nSay two.\nSay three.\n")
    return kveval(capsys, "run", "--endpoint", url, "--task", "prompts", "--prompts",
                  str(prompts), "-o", str(tmp_path / "r.jsonl"), "--retries", "0", *extra)


def test_every_form_of_the_credentials_is_listed() -> None:
    found = masking.forms(KEY, f"http://{USER}:{PASSWORD}@h/v1")
    assert {KEY, PASSWORD, BASIC, f"{USER}:{PASSWORD}"} <= set(found)
    assert masking.forms(None, "http://h/v1") == ()
    text = masking.mask(f"Basic {BASIC} / {USER}:{PASSWORD} / Bearer {KEY}", found)
    assert text == "Basic *** / *** / Bearer ***"


def test_a_quoted_basic_header_is_masked_on_the_terminal(capsys: Any, tmp_path: Path) -> None:
    with HostileServer("echo_key") as server:
        code, out, err = run(capsys, with_password(server.base_url), tmp_path)
    assert code == 2 and "invalid credentials: Basic ***" in err
    assert leaked(out + err) == []
    assert server.posts()[0]["headers"]["authorization"] == f"Basic {BASIC}"  # it was sent


@pytest.mark.parametrize("mode", ["echo_key_5xx", "echo_decoded"])
def test_credentials_quoted_in_5xx_error_items_are_masked_on_file(
        capsys: Any, tmp_path: Path, mode: str) -> None:
    with HostileServer(mode) as server:
        code, out, err = run(capsys, with_password(server.base_url), tmp_path)
    text = (tmp_path / "r.jsonl").read_text()
    assert code == 1 and leaked(text + out + err) == []
    assert all("invalid credentials: " in (i.error or "") and "***" in (i.error or "")
               for i in read_run(tmp_path / "r.jsonl").items)


def test_a_key_served_as_the_model_id_is_never_written_and_the_run_resumes(
        capsys: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVEVAL_API_KEY", KEY)
    with HostileServer("record", models=[KEY]) as server:
        code, out, err = run(capsys, server.base_url, tmp_path)
        assert code == 0, err
        text = (tmp_path / "r.jsonl").read_text()
        assert leaked(text + out + err) == []
        on_file = read_run(tmp_path / "r.jsonl")
        assert on_file.header.model == "***" and on_file.items[0].request["model"] == "***"
        assert all(post["body"]["model"] == KEY for post in server.posts())  # as sent
        code, out, err = run(capsys, server.base_url, tmp_path, "--resume")
    assert code == 0, err
    assert "3 items (0 sent this time)" in out


def lmeval_run(tmp_path: Path, name: str, source: str, secret: str | None) -> str:
    folder = tmp_path / name
    shutil.copytree(LMEVAL / source, folder)
    if secret is None:
        return str(folder)
    (results,) = folder.rglob("results_*.json")
    data = json.loads(results.read_text())
    data["config"]["model_args"] = {**data["config"]["model_args"], "api_key": secret,
                                    "hf_token": secret + "-hf"}
    results.write_text(json.dumps(data))
    return str(folder)


def test_lmeval_model_args_secrets_are_masked_in_every_output(capsys: Any,
                                                               tmp_path: Path) -> None:
    a = lmeval_run(tmp_path, "a", "completions-a", None)
    b = lmeval_run(tmp_path, "b", "completions-b", "sk-lmeval-two-2222")
    page = tmp_path / "page.html"
    outputs = []
    for args in (("compare", a, b), ("compare", a, b, "--json"),
                 ("gate", "--baseline", a, "--candidate", b, "--markdown"),
                 ("report", "--baseline", a, "--candidate", b, "-o", str(page))):
        code, out, err = kveval(capsys, *args)
        assert code in (0, 1), err
        outputs.append(out + err)
    outputs.append(page.read_text())
    assert "model_args.api_key" in outputs[0] and "***" in outputs[0]  # the diff names it...
    assert not any("sk-lmeval" in text for text in outputs)  # ...never its value
