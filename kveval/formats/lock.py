"""An advisory lock on a run file while it is written, so a second writer is refused.

`run -o X` holds an exclusive `fcntl.flock` on X from the moment it writes the file until
it ends. A second `run -o X --resume` (or `--overwrite`) finds the lock taken and stops
with one line before it sends anything; without the lock it replaced the file under the
first run, whose answers then went to a deleted file. The lock is advisory: readers
(compare, score, gate) never take it and read the file as it is. A filesystem that cannot
lock at all (NFS without its lock daemon: ENOLCK; some FUSE and SMB mounts: EOPNOTSUPP) is
one line and exit 2 before anything on file changes: a run there would go unguarded.
`kveval ab` holds the same lock on its folder (`folder_held`) for the length of an
experiment, so a second one in the folder is refused before it starts a server.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from kveval.atomic import NotRegular, regular_target
from kveval.errors import RunFileError

BUSY = ("another kveval run is writing it; let that run end (or stop it), or write "
        "elsewhere with another -o")
FOLDER_BUSY = ("another kveval ab is running in this folder; let it end (or stop it), or give "
               "this one another -o DIR")
FOLDER_LOCK = ".kveval-ab.lock"


UNLOCKABLE = ("cannot be locked here ({why}); kveval locks a run file while it writes it, "
              "so that no second run replaces it: write it on a local filesystem")


def take(fd: int, shown: str | Path) -> bool:
    """An exclusive lock on the open file, without waiting; False when another holds it,
    RunFileError when the filesystem takes no locks."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:
        raise RunFileError(f"{shown}: {UNLOCKABLE.format(why=exc.strerror or exc)}") from None
    return True


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


@contextlib.contextmanager
def held(target: Path, shown: str | Path) -> Iterator[None]:
    """The lock of the file at `target` (if one is there), held while it is replaced; a
    file another writer holds, or replaced while this one waited, or no regular file at all
    (a device, a socket: atomic.regular_target), is RunFileError."""
    try:
        regular_target(target)
    except NotRegular as exc:
        raise RunFileError(f"{shown}: {exc}") from None
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, PermissionError):  # nothing there, or nothing kveval wrote
        yield
        return
    try:
        if not take(fd, shown) or not _same_file(fd, target):
            raise RunFileError(f"{shown}: {BUSY}")
        yield
    finally:
        os.close(fd)


def refuse_busy(path: str | Path) -> None:
    """Before any work: refuse a run file that another run writes now (asked again when
    the file is written)."""
    with held(Path(os.path.realpath(path)), path):
        pass


@contextlib.contextmanager
def folder_held(folder: Path) -> Iterator[None]:
    """An exclusive lock on `folder` (its FOLDER_LOCK file) for the with-block; RunFileError
    where another kveval ab holds it or the filesystem takes no locks."""
    from kveval.atomic import open_append

    try:
        fh = open_append(folder / FOLDER_LOCK)
    except OSError as exc:
        raise RunFileError(f"{folder / FOLDER_LOCK}: cannot open ({exc.strerror or exc})") \
            from None
    with fh:
        if not take(fh.fileno(), folder):
            raise RunFileError(f"{folder}: {FOLDER_BUSY}")
        yield
