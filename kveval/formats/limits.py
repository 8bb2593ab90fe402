"""What kveval reads, and how much: regular files only, bounded sizes, bounded nesting.

A named pipe, a device or a socket given as a run file would block a reader or feed it
without end (`/dev/zero`); a line or a file past its cap, or JSON nested past MAX_DEPTH,
would exhaust memory or the stack. Each is one line naming the file and the cap, raised as
the caller's error class, before anything is judged.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from kveval.atomic import kind
from kveval.errors import KvevalError, RunFileError

MiB = 1 << 20
GiB = 1 << 30
MAX_DEPTH = 64  # nesting of any JSON value read (run-file lines, lm-eval logs, answer arrays)
MAX_LINE_BYTES = 512 * MiB  # one run-file line: a 100 MB answer fits with room for escapes
MAX_RUN_FILE_BYTES = 64 * GiB  # a run file, streamed line by line
MAX_WHOLE_BYTES = 2 * GiB  # a file read whole: lm-eval logs, answer arrays, prompt files
MAX_SUITE_BYTES = 16 * MiB  # a suite's TOML

_SURROGATES = re.compile("[\ud800-\udfff]")


def size_text(size: int) -> str:
    return f"{size // GiB} GiB" if size >= GiB and size % GiB == 0 else f"{size // MiB} MiB"


def _check(path: str | Path, st: os.stat_result, cap: int, error: type[KvevalError],
           folder_ok: bool = False) -> None:
    what = kind(st.st_mode)
    if what == "a folder" and folder_ok:
        return
    if what is not None:
        raise error(f"{path}: is {what}, not a regular file; kveval reads regular files only")
    if st.st_size > cap:
        raise error(f"{path}: {st.st_size:,} bytes, above the {size_text(cap)} cap on files "
                    "kveval reads")


def check_input(path: str | Path, cap: int | None = None,
                error: type[KvevalError] = RunFileError, folder_ok: bool = False) -> None:
    """A path that does not exist passes (the reader says so); anything but a regular file
    within `cap` bytes (default MAX_WHOLE_BYTES), or a folder where `folder_ok`, is `error`.
    Never opens it, so a named pipe cannot block."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return
    _check(path, st, MAX_WHOLE_BYTES if cap is None else cap, error, folder_ok)


@contextlib.contextmanager
def open_regular(path: str | Path, cap: int | None = None,
                 error: type[KvevalError] = RunFileError) -> Iterator[IO[bytes]]:
    """The file opened for reading once it is known to be a regular file within `cap`
    bytes (default MAX_RUN_FILE_BYTES): opened without blocking (a FIFO cannot hang it),
    checked on the descriptor itself, then read as usual."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        _check(path, os.fstat(fd), MAX_RUN_FILE_BYTES if cap is None else cap, error)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh


def read_whole(path: str | Path, cap: int | None = None,
               error: type[KvevalError] = RunFileError) -> bytes:
    """A regular file's bytes, at most `cap` (default MAX_WHOLE_BYTES) of them; a file that
    grows past it while read is refused too."""
    cap = MAX_WHOLE_BYTES if cap is None else cap
    with open_regular(path, cap, error) as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise error(f"{path}: above the {size_text(cap)} cap on files kveval reads")
    return data


def lines(fh: IO[bytes], path: str | Path, first: int = 1,
          cap: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(number, line) for each line, none longer than `cap` bytes (default MAX_LINE_BYTES;
    else RunFileError)."""
    cap = MAX_LINE_BYTES if cap is None else cap
    number = first
    while line := fh.readline(cap + 1):
        if len(line) > cap and not line.endswith(b"\n"):
            raise RunFileError(f"{path}:{number}: line longer than the {size_text(cap)} cap "
                               "on a run-file line")
        yield number, line
        number += 1


# ---------------------------------------------------------------- nesting


def depth(value: Any, stop: int = MAX_DEPTH + 1) -> int:
    """How deeply lists and objects nest in `value` (a scalar is 0), counted without
    recursion and at most to `stop`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, list):
            continue
        level += 1
        if level >= stop:
            return level
        deepest = max(deepest, level)
        stack.extend((child, level) for child in node if isinstance(child, (dict, list)))
    return deepest


def too_deep(value: Any) -> bool:
    return depth(value) > MAX_DEPTH


DEPTH_MESSAGE = f"nested deeper than the cap of {MAX_DEPTH} levels"


def loads(text: str | bytes, where: str, error: type[KvevalError] = RunFileError) -> Any:
    """json.loads with its nesting capped: deeper JSON is `error`, never a RecursionError
    (json.JSONDecodeError stays the caller's to word). The value comes back `writable`: a
    lone surrogate could be neither printed nor written, NaN not written as JSON."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise error(f"{where}: {DEPTH_MESSAGE}") from None
    if too_deep(value):
        raise error(f"{where}: {DEPTH_MESSAGE}")
    return writable(value, MAX_DEPTH + 1)


def without_surrogates(text: str) -> str:
    """`text` with each lone surrogate (JSON can escape one, UTF-8 cannot hold it) as U+FFFD."""
    return _SURROGATES.sub("\ufffd", text)


def writable(value: Any, room: int = MAX_DEPTH - 8) -> Any:
    """A JSON value from a server as kveval can write it and read it back: NaN and the
    infinities (not JSON) as None, lone surrogates (not UTF-8) as U+FFFD, and anything
    nested more than `room` levels deep as a note saying so."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return without_surrogates(value)
    if not isinstance(value, (dict, list)):
        return value
    if room <= 0:
        return f"({DEPTH_MESSAGE})"
    if isinstance(value, list):
        return [writable(v, room - 1) for v in value]
    return {writable(k, room): writable(v, room - 1) for k, v in value.items()}
