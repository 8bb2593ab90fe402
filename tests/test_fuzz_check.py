"""Fuzz: `kveval check` against a hostile server of its own (every GET and POST answer drawn
by hypothesis: model lists, /props, /version, /metrics, /tokenize, completions; the key and
the URL's credentials quoted back in any spelling), and `kveval plan` on hostile pilots
with hostile option values. The property of tests/fuzz.py, and `check --json` and
`plan --json` are JSON, and every command plan prints splits as a shell splits it."""

from __future__ import annotations

import base64
import json
import shlex
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hostile_server import HostileServer, Script
from hypothesis import event, given, settings
from hypothesis import strategies as st
from test_fuzz_files import changes_in, write_runs
from test_fuzz_server import GETS, PASSWORD, answer, completions, model_lists

from tests.clirun import kveval
from tests.fuzz import SECRET, check, dumps, hostile, spellings, text_values

ECHO = "@@AUTH@@"


def quoted(auth: str, how: str) -> str:
    """The Authorization header a server was sent, quoted back as `how` spells it."""
    return {"raw": auth, "url": quote(auth, safe=""), "base64": base64.b64encode(
        auth.encode()).decode(), "json": "".join(f"\\u{ord(c):04x}" for c in auth)}[how]


def script(models: tuple[int, bytes], gets: dict[str, bytes], reply: tuple[int, Any, bool],
           posts: dict[str, Any], how: str) -> Script:
    """Every POST to a path in `posts` answered with its hostile body; completions with the
    drawn reply; the Authorization header quoted where ECHO stands."""
    status, body, echo = reply

    def post(request: dict[str, Any], auth: str) -> tuple[int, bytes]:
        chosen = posts.get(_path(request), body)
        text = chosen.decode("latin-1") if isinstance(chosen, bytes) else dumps(chosen)
        text = text.replace(ECHO, json.dumps(quoted(auth, how))[1:-1] if echo else "x")
        return status, text.encode("utf-8", "surrogatepass")

    listed = (models[0], models[1].replace(b"@@AUTH@@", f"Bearer {SECRET}".encode()))
    return Script(gets={"/v1/models": listed, **{p: (200, b) for p, b in gets.items()}},
                  post=post)


def _path(request: dict[str, Any]) -> str:
    """Which endpoint a POST body was meant for (the scripted server sees no path)."""
    if "content" in request or ("prompt" in request and "model" in request
                                and "max_tokens" not in request):
        return "/tokenize"
    if "input_ids" in request:
        return "/generate"
    if "n_predict" in request:
        return "/completion"
    return "/v1/completions"


TOKENIZE = st.one_of(hostile(), st.fixed_dictionaries({"tokens": st.lists(st.one_of(
    st.integers(-5, 2**40), st.fixed_dictionaries({"id": hostile(), "piece": hostile()}),
    hostile()), max_size=4)}))
POSTS = st.dictionaries(st.sampled_from(["/tokenize", "/generate", "/completion"]),
                        st.one_of(TOKENIZE, hostile().map(answer)), max_size=2)


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVEVAL_API_KEY", SECRET)


@settings(max_examples=max(5, settings.default.max_examples // 4))
@given(models=model_lists(), gets=GETS, reply=completions(), posts=POSTS,
       how=st.sampled_from(["raw", "url", "base64", "json"]), password=st.booleans(),
       as_json=st.booleans())
def test_fuzz_check_against_a_hostile_server(capsys: Any, models: tuple[int, bytes],
                                            gets: dict[str, bytes], reply: tuple[int, Any, bool],
                                            posts: dict[str, Any], how: str, password: bool,
                                            as_json: bool) -> None:
    with HostileServer("scripted", script=script(models, gets, reply, posts, how)) as server:
        url = server.base_url.replace("http://", f"http://u:{PASSWORD}@") if password \
            else server.base_url
        code, out, err = kveval(capsys, "check", "--endpoint", url,
                                *(["--json"] if as_json else []))
    secrets = [*spellings(SECRET), *spellings(PASSWORD), *spellings(f"u:{PASSWORD}")]
    check("check", code, out, err, secrets=secrets, json_out=as_json)
    event(f"check exit {code}")
    assert code in (0, 2)


PLAN_VALUES = st.sampled_from(["nan", "inf", "-inf", "1e999", "0", "-1", "0.5", "2", "1e-300",
                               "abc", "", "0x10", "1_000"])
PLAN_FLAGS = st.lists(st.tuples(st.sampled_from(["--detect", "--alpha", "--power",
                                                 "--detect-drift", "--detect-kl"]),
                                PLAN_VALUES), max_size=2)
DATA = st.sampled_from([None, "fifo", "/dev/zero", "/nonexistent/x", "folder", "big"])


def pilot_data(folder: Path, kind: str | None) -> str | None:
    """What a pilot's header may name as its data: a pipe, a device, nothing, a folder."""
    if kind == "fifo":
        (folder / "data").mkdir()
        import os

        os.mkfifo(folder / "data" / "test.jsonl")
        return str(folder / "data")
    if kind == "folder":
        (folder / "data").mkdir()
        return str(folder / "data")
    if kind == "big":
        (folder / "data").mkdir()
        (folder / "data" / "test.jsonl").write_text("{}\n" * 5000)
        return str(folder / "data")
    return kind


@settings(max_examples=max(5, settings.default.max_examples // 4))
@given(changes=changes_in("fields"), flags=PLAN_FLAGS, data=DATA,
       with_noise=st.booleans(), as_json=st.booleans(), label=text_values())
def test_fuzz_plan(capsys: Any, changes: list[Any], flags: list[tuple[str, str]],
                   data: str | None, with_noise: bool, as_json: bool, label: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        runs = write_runs(folder, "baseline", changes, "none", 0)
        head, *rest = Path(runs["baseline"]).read_text().splitlines()
        header = json.loads(head)
        if isinstance(header, dict) and isinstance(header.get("tasks"), list):
            header["label"] = label
            for spec in header["tasks"]:
                if isinstance(spec, dict):
                    spec["data"] = pilot_data(folder, data) if spec.get("adapter") == "gsm8k" \
                        else spec.get("data")
            Path(runs["baseline"]).write_text("\n".join([dumps(header), *rest]) + "\n",
                                              errors="surrogatepass")
        args = ["plan", runs["baseline"], *(["--noise", runs["noise"]] if with_noise else []),
                *(a for pair in flags for a in pair), *(["--json"] if as_json else [])]
        code, out, err = kveval(capsys, *args)
    check("plan", code, out, err, json_out=as_json)
    event(f"plan exit {code}")
    commands = json.loads(out)["commands"] if as_json and code == 0 else [
        line.strip() for line in out.splitlines() if line.strip().startswith("kveval run")]
    for command in commands:
        assert shlex.split(command)[:2] == ["kveval", "run"]
