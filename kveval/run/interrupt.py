"""SIGTERM stops `kveval run` as Ctrl-C does, so the message says what the run file holds.

Standard library only: the command line asks `terminated()` without loading the runner.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

_TERMINATED: list[int] = []


def terminated() -> bool:
    return bool(_TERMINATED)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops a run as Ctrl-C does: asyncio's own SIGINT handling cancels the
    requests between two records, so the file stays whole and the message says what it
    holds (a plain SIGTERM would kill the process without a word)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: Any) -> None:
        _TERMINATED.append(signum)
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    _TERMINATED.clear()
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
