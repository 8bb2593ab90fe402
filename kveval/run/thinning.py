"""A server's log thinned of its per-request lines (run/relay.py writes through it).

llama-server logs about ten lines a request (the slot launched, the prompt processed, the
timings, the request itself); forcing a document a token at a time is one request a token, so a
forced pass would log megabytes of lines that differ only in their numbers. A line is read by
its shape (every run of digits one `#`); the first KEEP lines of each shape are written, later
ones are counted and left out, and before the next line written (and at the end) one line
says how many, followed by the last one left out (a running total in it stays readable).
A start's own lines and anything new are each the first of their shape, and a line that
tells of a failure (an HTTP status of 400 or more, `error`, `warn`, `fail`) is always
written, so nothing a reader or kveval looks for is left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable

KEEP = 20  # lines of one shape written before the rest are counted instead
SHAPES = 10_000  # shapes remembered; a log with more writes the rest whole
_DIGITS = re.compile(r"\d+")
# a failure's words, or an HTTP status of 400 or more after an address or a protocol
_FAILURE = re.compile(r"(?i)error|warn|fail|exception|"
                      r"(?:HTTP/\d(?:\.\d)?\"?|\b\d{1,3}(?:\.\d{1,3}){3})\s+[45]\d\d\b")


def shape(line: str) -> int:
    """A line's text but for its numbers, hashed (a long line costs no memory kept)."""
    return hash(_DIGITS.sub("#", line.strip()))


class Thinning:
    """Writes lines through `write`, the repeated shapes beyond KEEP left out and counted."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.seen: dict[int, int] = {}
        self.left_out = 0
        self.last = ""  # the last line left out

    def line(self, text: str) -> None:
        key = shape(text)
        times = self.seen.get(key, 0)
        if times >= KEEP and not _FAILURE.search(text):
            self.seen[key] = times + 1
            self.left_out, self.last = self.left_out + 1, text
            return
        if len(self.seen) < SHAPES or key in self.seen:
            self.seen[key] = times + 1
        self.flush()
        self.write(text)

    def flush(self) -> None:
        """The count of lines left out since the last line written, and the last of them."""
        if self.left_out:
            self.write(f"[kveval: {self.left_out:,} more lines like the ones above left out "
                       f"(a line's first {KEEP} of each shape are kept); the last:]\n")
            self.write(self.last if self.last.endswith("\n") else self.last + "\n")
            self.left_out, self.last = 0, ""
