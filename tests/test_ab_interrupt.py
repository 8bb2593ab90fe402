"""Every interrupt is one line, however many come and to whichever processes: Ctrl-C given
three times to `kveval ab --parallel 2` and its children, a hangup of the whole group, two
Ctrl-C to a plain `kveval ab`; its children and the resource tracker say nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_ab import alive, command, environment, pids, sent, serve, write_suite

from kveval.run.interrupt import exit_code, how, hurried, signals_as_interrupt

CASES = {
    "Ctrl-C three times, --parallel 2": ([signal.SIGINT] * 3, True, 130, "Ctrl-C"),
    "a hangup of the group, --parallel 2": ([signal.SIGHUP], True, 129, "SIGHUP"),
    "SIGTERM then Ctrl-C, --parallel 2": ([signal.SIGTERM, signal.SIGINT], True, 143, "SIGTERM"),
    "Ctrl-C twice": ([signal.SIGINT] * 2, False, 130, "Ctrl-C"),
}


def interrupted(tmp_path: Path, signals: list[int], parallel: bool) -> tuple[int, str]:
    """`kveval ab` in its own process group, as a terminal runs it; each signal to the whole
    group once a few requests were answered; its exit code and stderr."""
    cmd = command(tmp_path, write_suite(tmp_path, 40), *(["--parallel", "2"] * parallel),
                  serve_cmd=serve(tmp_path, "--latency 0.05"))
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, env=environment(), start_new_session=True)
    deadline = time.monotonic() + 60
    while len(sent(tmp_path)) < 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    for signum in signals:
        os.killpg(process.pid, signum)
        time.sleep(0.2)
    _, err = process.communicate(timeout=120)
    return process.returncode, err


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_interrupt_is_one_line(case: str, tmp_path: Path) -> None:
    signals, parallel, code, said = CASES[case]
    returned, err = interrupted(tmp_path, signals, parallel)
    assert returned == code, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert "resource_tracker" not in err and "Error" not in err, err
    ours = [line for line in err.splitlines() if line.startswith("kveval: ")]
    assert len(ours) == 1 and ours[0].startswith(f"kveval: interrupted ({said}); "), err
    assert err.rstrip().endswith(ours[0])
    assert not any(alive(pid) for pid in pids(tmp_path))


def test_a_later_interrupt_only_hurries_what_is_stopping() -> None:
    with signals_as_interrupt():
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        assert not hurried()
        for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
            os.kill(os.getpid(), signum)
            time.sleep(0.05)  # delivered, and raised nothing
        assert hurried()
    assert exit_code() == 143 and how() == "SIGTERM"
