"""`kveval run`'s clocks and queues: an attempt past its timeout is resent and said, and the
summary counts it; the suite's `timeout`; the progress bar's clock from the first request;
the default concurrency held to the slots the server reports."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from fake_server import Behaviour, FakeServer

from kveval.formats.reader import read_run
from tests.clirun import kveval

PROMPTS = "Say one thing.\nSay another thing.\n"


def slow_first(seconds: float) -> Any:
    """Answers; the first answer request (no one-token probe) takes `seconds`."""
    lock, slowed = threading.Lock(), [False]

    def answer(body: dict[str, Any]) -> str:
        with lock:
            first = not slowed[0] and body.get("max_tokens") != 1
            slowed[0] = slowed[0] or first
        time.sleep(seconds if first else 0.0)
        return "An answer."
    return answer


def run(capsys: Any, server: FakeServer, tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(PROMPTS)
    return kveval(capsys, "run", "--endpoint", server.base_url, "--task", "prompts",
                  "--prompts", str(prompts), "-o", str(tmp_path / "r.jsonl"), *extra)


def test_an_attempt_past_the_timeout_is_resent_said_and_counted(capsys: Any,
                                                                tmp_path: Path) -> None:
    with FakeServer(Behaviour(answer=slow_first(1.5))) as server:
        code, out, err = run(capsys, server, tmp_path, "--timeout", "0.5")
    assert code == 0, err
    assert "note: a request failed (no complete answer within --timeout 0.5 s); sending it " \
           "again (attempt 2 of 4)" in err
    assert "1 request(s) sent again after a failed attempt (no complete answer within " \
           "--timeout 0.5 s: 1)" in out


def test_the_suite_timeout_is_each_attempts_bound(capsys: Any, tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(PROMPTS)
    suite = tmp_path / "suite.toml"
    suite.write_text(f'timeout = 0.5\n[[task]]\nname = "prompts"\ndata = "{prompts}"\n')
    with FakeServer(Behaviour(answer=slow_first(1.5))) as server:
        code, out, err = kveval(capsys, "run", "--endpoint", server.base_url, "--suite",
                                str(suite), "-o", str(tmp_path / "r.jsonl"))
    assert code == 0, err
    assert "no complete answer within --timeout 0.5 s" in err and "sent again" in out


def test_a_suite_timeout_that_cannot_be_is_one_line(capsys: Any, tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text('timeout = "long"\n[[task]]\nname = "prompts"\n')
    with FakeServer() as server:
        code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--suite",
                              str(suite), "-o", str(tmp_path / "r.jsonl"))
    assert code == 2 and "`timeout = 'long'` must be seconds" in err


def test_the_progress_clock_starts_with_the_first_request(capsys: Any, tmp_path: Path) -> None:
    with FakeServer(Behaviour(latency_s=1.2)) as server:
        code, _, err = run(capsys, server, tmp_path, "--concurrency", "1")
    assert code == 0, err
    assert "2/2 [00:02<" in err  # two answers of 1.2 s each, timed from the first request


def slots(count: int) -> Behaviour:
    props = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": count}
    return Behaviour(extra_routes={"/props": props})


def test_the_default_concurrency_is_held_to_the_servers_slots(capsys: Any,
                                                              tmp_path: Path) -> None:
    with FakeServer(slots(2)) as server:
        code, _, err = run(capsys, server, tmp_path)
    assert code == 0, err
    assert "note: the server reports 2 slot(s) (/props total_slots): --concurrency 2, not 32" \
           in err
    assert read_run(tmp_path / "r.jsonl").header.concurrency == 2


def test_a_given_concurrency_is_kept(capsys: Any, tmp_path: Path) -> None:
    with FakeServer(slots(2)) as server:
        code, _, err = run(capsys, server, tmp_path, "--concurrency", "8")
    assert code == 0, err
    assert "slot(s)" not in err and read_run(tmp_path / "r.jsonl").header.concurrency == 8
