"""Whole files written atomically: a temporary file in the same folder, synced, then renamed
over the target. A failure (a full disk, `ulimit -f`) leaves the old file or no file, never
half of a new one; the temporary file never outlives it."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path


def write_bytes(path: str | Path, data: bytes) -> None:
    """Replace `path` by `data` in one rename; raises OSError with nothing changed.

    Through a symlink the target is written and the link stays; an existing file keeps
    its mode, a new one follows the umask."""
    target = Path(os.path.realpath(path))
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
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_text(path: str | Path, text: str) -> None:
    """`text` (a page, a Markdown block) through the one door out (kveval/sink.py)."""
    from kveval.sink import file_text

    write_bytes(path, file_text(text).encode("utf-8"))
