"""A record of every server `kveval ab` starts, `DIR/servers/LABEL.pid`, so that a rerun
stops one that an earlier kveval left running before it starts anew.

The record holds the server's process id (the leader of its process group), its start time
(/proc/PID/stat) and the boot it started in; it is written once the server is started and
removed once it is stopped. The watchdog (run/watchdog.py) ends a server whose kveval died;
the record is for what outlives both (a watchdog killed with kveval's whole scope, a machine
that took the watchdog down). A rerun stops a recorded server only while it is provably the
one recorded (the same boot, the leader's start time unchanged, or the leader gone and every
member of its group marked as its own: watchdog.ours), never by name, never a process that
took its number since, never kveval's own group. Every number of a record is bounded; a
record that is not one is one line (exit 2), never guessed at.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Annotated

import click
import msgspec

from kveval.errors import RunFileError
from kveval.run.watchdog import PID_MAX, boot_id, end_group, ended, ours, start_ticks

RECORD_BYTES = 4096  # a record larger than this is not one
Pid = Annotated[int, msgspec.Meta(ge=1, le=PID_MAX)]
Ticks = Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)]
Text = Annotated[str, msgspec.Meta(max_length=256)]


class Record(msgspec.Struct, frozen=True):
    pid: Pid
    start_ticks: Ticks | None
    boot_id: Text | None
    label: Text = ""
    owner: Pid | None = None  # the kveval that started it, and when that one started
    owner_ticks: Ticks | None = None


class Owned(RunFileError):
    """The recorded server belongs to a kveval that is still running."""


def record_of(log: Path) -> Path:
    """Where the record of the server logging to `log` goes: beside it, `LABEL.pid`."""
    return log.with_suffix(".pid")


def write_record(path: Path, pid: int, label: str) -> None:
    """The record of a started server (raises OSError, NotRegular: nothing written)."""
    from kveval.atomic import write_bytes

    me = os.getpid()
    record = Record(pid, start_ticks(pid), boot_id(), label, me, start_ticks(me))
    write_bytes(path, msgspec.json.encode(record) + b"\n")


def read_record(path: Path) -> Record | None:
    """The record on file, or None where there is none; RunFileError (one line) where the
    path holds something else than a record."""
    from kveval.formats.limits import read_whole
    from kveval.safe import terminal

    try:
        return msgspec.json.decode(read_whole(path, RECORD_BYTES), type=Record)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RunFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise RunFileError(f"{path}: not a record of a server kveval started "
                           f"({terminal(str(exc))}); stop any server of this experiment still "
                           "running, then remove it") from None


def remove_record(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_file() or path.is_symlink():
            path.unlink()


def alive(record: Record) -> bool:
    """The recorded server's group is still there, and still the one recorded."""
    return (record.boot_id is not None and record.boot_id == boot_id()
            and record.pid > 1 and ours(record.pid, record.start_ticks))


def owned(record: Record) -> bool:
    """The kveval that started the server runs still (another one than this)."""
    if record.owner is None or record.owner_ticks is None or record.owner == os.getpid():
        return False
    return start_ticks(record.owner) == record.owner_ticks and not ended(record.owner)


def stop_recorded(path: Path, grace: float) -> int | None:
    """Stop the server the record at `path` names where it is still running and the kveval
    that started it is not (Owned, one line, where it is); the record removed. The process
    id stopped, or None."""
    record = read_record(path)
    if record is not None and alive(record) and owned(record):
        raise Owned(f"{path.parent.parent}: another kveval (process {record.owner}) runs its "
                    f"server {record.label or path.stem} now; let that `kveval ab` end (or "
                    "stop it), or give this one another -o DIR")
    stopped = None
    if record is not None and alive(record):
        click.echo(f"kveval ab: {record.label or path.stem}: stopping the server an earlier "
                   f"kveval left running (process group {record.pid})", err=True)
        end_group(record.pid, record.start_ticks, grace)
        stopped = record.pid
    if path.exists():
        remove_record(path)
    return stopped


def stop_leftovers(servers: Path, grace: float) -> list[int]:
    """Every server recorded in the folder (`DIR/servers`) and still running, stopped."""
    if not servers.is_dir():
        return []
    found = [stop_recorded(path, grace) for path in sorted(servers.glob("*.pid"))]
    return [pid for pid in found if pid is not None]
