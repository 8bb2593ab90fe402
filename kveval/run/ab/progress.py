"""How far an `ab` run file got: the items its header planned against those answered, and
whether it covers this pass's size (`--detect` grows the runs: a run finished at 100 items
is short of a pass of 300 where its task has more).

A forced run forces the baseline's answers: it is done only when it planned every item the
baseline's run now plans."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Progress:
    """How far a run file got against the items its header planned."""

    path: Path
    planned: int | None  # None: no file (or a header that does not say)
    answered: int = 0
    errors: int = 0
    limits: tuple[tuple[int | None, int], ...] = ()  # each task's --limit and items planned

    @property
    def finished(self) -> bool:
        return self.planned is not None and self.answered >= self.planned and not self.errors

    def covers(self, limit: int | None) -> bool:
        """Each task made at this size or larger, or holding all its data."""
        if limit is None:  # the suite's own sizes, whatever they are
            return True
        return all(made is None or made >= limit or items < made for made, items in
                   self.limits)

    def words(self) -> str:
        if not self.path.exists():
            return "new"
        if self.finished:
            return f"finished ({self.answered} items): kept"
        also = f", {self.errors} errors" if self.errors else ""
        return f"cut ({self.answered} of {self.planned or '?'} items answered{also}): continued"


def _limit(task: dict[str, object]) -> int | None:
    found = task.get("limit")
    return found if type(found) is int else None


def progress(path: Path) -> Progress:
    from kveval.formats.reader import read_run

    if not path.exists():
        return Progress(path, None)
    run = read_run(path, judging=True)
    counts = [c for t in run.header.tasks if type(c := t.get("items")) is int]
    planned = sum(counts) if len(counts) == len(run.header.tasks) else None
    answered = len({item.key for item in run.items if item.ok})
    limits = tuple((_limit(t), int(t.get("items") or 0)) for t in run.header.tasks)
    return Progress(path, planned, answered, sum(1 for i in run.items if not i.ok), limits)


def done(path: Path, limit: int | None, reference: Path | None = None) -> bool:
    """The run is finished at this size; a forced run (its `reference` the baseline's free
    run) also holds every item the baseline's run plans."""
    found = progress(path)
    if not found.finished or (reference is None and not found.covers(limit)):
        return False
    return reference is None or (found.planned or 0) >= (progress(reference).planned or 0)
