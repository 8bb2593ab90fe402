"""Whole files written atomically, to regular files only: a temporary file in the same
folder, synced, then renamed over the target. A failure (a full disk, `ulimit -f`) leaves the
old file or no file, never half of a new one; the temporary file never outlives it.

Every output kveval writes (run files, pages, job summaries) is a regular file or a new
path: a device, a named pipe, a socket or a folder, or a symlink to one, is refused
(`NotRegular`, an OSError naming what the path is) before anything is written, and a rename
never replaces a device node. A file kept open for appending (a server's log) is opened
without blocking on a named pipe and checked once open (`open_append`); an output folder is
a new path or a folder kveval can write in (`make_folder`)."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

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


def open_append(path: str | Path) -> BinaryIO:
    """`path` opened for appending bytes: a regular file or a new one (through a symlink,
    its target), never a named pipe to hang on nor a device to write through (NotRegular)."""
    target = regular_target(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(target, flags, 0o666)
    try:
        what = kind(os.fstat(fd).st_mode)  # what was opened, whatever the path became since
        if what is not None:
            raise NotRegular(f"is {what}, not a regular file; kveval writes regular files "
                             "or new paths only")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "ab")
    except BaseException:
        os.close(fd)
        raise


def _writable_folder(folder: Path) -> None:
    fd, probe = tempfile.mkstemp(prefix=".kveval-", dir=folder)
    os.close(fd)
    os.unlink(probe)


def make_folder(path: str | Path) -> Path:
    """An output folder: made where it is a new path, kept where it is a folder; NotRegular
    (an OSError) for anything else (a file, a named pipe, a device, a path under a file),
    OSError where nothing can be written in it (a read-only filesystem)."""
    target = Path(os.path.realpath(path))
    try:
        mode: int | None = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except NotADirectoryError:
        raise NotRegular("is under a file, not a folder; -o names a new or an existing "
                         "folder") from None
    if mode is not None and not stat.S_ISDIR(mode):
        raise NotRegular(f"is {kind(mode) or 'a regular file'}, not a folder; -o names a new "
                         "or an existing folder")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except (NotADirectoryError, FileExistsError):
        raise NotRegular("is under a file, not a folder; -o names a new or an existing "
                         "folder") from None
    _writable_folder(target)
    return target


def output_folder(path: str | Path) -> Path:
    """`make_folder` for an -o DIR: one line naming it (RunFileError, exit 2) when refused."""
    from kveval.errors import RunFileError

    try:
        return make_folder(path)
    except NotRegular as exc:
        raise RunFileError(f"{path}: {exc}") from None
    except OSError as exc:
        raise RunFileError(f"{path}: cannot write in this folder "
                           f"({exc.strerror or exc})") from None
