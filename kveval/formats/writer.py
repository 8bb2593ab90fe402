"""Writing the run file: create, resume (rewrite then append), append one line per item.

Appending is the only write during a run. Every failure is one RunFileError line that says
what is on file; nothing half-written is left behind.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import stat
import threading
from collections.abc import Iterable
from pathlib import Path

from kveval.atomic import regular_target
from kveval.errors import RunFileError
from kveval.formats import lock
from kveval.formats.limits import without_surrogates
from kveval.formats.records import ItemRecord, RunHeader, as_dict
from kveval.sink import json_text


class RunWriter:
    """Appends records to a run file, one whole line per write, so a crash loses at most one.

    A failed write (disk full, a file-size limit) is undone to the last whole line: the file
    stays valid, and the error says how many items it holds."""

    def __init__(self, fd: int, path: Path, count: int) -> None:
        self._fd = fd
        self._size = os.fstat(fd).st_size
        self.path = path
        self.count = count  # items on file

    def append(self, item: ItemRecord) -> None:
        data = line(item)
        try:
            _write_all(self._fd, data)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            raise RunFileError(full_message(self.path, exc, self.count)) from None
        self._size += len(data)
        self.count += 1

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def line(record: RunHeader | ItemRecord) -> bytes:
    """A record's line as written, through the one door out (kveval/sink.py: the run's
    secrets masked, C1 controls escaped); a lone surrogate a server sent (valid JSON, not
    UTF-8) becomes U+FFFD, so the line reads back."""
    text = json_text(as_dict(record)) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return without_surrogates(text).encode("utf-8")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def full_message(path: Path, exc: OSError, count: int) -> str:
    return (f"{path}: cannot write ({exc.strerror or exc}); the file is valid and holds "
            f"{count} item(s); `kveval run ... --resume` continues it")


def refuse_existing(path: Path) -> None:
    """An existing run file is never touched without --resume or --overwrite."""
    if path.exists():
        raise RunFileError(f"{path}: exists; pass --resume to continue it or --overwrite "
                           "to replace it")


def create_run(path: str | Path, header: RunHeader, overwrite: bool = False) -> RunWriter:
    """Start a new run file; refuse to touch an existing one unless overwrite is set."""
    path = Path(path)
    if not overwrite:
        refuse_existing(path)
    return _rewrite(path, header, [])


def reopen_run(path: str | Path, header: RunHeader, keep: Iterable[ItemRecord]) -> RunWriter:
    """Resume: atomically rewrite the file as header + kept items, then append to it."""
    return _rewrite(Path(path), header, keep)


def _rewrite(path: Path, header: RunHeader, keep: Iterable[ItemRecord]) -> RunWriter:
    """Write header + items to a temporary file beside the target, then rename it over.

    Through a symlink the target is written and the link stays; an existing file keeps its
    mode, a new one follows the umask; the temporary file never outlives a failure. The new
    file is locked before it takes the target's name, and the old one while it is replaced
    (formats/lock.py): a file another run writes is refused, never replaced."""
    _ignore_file_size_signal()
    target = Path(os.path.realpath(path))
    tmp = target.parent / f".{target.name}.{secrets.token_hex(4)}"
    try:
        regular_target(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with lock.held(target, path):
            mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else None
            fd, count = _write_new(tmp, header, keep, mode, path)
            try:
                regular_target(path)  # still no device where the rename lands
                os.replace(tmp, target)
            except OSError:
                os.close(fd)
                raise
        return RunWriter(fd, path, count)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise RunFileError(f"{path}: cannot write ({exc.strerror or exc}); "
                           "nothing on file changed") from None
    except BaseException:  # a lock the filesystem cannot take, an interrupt
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _write_new(tmp: Path, header: RunHeader, keep: Iterable[ItemRecord],
               mode: int | None, shown: Path) -> tuple[int, int]:
    """The new file's lines, synced to disk: its descriptor (locked, appending) and how many
    items it holds."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC,
                 0o666)  # the umask applies
    count = 0
    try:
        lock.take(fd, shown)  # a new file: nobody else holds it
        with os.fdopen(os.dup(fd), "wb") as fh:  # the same open file: offset and lock
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            fh.write(line(header))
            for item in keep:
                fh.write(line(item))
                count += 1
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        os.close(fd)
        raise
    return fd, count


def _ignore_file_size_signal() -> None:
    """Past `ulimit -f`, a write then fails with EFBIG instead of killing the process."""
    if hasattr(signal, "SIGXFSZ") and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


