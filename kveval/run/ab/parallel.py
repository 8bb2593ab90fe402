"""`kveval ab --parallel N`: up to N servers up at once, each start in its own process.

Each start runs as it would alone (steps.run_start: its own log, figures, run files and
resume) in a child process holding one of N slots: its number stands where `{slot}` or
`{gpu}` are in the command and its environment, and each server takes its own free port.
The restarts stay restarts (separate processes, each its own shuffled order). A forced run
forces the baseline's answers, so it waits until the baseline's free run is finished and the
experiment has decided whether it teacher-forces (ab.json).

A child dies with kveval, `kill -9` too (its server's watchdog then ends the server). A
child that fails stops the others (their servers stopped, their files kept) and its one
line is the command's; Ctrl-C or SIGTERM stops every child, each its server; the same command
resumes each run where it stopped. A child says nothing of an interrupt, however many come
(run/interrupt.py): its outcome and exit status are its word, and kveval's one line is the
command's.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from kveval.errors import EXIT_OK, KvevalError, ServerError
from kveval.run.ab.options import AbOptions
from kveval.run.ab.plan import BASELINE, Start
from kveval.run.ab.progress import done
from kveval.run.interrupt import STOPPING

POLL_S = 0.5
JOIN_S = 60.0  # a child stopping its server on SIGTERM: at most its --stop-grace and this


@dataclass(frozen=True)
class Outcome:
    """What a child sends back: its exit code, or the one line of the error that ended it."""

    code: int
    error: str | None = None
    error_code: int = 2


class Reference:
    """A forced run's wait: the baseline's free run finished and forcing decided on file."""

    def __init__(self, opts: AbOptions, forcing: Any, start: Start, baseline_ended: Any) -> None:
        self.opts, self.forcing, self.start = opts, forcing, start
        self.baseline_ended = baseline_ended  # a shared byte the parent sets (see `flag`)

    def __call__(self) -> None:
        from kveval.run.ab.plan import Folder

        baseline = Folder(self.opts.output).run(BASELINE)
        while not (self._settled(baseline) and self._decided()):
            time.sleep(POLL_S)

    def _settled(self, baseline: Any) -> bool:
        """The baseline's run is done, or its start ended with what it holds (failed items:
        the forced runs force what is on file, as they do one after another)."""
        return done(baseline, self.opts.limit) or bool(self.baseline_ended.value)

    def _decided(self) -> bool:
        self.forcing.reload()
        return self.forcing.state.forcing is not None


def child(opts: AbOptions, start: Start, slot: int, api_key: str | None,
          secrets: tuple[str, ...], pipe: Connection, baseline_ended: Any) -> None:
    """One start, in a child process; its outcome goes back through `pipe`."""
    from kveval.masking import register_secrets
    from kveval.run.ab.forcing import Forcing
    from kveval.run.ab.plan import Folder
    from kveval.run.ab.state import read_state
    from kveval.run.ab.steps import Context, run_start
    from kveval.run.interrupt import exit_code, signals_as_interrupt
    from kveval.run.watchdog import die_with_parent
    from kveval.sink import installed

    die_with_parent()  # kveval killed outright: this child too, so its server's watchdog ends it
    quiet_bars()
    register_secrets(secrets)  # every spelling, as kveval's own process masks them
    folder = Folder(opts.output)
    # the one door out and the interrupts, as in kveval's own process
    with installed(), signals_as_interrupt(to_exit=True):
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)  # held since launch
            state = read_state(folder.state)
            assert state is not None  # the parent wrote it before any child started
            forcing = Forcing(opts, state, api_key)
            ctx = Context(opts, folder, api_key, forcing, forcing.stop, slot,
                          Reference(opts, forcing, start, baseline_ended))
            found = Outcome(run_start(ctx, start, forcing.state.forcing))
        except KvevalError as exc:
            found = Outcome(2, str(exc), exc.exit_code)
        except KeyboardInterrupt:
            found = Outcome(exit_code(), "interrupted", exit_code())
        with contextlib.suppress(OSError):  # a parent gone: the exit status says it
            pipe.send(found)
    sys.exit(found.error_code if found.error is not None else found.code)


def quiet_bars() -> None:
    """The progress bars' lock a thread lock: tqdm's own is a named semaphore, which the
    resource tracker counts; a tracker killed by a hangup of the group was replaced by one
    that knew nothing of it, and said so with a traceback after kveval's last line."""
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())


@dataclass
class Running:
    start: Start
    slot: int
    process: Any  # multiprocessing.Process
    pipe: Connection


def launch(opts: AbOptions, start: Start, slot: int, api_key: str | None,
           baseline_ended: Any) -> Running:
    from kveval.masking import secrets

    here, there = multiprocessing.get_context("spawn").Pipe(duplex=False)
    process = multiprocessing.get_context("spawn").Process(
        target=child, args=(opts, start, slot, api_key, secrets(), there, baseline_ended),
        name=f"kveval-ab-{start.label}", daemon=True)
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING)  # the child holds them until
    try:  # its handlers are in: an interrupt as it starts is its one outcome, no traceback
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    there.close()
    return Running(start, slot, process, here)


def outcome(job: Running) -> Outcome:
    """A finished child's outcome; one that died without a word is a server error."""
    with contextlib.suppress(EOFError, OSError):
        if job.pipe.poll():
            found: Outcome = job.pipe.recv()
            return found
    return Outcome(2, f"{job.start.label}: its process ended with code "
                      f"{job.process.exitcode} before it said why")


def stop_all(jobs: Sequence[Running]) -> None:
    """SIGTERM to every child still running (each stops its server), then wait for them."""
    for job in jobs:
        if job.process.is_alive():
            job.process.terminate()
    for job in jobs:
        job.process.join(JOIN_S)
        if job.process.is_alive():
            job.process.kill()


def raise_failed(found: Outcome) -> None:
    from kveval.errors import Interrupted

    if found.error_code >= 128:
        raise Interrupted(found.error or "interrupted", found.error_code)
    raise ServerError(found.error or "a server's start failed")


def finished(jobs: list[Running]) -> list[tuple[Running, Outcome]]:
    """The children that ended since the last look, each with its outcome."""
    ended = [job for job in jobs if not job.process.is_alive() or job.pipe.poll()]
    found = []
    for job in ended:
        result = outcome(job)
        job.process.join(JOIN_S)
        jobs.remove(job)
        found.append((job, result))
    return found


def flag() -> Any:
    """A byte the children read and the parent sets: shared memory, no lock. An Event is five
    named semaphores that multiprocessing's resource tracker counts; one it found left at
    exit (once, on a loaded machine) became a warning after kveval's last line."""
    return multiprocessing.get_context("spawn").RawValue("b", 0)


def run_side_by_side(opts: AbOptions, starts: Sequence[Start], api_key: str | None) -> int:
    """Every start, up to `opts.parallel` at once; the worst run's exit code."""
    waiting, free, code = list(starts), list(range(opts.parallel)), EXIT_OK
    jobs: list[Running] = []
    ended = flag()
    try:
        while waiting or jobs:
            while waiting and free:
                jobs.append(launch(opts, waiting.pop(0), free.pop(0), api_key, ended))
            for job, result in finished(jobs):
                if result.error is not None:
                    raise_failed(result)
                if job.start.label == BASELINE:
                    ended.value = 1
                free.append(job.slot)
                code = max(code, result.code)
            time.sleep(POLL_S if jobs else 0)
    finally:
        stop_all(jobs)
    return code
