"""A server's log thinned of its per-request lines (run/relay.py writes through it).

llama-server logs about ten lines a request (the slot launched, the prompt processed, the
timings, the request itself); forcing a document a token at a time is one request a token, so a
forced pass would log megabytes of lines that differ only in their numbers. A line is read by
its shape (every run of digits one `#`); the first KEEP lines of each shape are written, later
ones are counted and left out, and one line says how many before the next line written (and
at the end). A start's own lines, a failure's and anything new are each the first of their
shape, so they are always written.
"""

from __future__ import annotations

import re
from collections.abc import Callable

KEEP = 20  # lines of one shape written before the rest are counted instead
SHAPES = 10_000  # shapes remembered; a log with more writes the rest whole
_DIGITS = re.compile(r"\d+")


def shape(line: str) -> str:
    return _DIGITS.sub("#", line.strip())


class Thinning:
    """Writes lines through `write`, the repeated shapes beyond KEEP left out and counted."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.seen: dict[str, int] = {}
        self.left_out = 0

    def line(self, text: str) -> None:
        key = shape(text)
        times = self.seen.get(key, 0)
        if times >= KEEP:
            self.seen[key] = times + 1
            self.left_out += 1
            return
        if len(self.seen) < SHAPES or key in self.seen:
            self.seen[key] = times + 1
        self.flush()
        self.write(text)

    def flush(self) -> None:
        """The count of lines left out since the last line written, as one line."""
        if self.left_out:
            self.write(f"[kveval: {self.left_out:,} more lines like the ones above left out "
                       f"(a line's first {KEEP} of each shape are kept)]\n")
            self.left_out = 0
