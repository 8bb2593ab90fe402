"""SIGTERM and SIGHUP stop any command as Ctrl-C does, so it ends with one line that says
what it left (a run: what its file holds), never silently.

A plain SIGTERM or SIGHUP (a closed terminal, a CI job cancelled) would kill the process
without a word. Here either raises KeyboardInterrupt where Ctrl-C would: a run's requests
are cancelled between two records, so its file stays whole; `report` and the other commands
stop before writing anything half. The exit code is 128 plus the signal's number (130 for
Ctrl-C, 143 for SIGTERM, 129 for SIGHUP). Standard library only: the command line asks
`terminated()` without loading the runner.

The first of them stops the command; every later one, of any of the three, only hurries
what is stopping (`hurried()`: a server's grace cut short) and never raises again, so the
command still ends in its one line however many come, and a child of `ab --parallel`, which
gets the terminal's Ctrl-C and then its parent's SIGTERM, ends without a word. A run's
sending (`run`) is cancelled by the first, as asyncio's own Ctrl-C handling would.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_TERMINATED: list[int] = []
_CANCEL: list[Callable[[], object]] = []  # the running sending's cancel, while there is one
T = TypeVar("T")


def terminated() -> bool:
    return bool(_TERMINATED)


def hurried() -> bool:
    """Whether a second interrupt came: what is stopping should stop at once."""
    return len(_TERMINATED) > 1


def exit_code() -> int:
    """128 plus the signal that stopped the command (SIGINT's 130 for Ctrl-C)."""
    return 128 + (_TERMINATED[0] if _TERMINATED else signal.SIGINT)


def how() -> str:
    """What stopped it, in words: Ctrl-C, SIGTERM or SIGHUP."""
    first = _TERMINATED[0] if _TERMINATED else signal.SIGINT
    return "Ctrl-C" if first == signal.SIGINT else signal.Signals(first).name


def on_signal(signum: int, frame: Any) -> None:
    """The first interrupt stops the command: it cancels a running sending, else raises
    KeyboardInterrupt; a later one is only counted (`hurried`)."""
    _TERMINATED.append(signum)
    if len(_TERMINATED) > 1:
        return
    if _CANCEL:
        _CANCEL[-1]()
        return
    raise KeyboardInterrupt


@contextlib.contextmanager
def signals_as_interrupt(to_exit: bool = False) -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP stop the command, the first of them only (on_signal).
    `to_exit` (a process that ends with the command): once interrupted, it ignores them,
    so one after the command's last line, as Python exits, is no death by a signal."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {signum: signal.signal(signum, on_signal) for signum in STOPPING}
    _TERMINATED.clear()
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, signal.SIG_IGN if to_exit and terminated() else handler)


def run(sending: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, where the first interrupt cancels the sending's task (asyncio's own
    Ctrl-C handling, which a second Ctrl-C would break with a KeyboardInterrupt anywhere):
    the sending ends at its next await, and KeyboardInterrupt is raised once it has."""
    import asyncio

    async def cancellable() -> T:
        task, loop = asyncio.current_task(), asyncio.get_running_loop()
        assert task is not None  # a coroutine run by asyncio.run runs in a task
        _CANCEL.append(lambda: loop.call_soon_threadsafe(task.cancel))
        try:
            kept = await sending
        except asyncio.CancelledError:
            if terminated():
                raise KeyboardInterrupt from None
            raise
        finally:
            _CANCEL.pop()
        if terminated():  # it stopped at the cancel and returned what it kept
            raise KeyboardInterrupt
        return kept

    return asyncio.run(cancellable())
