"""Bad input and failed connections are refused early, in one line that says what happened;
the setup a user states reaches every setup diff, and restart noise does not."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from clirun import kveval
from fake_server import Behaviour, FakeServer

from kveval.formats.reader import read_run
from kveval.run.client import ClientConfig, make_client, send


@pytest.mark.parametrize(("url", "message"), [
    ("http://127.0.0.1:99999/v1", "not a valid URL (Port out of range"),
    ("http://[::1/v1", "not a valid URL"),
    ("ftp://host/v1", "expected http(s)://HOST[:PORT]/v1"),
    ("127.0.0.1:8000/v1", "expected http(s)://HOST[:PORT]/v1"),
])
def test_a_bad_endpoint_url_is_refused_before_any_work(
        capsys: Any, tmp_path: Path, url: str, message: str) -> None:
    code, _, err = kveval(capsys, "run", "--endpoint", url, "--task", "gsm8k",
                          "-o", str(tmp_path / "r.jsonl"))
    assert code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "r.jsonl").exists()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_connection_refused_is_not_called_a_timeout() -> None:
    config = ClientConfig(f"http://127.0.0.1:{free_port()}/v1", None, timeout=5, retries=0)

    async def one() -> str | None:
        conn = make_client(config)
        try:
            return (await send(conn, {"model": "m", "prompt": "x", "max_tokens": 1})).error
        finally:
            await conn.close()

    error = asyncio.run(one())
    assert error is not None and error.startswith("connection refused")


def test_a_dropped_connection_says_so(capsys: Any, tmp_path: Path) -> None:
    (tmp_path / "p.txt").write_text("One.\n")
    with FakeServer(Behaviour(drop_first=1)) as server:
        code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "prompts",
                              "--prompts", str(tmp_path / "p.txt"), "--retries", "0",
                              "-o", str(tmp_path / "r.jsonl"))
    assert code == 2 and "closed the connection without a complete answer" in err
    assert "timed out" not in err


def test_retries_get_past_a_429_with_retry_after(capsys: Any, tmp_path: Path) -> None:
    (tmp_path / "p.txt").write_text("One.\nTwo.\n")
    statuses = iter([429, 429])
    with FakeServer(Behaviour(status_for=lambda body: next(statuses, None))) as server:
        code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "prompts",
                              "--prompts", str(tmp_path / "p.txt"), "--retries", "2",
                              "-o", str(tmp_path / "r.jsonl"))
    assert code == 0, err
    assert all(i.ok for i in read_run(tmp_path / "r.jsonl").items)


def test_a_text_prompt_starting_with_a_brace_is_text(
        capsys: Any, fake_server: FakeServer, tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text('{"a": 1} is JSON; what is the value of a?\nWhat is 2 + 2?\n')
    code, _, err = kveval(capsys, "run", "--endpoint", fake_server.base_url, "--task", "prompts",
                          "--prompts", str(path), "-o", str(tmp_path / "r.jsonl"))
    assert code == 0, err
    contents = {r["messages"][-1]["content"] for r in fake_server.requests}
    assert contents == {'{"a": 1} is JSON; what is the value of a?', "What is 2 + 2?"}


def test_a_prompt_file_of_json_objects_is_jsonl_whatever_its_suffix(
        capsys: Any, fake_server: FakeServer, tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text('{"id": "x", "prompt": "Hello"}\n\n{"id": "y", "prompt": "Bye"}\n')
    code, _, err = kveval(capsys, "run", "--endpoint", fake_server.base_url, "--task", "prompts",
                          "--prompts", str(path), "-o", str(tmp_path / "r.jsonl"))
    assert code == 0, err
    assert sorted(i.item_id for i in read_run(tmp_path / "r.jsonl").items) == [
        "prompts/x", "prompts/y"]


def test_a_task_where_every_item_failed_does_not_claim_no_ground_truth(
        capsys: Any, gsm8k_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kveval.run import session

    monkeypatch.setattr(session, "_preflight", lambda target, pending: None)
    with FakeServer(Behaviour(status_for=lambda body: 400)) as server:
        code, out, _ = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "gsm8k",
                              "--data", str(gsm8k_dir), "--limit", "3", "--retries", "0",
                              "-o", str(tmp_path / "r.jsonl"))
    assert code == 1
    assert "no ground truth" not in out and "no answers: every item failed" in out


def test_stated_setup_is_in_the_diff_and_restart_noise_is_not(
        capsys: Any, tmp_path: Path) -> None:
    (tmp_path / "p.txt").write_text("One.\nTwo.\n")
    paths = []
    for label, cache, marker in (("f16", "f16", "<__media_1__>"), ("q8", "q8_0", "<__media_2__>")):
        props = {"media_marker": marker, "n_ctx": 4096, "build_info": "b5000"}
        with FakeServer(Behaviour(extra_routes={"/props": props})) as server:
            code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--task",
                                  "prompts", "--prompts", str(tmp_path / "p.txt"), "--setup",
                                  f"kv_cache={cache}", "-o", str(tmp_path / f"{label}.jsonl"))
            assert code == 0, err
        paths.append(str(tmp_path / f"{label}.jsonl"))
    code, out, err = kveval(capsys, "compare", *paths, "--json")
    keys = [d["key"] for d in json.loads(out)["setup"]["differences"]]
    assert keys == ["setup.kv_cache"]
    assert json.loads(out)["setup"]["differences"][0]["candidate"] == "q8_0"
