"""The relay of a started server's output into its log (run/serve.py starts it): through
the one door out (every registered secret masked), a whole line at a time, the last line held
back until the next one comes (or HOLD_S of silence, or the end), so that a key the server
logs split across two lines is masked whole; per-request lines repeated beyond a few of each
shape are counted, not written (run/thinning.py).
"""

from __future__ import annotations

import os
import select
from typing import BinaryIO

from kveval.run.thinning import Thinning

TAIL_BYTES = 64 << 10  # a line longer than this is written as it comes
HOLD_S = 0.5  # the last line waits this long for the next before it is written alone


class Relay:
    """Lines into the log, masked, each held until the next so that a secret split across
    the two is masked whole."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.partial = b""  # the start of a line not ended yet
        self.last: str | None = None  # the last whole line, not written yet
        self.thinning = Thinning(self._out)

    def _out(self, text: str) -> None:
        from kveval.sink import file_text

        self.out.write(file_text(text).encode("utf-8"))
        self.out.flush()

    def _write(self, text: str) -> None:
        if text:
            self.thinning.line(text)

    def line(self, text: str) -> None:
        from kveval.sink import file_text

        if self.last is None:
            self.last = text
            return
        joined = self.last + text
        if file_text(joined) == file_text(self.last) + file_text(text):
            self._write(self.last)
            self.last = text
        else:  # a secret across the two lines: masked as one text
            self._write(joined)
            self.last = None

    def add(self, chunk: bytes) -> None:
        held = self.partial + chunk
        end = max(held.rfind(b"\n"), held.rfind(b"\r")) + 1
        if not end and len(held) > TAIL_BYTES:
            end = len(held)
        whole, self.partial = held[:end], held[end:]
        for part in whole.decode("utf-8", "replace").splitlines(keepends=True):
            self.line(part)

    def idle(self) -> None:
        if self.last is not None:
            self._write(self.last)
            self.last = None

    def end(self) -> None:
        self._write((self.last or "") + self.partial.decode("utf-8", "replace"))
        self.thinning.flush()
        self.last, self.partial = None, b""


def copy_output(source: BinaryIO, out: BinaryIO) -> None:
    """The server's output into its open log until the server closes it; closes both."""
    relay = Relay(out)
    fd = source.fileno()
    with source, out:
        while True:
            if not select.select([fd], [], [], HOLD_S)[0]:
                relay.idle()
                continue
            chunk = os.read(fd, TAIL_BYTES)
            if not chunk:
                break
            relay.add(chunk)
        relay.end()
