"""Whole files written atomically, to regular files only: a temporary file in the same
folder, synced, then renamed over the target. A failure (a full disk, `ulimit -f`) leaves the
old file or no file, never half of a new one; the temporary file never outlives it.

Every output kveval writes (run files, pages, job summaries) is a regular file or a new
path: a device, a named pipe, a socket or a folder, or a symlink to one, is refused
(`NotRegular`, an OSError naming what the path is) before anything is written, and a rename
never replaces a device node."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

_KINDS = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a folder"))


class NotRegular(OSError):
    """An output path that is not a regular file (or a link to one) nor a new path."""


def kind(mode: int) -> str | None:
    """None for a regular file, else what the path is."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def regular_target(path: str | Path) -> Path:
    """The file a write to `path` replaces (through a symlink, its target): a regular file
    or a new path; NotRegular for anything else."""
    target = Path(os.path.realpath(path))
    try:
        mode = os.stat(target).st_mode
    except OSError:  # a new path (or one the write itself will say it cannot make)
        return target
    what = kind(mode)
    if what is not None:
        link = " (through a symlink)" if os.path.islink(path) else ""
        raise NotRegular(f"is {what}{link}, not a regular file; kveval writes regular files "
                         "or new paths only")
    return target


def write_bytes(path: str | Path, data: bytes) -> None:
    """Replace `path` by `data` in one rename; raises OSError with nothing changed.

    Through a symlink the target is written and the link stays; an existing file keeps
    its mode, a new one follows the umask."""
    target = regular_target(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{secrets.token_hex(4)}"
    mode = stat.S_IMODE(target.stat().st_mode) if target.is_file() else None
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        with os.fdopen(fd, "wb") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        regular_target(path)  # still no device where the rename lands
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_text(path: str | Path, text: str) -> None:
    """`text` (a page, a Markdown block) through the one door out (kveval/sink.py)."""
    from kveval.sink import file_text

    write_bytes(path, file_text(text).encode("utf-8"))


def append_text(path: str | Path, text: str) -> None:
    """`text` appended to a regular file (a GitHub job summary), through the one door out."""
    from kveval.sink import file_text

    with open(regular_target(path), "a", encoding="utf-8") as out:
        out.write(file_text(text))
