"""The runs a verdict reads, as judged: a kveval run file or the tutorial's JSON array of
answers; and the check that every task of the baseline is in the run judged against it."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kveval.errors import IncomparableError, UsageError
from kveval.formats.records import ItemRecord, Run, RunHeader

ANSWERS_TASK = "answers"  # the task name given to the tutorial's JSON array of answers


@dataclass(frozen=True)
class Side:
    """One run as judged: a kveval run file, or the tutorial's JSON array of answers."""

    label: str
    path: str
    items: tuple[ItemRecord, ...]
    header: RunHeader | None = None  # None for an array of answers
    truncated_tail: bool = False  # the run file's last line was cut short and skipped
    is_answer_array: bool = False

    @property
    def errors(self) -> int:
        return sum(not item.ok for item in self.items)

    @property
    def not_forced(self) -> dict[str, dict[str, int]]:
        """A teacher-forced run's baseline items not forced, per task and reason ({} for any
        other run; formats/unforced.py)."""
        from kveval.formats.unforced import left_out

        return left_out(self.header.teacher_force if self.header else None, self.items)


def side_from_run(run: Run) -> Side:
    return Side(
        label=run.header.label or run.path.stem,
        path=str(run.path),
        items=tuple(run.items),
        header=run.header,
        truncated_tail=run.truncated_tail,
    )


def side_from_answers(path: str, answers: Sequence[str]) -> Side:
    """The tutorial's format: answers paired by position, as item ids "0", "1", ..."""
    items = tuple(
        ItemRecord(task=ANSWERS_TASK, item_id=str(i), prompt_sha256="", request={},
                   status="ok", output=text)
        for i, text in enumerate(answers)
    )
    label = os.path.splitext(os.path.basename(path))[0]
    return Side(label=label, path=path, items=items, is_answer_array=True)


def check_same_format(sides: Iterable[Side]) -> None:
    """Arrays of answers pair only with arrays; run files only with run files."""
    sides = list(sides)
    if len({side.is_answer_array for side in sides}) > 1:
        arrays = ", ".join(s.path for s in sides if s.is_answer_array)
        raise UsageError(f"cannot pair a JSON array of answers ({arrays}) with kveval run files; "
                         "give all arrays or all run files")


def task_sizes(side: Side) -> dict[str, int]:
    """Items per task, in the order the run lists them."""
    sizes: dict[str, int] = {}
    for item in side.items:
        sizes[item.task] = sizes.get(item.task, 0) + 1
    return sizes


def check_tasks(base: Side, other: Side, role: str, skip: Iterable[str] = (),
                hint: str = "") -> None:
    """Every task of the baseline must be in the other run: a missing one cannot be judged."""
    theirs = task_sizes(other)
    for task, n in task_sizes(base).items():
        if task not in theirs and task not in set(skip):
            raise IncomparableError(f"cannot judge: {role} has no {task}; the baseline has {n} "
                                    f"items ({other.path}){hint.format(task=task)}")
