"""A server's per-request log lines thinned as they are relayed into its log: the start's
lines, a failure's and the first few of each shape kept, the rest counted in one line."""

from __future__ import annotations

import io

from kveval.run.relay import Relay
from kveval.run.thinning import KEEP

REQUEST = ("slot launch_slot_: id  0 | task {t} | processing task\n"
           "slot update_slots: id  0 | task {t} | new prompt, n_ctx_slot = 4096, n_keep = 0, "
           "n_prompt_tokens = {p}\n"
           "slot      release: id  0 | task {t} | stop processing: n_past = {p}, truncated = 0\n"
           "srv  log_server_r: request: POST /completion 127.0.0.1 200\n")


def relayed(text: str) -> str:
    out = io.BytesIO()
    relay = Relay(out)  # type: ignore[arg-type]
    relay.add(text.encode())
    relay.end()
    return out.getvalue().decode()


def test_a_forced_pass_logs_a_few_requests_and_counts_the_rest():
    start = "main: server is listening on http://127.0.0.1:8080\n"
    failure = "GGML_ASSERT(n_tokens > 0) failed\n"
    log = relayed(start + "".join(REQUEST.format(t=t, p=t + 12) for t in range(1000)) + failure)
    lines = log.splitlines()
    assert lines[0] == start.strip() and lines[-1] == failure.strip()
    assert len(lines) == 4 * KEEP + 4
    assert lines[-3] == (f"[kveval: {4 * (1000 - KEEP):,} more lines like the ones above left "
                         f"out (a line's first {KEEP} of each shape are kept); the last:]")
    assert lines[-2] == "srv  log_server_r: request: POST /completion 127.0.0.1 200"
    assert "task 0 |" in log and f"task {KEEP - 1} |" in log and f"task {KEEP} |" not in log


def test_a_failed_request_is_never_left_out():
    """The 500th request failed: its status line is kept though its shape is the 200's, and
    token counts of 412 or 503 are no status."""
    text = "".join(REQUEST.format(t=t, p=412 + t % 100) for t in range(600))
    text = text.replace("task 500 | processing task\n", "task 500 | processing task\n"
                        "srv  log_server_r: request: POST /completion 127.0.0.1 500\n")
    log = relayed(text)
    assert "127.0.0.1 500" in log and len(log.splitlines()) < 4 * KEEP + 10


def test_a_short_log_is_written_whole():
    text = "".join(REQUEST.format(t=t, p=3) for t in range(KEEP))
    assert relayed(text) == text
