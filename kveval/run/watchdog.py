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
  is the one the launcher led (`ours`: the leader's start time unchanged, or the leader gone
  and members left, which Linux never gives another group's id).

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


def start_ticks(pid: int) -> int | None:
    """When the process started (clock ticks since boot: /proc/PID/stat's 22nd field), or
    None where it is gone or there is no /proc. A zombie keeps its start time: a group whose
    leader ended is still that group while members are left."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def ended(pid: int) -> bool:
    """The process has ended: gone, or a zombie waiting for its reaper."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2:].split()[:1] in ([b"Z"], [b"X"])


def members(pgid: int) -> bool:
    """Some process is in the group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ours(pgid: int, started: int | None) -> bool:
    """The group is still the one whose leader started at `started`: the leader alive with
    that start time, or gone with members left (a group's id is not reused while it has
    members); never a process that took the number since."""
    if started is None or not members(pgid):
        return False
    now = start_ticks(pgid)
    return now == started or (now is None and not os.path.exists(f"/proc/{pgid}"))


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
    _fork_watchdog(fd, grace)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"cannot run {command[0]}: {exc.strerror}", file=sys.stderr, flush=True)
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
