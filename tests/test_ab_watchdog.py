"""A server outlives no kveval: `kill -9` of `kveval ab` while its server (started through a
wrapper script, the server a child of the script) is up leaves nothing running a few seconds
later, and a rerun stops a server a record says an earlier kveval left running, but never a
process that merely took its number."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from kveval.errors import RunFileError
from kveval.formats.lock import folder_held
from kveval.run.leftover import Record, boot_id
from kveval.run.watchdog import start_ticks
from tests.test_ab import FAKE, ab, command, environment, pids, sent, write_suite


def gone(pid: int) -> bool:
    """Not running: no such process, or a zombie waiting for its reaper."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2:].split()[0] == b"Z"


def wait_until(condition, seconds: float) -> bool:  # type: ignore[no-untyped-def]
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def wrapper(tmp_path: Path) -> str:
    """A wrapper script that runs the server as its child (no exec), as launch scripts do."""
    script = tmp_path / "serve.sh"
    script.write_text(f"#!/bin/sh\n{FAKE} \"$@\"\necho wrapper done\n")
    script.chmod(0o755)
    return (f"{script} --port {{port}} --pids {tmp_path / 'pids'} --count "
            f"{tmp_path / 'count'} --latency 0.05")


def test_kill_9_of_kveval_ends_its_wrapped_server_within_seconds(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, 40)
    process = subprocess.Popen(command(tmp_path, suite, serve_cmd=wrapper(tmp_path)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=environment())
    try:
        assert wait_until(lambda: len(sent(tmp_path)) >= 3, 60)
    finally:
        process.kill()
        process.wait()
    server = pids(tmp_path)[0]
    assert wait_until(lambda: gone(server), 5), "the server outlived kveval's kill -9"
    record = tmp_path / "ab" / "servers" / "baseline.pid"
    assert record.is_file()  # the record stays: only a stop removes it
    done = ab(tmp_path, suite, serve_cmd=wrapper(tmp_path))
    assert done.returncode == 0, done.stderr
    assert not record.exists() and all(gone(pid) for pid in pids(tmp_path))


def leftover(tmp_path: Path, ticks_of: int | None = None) -> subprocess.Popen[bytes]:
    """A process group standing in for a server whose kveval and watchdog both died, and
    its record (with another start time where `ticks_of` says so)."""
    held = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                            start_new_session=True)
    wait_until(lambda: start_ticks(held.pid) is not None, 5)
    ticks = start_ticks(held.pid)
    assert ticks is not None
    folder = tmp_path / "ab" / "servers"
    folder.mkdir(parents=True)
    record = Record(held.pid, ticks if ticks_of is None else ticks + ticks_of, boot_id(),
                    "baseline")
    (folder / "baseline.pid").write_bytes(msgspec.json.encode(record))
    return held


def test_a_rerun_stops_the_server_a_record_names(tmp_path: Path) -> None:
    held = leftover(tmp_path)
    try:
        done = ab(tmp_path, write_suite(tmp_path, 40))
        assert done.returncode == 0, done.stderr
        assert held.poll() == -signal.SIGTERM
        assert (f"baseline: stopping the server an earlier kveval left running (process "
                f"group {held.pid})") in done.stderr
    finally:
        held.kill()
        held.wait()


def test_a_record_whose_process_number_was_taken_since_stops_nothing(tmp_path: Path) -> None:
    held = leftover(tmp_path, ticks_of=-7)  # the number is another process's now
    try:
        done = ab(tmp_path, write_suite(tmp_path, 40))
        assert done.returncode == 0, done.stderr
        assert held.poll() is None and "left running" not in done.stderr
        assert not (tmp_path / "ab" / "servers" / "baseline.pid").exists()
    finally:
        held.kill()
        held.wait()


def test_a_stopped_server_leaves_no_record_and_no_watchdog(tmp_path: Path) -> None:
    before = {p for p in os.listdir("/proc") if p.isdigit()}
    done = ab(tmp_path, write_suite(tmp_path, 40), "--teacher-force", "off")
    assert done.returncode == 0, done.stderr
    assert not list((tmp_path / "ab" / "servers").glob("*.pid"))
    time.sleep(0.5)
    watchdogs = []
    for pid in {p for p in os.listdir("/proc") if p.isdigit()} - before:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"watchdog.py" in cmdline and str(tmp_path).encode() in cmdline:
            watchdogs.append(pid)
    assert not watchdogs


def test_a_second_ab_in_the_folder_is_refused_and_stops_nothing(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, 40)
    cmd = command(tmp_path, suite, serve_cmd=wrapper(tmp_path))
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=environment())
    try:
        assert wait_until(lambda: len(sent(tmp_path)) >= 3, 60)
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                                env=environment())
        assert second.returncode == 2
        line = [line for line in second.stderr.splitlines() if line.strip()][-1]
        assert "another kveval ab is running in this folder" in line  # the folder's lock
        assert "give this one another -o DIR" in line and "--resume" not in line
        _, err = first.communicate(timeout=120)
        assert first.returncode == 0, err  # its server was never touched
    finally:
        first.kill()
        first.wait()


def test_the_folder_lock_refuses_a_second_holder(tmp_path: Path) -> None:
    with folder_held(tmp_path):
        other = subprocess.run([sys.executable, "-c", (
            "import sys; from pathlib import Path; from kveval.formats.lock import folder_held\n"
            "try:\n    with folder_held(Path(sys.argv[1])): pass\n"
            "except Exception as exc: print(exc)"), str(tmp_path)], capture_output=True,
            text=True,
            env=environment(), check=True)
        assert "another kveval ab is running in this folder" in other.stdout
    with folder_held(tmp_path), pytest.raises(RunFileError), folder_held(tmp_path):
        pass
