"""`kveval run` against servers that misbehave or attack: secrets, terminals, malformed
answers, slow bodies, redirects. Every case is one clear line, an error item or a safe file."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from clirun import kveval
from hostile_server import HOSTILE, HostileServer

from kveval.formats.reader import read_run

KEY = "sk-very-secret-key-1234"


def prompt_file(tmp_path: Path, count: int = 3) -> Path:
    path = tmp_path / "prompts.txt"
    path.write_text("".join(f"Say the number {i}.\n" for i in range(count)))
    return path


def run(capsys: Any, url: str, tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    return kveval(capsys, "run", "--endpoint", url, "--task", "prompts", "--prompts",
                  str(prompt_file(tmp_path)), "-o", str(tmp_path / "r.jsonl"), *extra)


def assert_clean(text: str) -> None:
    """No escape sequence, BEL, C1 control, nor the CR the hostile text carries (the progress
    bar's own CRs are kveval's)."""
    for control in ("\x1b", "\x07", "\x9b", "\r#"):
        assert control not in text


def test_a_key_the_server_echoes_is_masked_in_the_file_and_the_terminal(
        capsys: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVEVAL_API_KEY", KEY)
    with HostileServer("echo_key") as server:
        code, out, err = run(capsys, server.base_url, tmp_path, "--retries", "0")
    assert code == 2 and "invalid credentials: Bearer ***" in err
    assert KEY not in out + err
    assert server.posts()[0]["headers"]["authorization"] == f"Bearer {KEY}"  # it was sent...
    assert not (tmp_path / "r.jsonl").exists()  # ...and the pre-flight stopped the run


def test_echoed_key_in_error_items_is_masked_on_file(
        capsys: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVEVAL_API_KEY", KEY)
    from kveval.run import session

    monkeypatch.setattr(session, "_preflight", lambda target, pending: None)
    with HostileServer("echo_key") as server:
        code, _, err = run(capsys, server.base_url, tmp_path, "--retries", "0")
    text = (tmp_path / "r.jsonl").read_text()
    assert code == 1 and KEY not in text and KEY not in err
    assert all(i.error and "Bearer ***" in i.error for i in read_run(tmp_path / "r.jsonl").items)


def test_no_credentials_follow_a_redirect_to_another_origin(
        capsys: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVEVAL_API_KEY", KEY)
    with HostileServer("record") as other, \
            HostileServer("redirect", target=other.origin) as server:
        url = server.base_url.replace("http://", "http://user:pa55word@")
        code, out, err = run(capsys, url, tmp_path, "--retries", "0")
    assert [s["path"] for s in server.seen][:1] == ["/v1/models"]
    followed = [s["path"] for s in other.seen]
    assert "/v1/models" in followed and "/metrics" in followed  # the probes were followed...
    assert all("authorization" not in s["headers"] for s in other.seen)  # ...without credentials
    assert other.posts() == []  # a completion is never redirected
    assert code == 2 and "HTTP 307" in err and "pa55word" not in out + err and KEY not in err


def test_a_trickled_probe_is_cut_at_its_deadline(capsys: Any, tmp_path: Path) -> None:
    with HostileServer("trickle_probe") as server:
        started = time.monotonic()
        code, _, err = run(capsys, server.base_url, tmp_path)
        elapsed = time.monotonic() - started
    assert code == 0, err
    assert elapsed < 10  # PROBE_TIMEOUT_S is 3; the body would take 180 s
    assert "metrics" not in read_run(tmp_path / "r.jsonl").header.fingerprint


def test_timeout_bounds_a_whole_attempt_of_a_trickled_body(capsys: Any, tmp_path: Path) -> None:
    with HostileServer("trickle_body") as server:
        started = time.monotonic()
        code, _, _ = run(capsys, server.base_url, tmp_path, "--timeout", "3", "--retries", "0")
        elapsed = time.monotonic() - started
    assert code == 1 and elapsed < 15  # three items at concurrency 32, each cut at 3 s
    items = read_run(tmp_path / "r.jsonl").items
    assert [i.error for i in items] == ["no complete answer within --timeout 3 s"] * 3


@pytest.mark.parametrize("mode", ["invalid_json", "wrong_types"])
def test_a_malformed_200_reply_is_one_error_item_and_the_run_goes_on(
        capsys: Any, tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from kveval.run import session

    monkeypatch.setattr(session, "_preflight", lambda target, pending: None)
    with HostileServer(mode) as server:
        code, out, err = run(capsys, server.base_url, tmp_path, "--retries", "0")
    assert code == 1 and "Traceback" not in err
    items = read_run(tmp_path / "r.jsonl").items
    assert len(items) == 3 and all(i.status == "error" for i in items)
    assert all(i.error and i.error.startswith("malformed response") for i in items)
    assert "3 item(s) failed" in err


def test_hostile_model_ids_never_reach_the_terminal_raw(capsys: Any, tmp_path: Path) -> None:
    with HostileServer("hostile_text", models=["a" + HOSTILE, "b" + HOSTILE]) as server:
        code, out, err = run(capsys, server.base_url, tmp_path)
    assert code == 2 and "pick one with --model" in err
    assert_clean(out + err)
    assert err.count("\n") == 1


def test_hostile_answers_and_ids_stay_raw_on_file_and_clean_on_screen(
        capsys: Any, tmp_path: Path) -> None:
    with HostileServer("hostile_text") as server:
        code, out, err = run(capsys, server.base_url, tmp_path)
    assert code == 0
    assert_clean(out + err)
    run_file = read_run(tmp_path / "r.jsonl")
    assert run_file.header.model == "hostile" + HOSTILE  # JSON escapes it; the record is exact
    assert all(i.output and i.output.endswith(HOSTILE) for i in run_file.items)


def test_the_request_on_file_is_the_json_body_the_server_received(
        capsys: Any, tmp_path: Path) -> None:
    with HostileServer("echo_body") as server:
        code, _, _ = run(capsys, server.base_url, tmp_path, "--extra-body",
                         '{"top_k": 1, "chat_template_kwargs": {"enable_thinking": false}}')
    assert code == 0
    for item in read_run(tmp_path / "r.jsonl").items:
        assert item.output is not None and json.loads(item.output) == item.request
        assert item.request["top_k"] == 1 and item.request["temperature"] == 0


def test_basic_credentials_in_the_url_never_reach_a_message(
        capsys: Any, tmp_path: Path) -> None:
    """Token sizing fails (no tokenizer, no usage): the error names the URL without them."""
    with HostileServer("invalid_json") as server:
        url = server.base_url.replace("http://", "http://user:pa55word@")
        code, out, err = kveval(capsys, "run", "--endpoint", url, "--task", "needle",
                                "--lengths", "1k", "--depths", "50", "--trials", "1",
                                "-o", str(tmp_path / "n.jsonl"))
    assert code == 2 and "cannot size prompts" in err
    assert "pa55word" not in out + err and "http://127.0.0.1:" in err
    assert server.posts()[0]["headers"]["authorization"].startswith("Basic ")


def test_token_sizing_requests_are_not_redirected_with_credentials(
        capsys: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVEVAL_API_KEY", KEY)
    with HostileServer("record") as other, \
            HostileServer("redirect", target=other.origin) as server:
        code, out, err = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "needle",
                                "--lengths", "1k", "--depths", "50", "--trials", "1",
                                "-o", str(tmp_path / "n.jsonl"))
    assert code == 2 and "cannot size prompts" in err and KEY not in out + err
    assert any(s["path"] == "/tokenize" for s in server.posts())  # tried at the endpoint
    assert all("authorization" not in s["headers"] for s in other.seen)
    assert other.posts() == []


def test_hostile_fingerprints_and_setup_are_clean_in_compare_and_gate_markdown(
        capsys: Any, tmp_path: Path, gsm8k_dir: Path) -> None:
    paths = []
    for label in ("a", "b"):
        props = {"build_info": f"{label}{HOSTILE}", "n_ctx": 4096}
        with HostileServer("hostile_text", props=props) as server:
            out = tmp_path / f"{label}.jsonl"
            code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--task",
                                  "gsm8k", "--data", str(gsm8k_dir), "--limit", "3",
                                  "--setup", f"kv={label}{HOSTILE}", "-o", str(out))
            assert code == 0, err
        paths.append(str(out))
    code, out, err = kveval(capsys, "compare", *paths)
    assert code in (0, 1) and "props.build_info" in out and "setup.kv" in out
    assert_clean(out + err)
    code, out, err = kveval(capsys, "gate", "--baseline", paths[0], "--candidate", paths[1],
                            "--markdown")
    assert code == 2  # 3 items: no check can judge them, and the verdict says so in full
    assert "setup\\.kv" in out and "props\\.build\\_info" in out
    assert_clean(out + err)
    assert "\\# Heading" in out and "](http://evil.example)" not in out
