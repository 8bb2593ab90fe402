"""SIGTERM and SIGHUP stop any command as Ctrl-C does, so it ends with one line that says
what it left (a run: what its file holds), never silently.

A plain SIGTERM or SIGHUP (a closed terminal, a CI job cancelled) would kill the process
without a word. Here either raises KeyboardInterrupt where Ctrl-C would: a run's requests
are cancelled between two records, so its file stays whole; `report` and the other commands
stop before writing anything half. The exit code is 128 plus the signal's number (130 for
Ctrl-C, 143 for SIGTERM, 129 for SIGHUP). Standard library only: the command line asks
`terminated()` without loading the runner.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

STOPPING = (signal.SIGTERM, signal.SIGHUP)
_TERMINATED: list[int] = []


def terminated() -> bool:
    return bool(_TERMINATED)


def exit_code() -> int:
    """128 plus the signal that stopped the command (SIGINT's 130 for Ctrl-C)."""
    return 128 + (_TERMINATED[-1] if _TERMINATED else signal.SIGINT)


def how() -> str:
    """What stopped it, in words: Ctrl-C, SIGTERM or SIGHUP."""
    return signal.Signals(_TERMINATED[-1]).name if _TERMINATED else "Ctrl-C"


@contextlib.contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP stop the command as Ctrl-C does: asyncio's own SIGINT handling
    cancels a run's requests between two records, so the file stays whole and the message
    says what it holds."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: Any) -> None:
        _TERMINATED.append(signum)
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    old = {signum: signal.signal(signum, on_signal) for signum in STOPPING}
    _TERMINATED.clear()
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
