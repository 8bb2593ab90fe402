"""The launcher of a server `kveval ab` starts, and the watchdog that ends the server when
kveval dies, however it dies (`kill -9` too). Standard library only: it runs as a script,

    python watchdog.py PARENT_PID WATCH_FD GRACE_S ARGV...

in the process group of its own that the supervisor (run/serve.py) gives it. It asks Linux to
kill it when kveval dies (PR_SET_PDEATHSIG), then forks the watchdog: a tiny process in a
session of its own (a terminal's Ctrl-C or hang-up does not reach it) that holds the read end
of a pipe whose only write end kveval holds. Then it execs the server command, so the server
is the process kveval started, the leader of its group. A wrapper script's children are in
that group too: PR_SET_PDEATHSIG alone ends only the wrapper.

- kveval stops the server itself: it ends the group, then writes one byte to the pipe; the
  watchdog reads it and exits.
- kveval dies: the pipe reads end of file; the watchdog sends SIGTERM to the group, SIGKILL
  after the grace period, and exits once the group is gone. It ends the group only while it
  is the one the launcher led (`ours`: the leader's start time unchanged; or, the leader gone,
  every member marked as the launcher's: the launcher puts `KVEVAL_SERVER_GROUP=PID:START:BOOT`
  in the server's environment, which its children inherit). Never the group of the process
  that asks, never a number past the kernel's largest process id.

`start_ticks` and `ours` are the same rule a rerun applies to a server recorded in
`servers/LABEL.pid` (run/leftover.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

POLL_S = 0.05
GONE_S = 10.0  # after SIGKILL: how long the group may take to go
PID_MAX = 1 << 22  # Linux's largest process id (pid_max's ceiling)
MARK = "KVEVAL_SERVER_GROUP"  # in a server's environment: the group kveval started it in
ENVIRON_BYTES = 4 << 20  # of /proc/PID/environ read for the mark


def boot_id() -> str | None:
    with contextlib.suppress(OSError, UnicodeDecodeError), \
            open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
        return fh.read().strip()
    return None


def mark(pgid: int, started: int | None) -> str:
    """What every process of the group kveval started carries: its leader, the leader's start
    time, the boot."""
    return f"{pgid}:{started}:{boot_id()}"


def _fields(pid: int) -> list[bytes] | None:
    """/proc/PID/stat's fields after the command's name (state, ppid, pgrp, ...)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return stat[stat.rindex(b")") + 2:].split()
    except (OSError, ValueError):
        return None


def start_ticks(pid: int) -> int | None:
    """When the process started (clock ticks since boot: /proc/PID/stat's 22nd field), or
    None where it is gone or there is no /proc. A zombie keeps its start time: a group whose
    leader ended is still that group while members are left."""
    fields = _fields(pid)
    try:
        return int(fields[19]) if fields else None
    except (ValueError, IndexError):
        return None


def ended(pid: int) -> bool:
    """The process has ended: gone, or a zombie waiting for its reaper."""
    fields = _fields(pid)
    return fields is None or fields[:1] in ([b"Z"], [b"X"])


def members(pgid: int) -> bool:
    """Some process is in the group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group(pgid: int) -> list[int]:
    """The processes of the group, as /proc lists them."""
    try:
        names = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    return [pid for pid in names if (fields := _fields(pid)) and fields[2:3] == [b"%d" % pgid]]


def _marked(pid: int, entry: bytes) -> bool:
    """The process carries `entry` in its environment."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return entry in b"\0" + fh.read(ENVIRON_BYTES)
    except OSError:
        return False


def ours(pgid: int, started: int | None) -> bool:
    """The group is still the one whose leader started at `started`: the leader alive with
    that start time, or gone with every member marked as that leader's (`mark`); never a
    process that took the number since, never the asking process's own group."""
    if started is None or not 1 < pgid <= PID_MAX or pgid == os.getpgrp() or not members(pgid):
        return False
    now = start_ticks(pgid)
    if now is not None or os.path.exists(f"/proc/{pgid}"):
        return now == started
    entry = f"\0{MARK}={mark(pgid, started)}\0".encode()
    live = [pid for pid in group(pgid) if not ended(pid)]  # a zombie holds nothing to stop
    return bool(live) and all(_marked(pid, entry) for pid in live)


def end_group(pgid: int, started: int | None, grace: float) -> None:
    """SIGTERM to the group, SIGKILL after `grace`; back once it is gone (or is no longer
    the group that was meant)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, GONE_S)):
        if not ours(pgid, started):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        until = time.monotonic() + wait
        while ours(pgid, started) and time.monotonic() < until:
            time.sleep(POLL_S)


def watch(fd: int, pgid: int, started: int | None, grace: float) -> None:
    """Wait on the pipe; at its end of file without kveval's byte, end the group."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    while True:
        try:
            said = os.read(fd, 1)
            break
        except InterruptedError:
            continue
        except OSError:
            said = b""
            break
    if not said:
        end_group(pgid, started, grace)


def _fork_watchdog(fd: int, grace: float) -> None:
    """The watchdog, twice forked so that it is no child of the server, in its own session."""
    leader = os.getpid()
    started = start_ticks(leader)
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        os.close(fd)
        return
    if os.fork():
        os._exit(0)
    os.setsid()
    with contextlib.suppress(OSError):
        os.closerange(3, fd)
        os.closerange(fd + 1, 1 << 16)
        null = os.open(os.devnull, os.O_RDWR)
        for std in (0, 1, 2):
            os.dup2(null, std)
    watch(fd, leader, started, grace)
    os._exit(0)


def die_with_parent() -> None:
    """SIGKILL to this process when its parent dies (PR_SET_PDEATHSIG; nothing elsewhere)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the watchdog alone
        pass


def main(argv: list[str]) -> None:
    parent, fd, grace, command = int(argv[0]), int(argv[1]), float(argv[2]), argv[3:]
    die_with_parent()
    if os.getppid() != parent:
        sys.exit(1)
    os.environ[MARK] = mark(os.getpid(), start_ticks(os.getpid()))
    _fork_watchdog(fd, grace)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"cannot run {command[0]}: {exc.strerror}", file=sys.stderr, flush=True)
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
