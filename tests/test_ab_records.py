"""A server record (`servers/LABEL.pid`) is trusted only with its start time: a group whose
leader is gone is stopped only where every member carries the mark kveval's launcher gives
a server's environment; kveval never stops its own group; a record that is not one (a number
past the kernel's largest process id, a named pipe, a folder) is one line naming it, exit 2."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from kveval.run.leftover import Record
from kveval.run.watchdog import MARK, boot_id, mark, start_ticks
from tests.test_ab import ab, command, environment, write_suite
from tests.test_ab_watchdog import gone, wait_until

LEFT = "stopping the server an earlier kveval left running"


def orphaned_group(marked: bool) -> tuple[int, int, int]:
    """A process group whose leader has exited, one member left sleeping (marked as a
    server's of kveval, or not): the group, its leader's start time, the member."""
    code = ("import os,subprocess,sys,time\n"
            "from kveval.run.watchdog import MARK, mark, start_ticks\n"
            "env = dict(os.environ)\n"
            "if sys.argv[1] == '1': env[MARK] = mark(os.getpid(), start_ticks(os.getpid()))\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],"
            " env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            "print(os.getpid(), start_ticks(os.getpid()), child.pid, flush=True)\n")
    leader = subprocess.run([sys.executable, "-c", code, "1" if marked else "0"],
                            capture_output=True, text=True, env=environment(),
                            start_new_session=True, check=True)
    pgid, ticks, member = (int(word) for word in leader.stdout.split())
    assert wait_until(lambda: start_ticks(pgid) is None, 5)
    return pgid, ticks, member


def write_record(tmp_path: Path, data: bytes) -> Path:
    folder = tmp_path / "ab" / "servers"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "baseline.pid").write_bytes(data)
    return folder / "baseline.pid"


@pytest.mark.parametrize("marked", [False, True])
def test_a_group_whose_leader_is_gone_is_stopped_only_where_every_member_is_marked(
        tmp_path: Path, marked: bool) -> None:
    pgid, ticks, member = orphaned_group(marked)
    try:
        write_record(tmp_path, msgspec.json.encode(Record(pgid, ticks, boot_id(), "baseline")))
        done = ab(tmp_path, write_suite(tmp_path, 40))
        assert done.returncode == 0, done.stderr
        assert (LEFT in done.stderr) is marked
        assert wait_until(lambda: gone(member), 5) is marked
    finally:
        if not gone(member):
            os.kill(member, signal.SIGKILL)


def test_a_record_naming_kvevals_own_group_stops_nothing(tmp_path: Path) -> None:
    """The record names the group kveval leads, with its start time: kveval once sent
    SIGTERM to itself and the shell that ran it."""
    suite = write_suite(tmp_path, 40)
    shim = ("import os,sys,msgspec\n"
            "from kveval.run.leftover import Record\n"
            "from kveval.run.watchdog import boot_id, start_ticks\n"
            "me = os.getpid()\n"
            "os.makedirs(sys.argv[1], exist_ok=True)\n"
            "open(sys.argv[1] + '/baseline.pid', 'wb').write(msgspec.json.encode("
            "Record(me, start_ticks(me), boot_id(), 'baseline')))\n"
            "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])\n")
    argv = command(tmp_path, suite)
    done = subprocess.run([sys.executable, "-c", shim, str(tmp_path / "ab" / "servers"),
                           *argv[1:]], capture_output=True, text=True, timeout=120,
                          env=environment(), start_new_session=True)
    assert done.returncode == 0, done.stderr
    assert LEFT not in done.stderr


@pytest.mark.parametrize("kind", ["huge pid", "negative ticks", "not json", "fifo", "folder"])
def test_a_record_that_is_not_one_is_one_line_exit_2(tmp_path: Path, kind: str) -> None:
    record = tmp_path / "ab" / "servers" / "baseline.pid"
    if kind == "fifo":
        record.parent.mkdir(parents=True)
        os.mkfifo(record)
    elif kind == "folder":
        record.mkdir(parents=True)
    else:
        write_record(tmp_path, {
            "huge pid": b'{"pid": %d, "start_ticks": 1, "boot_id": "x"}' % 2**70,
            "negative ticks": b'{"pid": 5, "start_ticks": -1, "boot_id": "x"}',
            "not json": b"garbage"}[kind])
    started = time.monotonic()
    done = ab(tmp_path, write_suite(tmp_path, 40), timeout=60)
    assert time.monotonic() - started < 30
    assert done.returncode == 2 and "Traceback" not in done.stderr
    line = [line for line in done.stderr.splitlines() if line.strip()][-1]
    assert str(record) in line and "baseline.log" not in line


def test_the_mark_is_in_a_started_servers_environment(tmp_path: Path) -> None:
    """What lets a rerun stop a wrapped server whose wrapper has exited."""
    done = ab(tmp_path, write_suite(tmp_path, 40), "--teacher-force", "off",
              serve_cmd=f"env {sys.executable} {Path(__file__).parent / 'ab_server.py'} "
                        f"--port {{port}} --echo-env {MARK}")
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "ab" / "servers" / "baseline.log").read_text()
    assert f"env {MARK}=" in log and f":{boot_id()}" in log
    assert mark(1, 2).endswith(f":{boot_id()}")
