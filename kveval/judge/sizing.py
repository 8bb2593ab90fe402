"""`kveval ab --detect POINTS`: the size a pool grows to, from the plan of its runs (pure).

The plan (judge/plan.py) says the items and restarts at which a loss of POINTS would show at
80%. The pool grows to that, never shrinks; tasks with no accuracy plan (drift, divergence)
run whole once the pilot is read (the most items their data has: a long-context grid, whose
size no file tells, stays at the pilot's); a task no size shows is given the most
items its data has; restarts stop at the plan's most (8). Only the baseline and its restarts
choose the size, never a candidate's answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MOST_NOISE_RUNS = 8  # the plan's own most


@dataclass(frozen=True)
class Size:
    items: int | None  # --limit of every run of the pass (None: the suite's own sizes)
    noise_runs: int
    passes: int = 1
    stopped: str = ""  # why the growth ended: planned, data, budget

    def to_json(self) -> dict[str, Any]:
        return {"items": self.items, "noise_runs": self.noise_runs, "passes": self.passes,
                "stopped": self.stopped}


def from_json(data: Any) -> Size | None:
    if not isinstance(data, dict):
        return None
    items, runs, passes = data.get("items"), data.get("noise_runs"), data.get("passes")
    if not (items is None or (type(items) is int and items > 0)) or type(runs) is not int \
            or runs < 1:
        return None
    return Size(items, min(runs, MOST_NOISE_RUNS), passes if type(passes) is int else 1,
                str(data.get("stopped") or ""))


def _items(task: Any, size: Size) -> int:
    most = task.available
    if task.items_needed is None:  # no size shows it: the most the data has
        return most if most is not None else (size.items or 0)
    return min(task.items_needed, most) if most is not None else task.items_needed


def wanted(found: Any, size: Size, least: int = 1,
           data: dict[str, int | None] | None = None) -> Size:
    """The size the plan asks for (never smaller than this one, at least `least` restarts:
    `--noise-runs`); tasks without an accuracy plan (drift, divergence) run whole once the
    pilot is read (`data`: each task's items at most; the suite's own sizes where unknown)."""
    accuracy = [t for t in found.tasks if t.kind == "accuracy"]
    items = max([_items(t, size) for t in accuracy], default=None) if accuracy else \
        max([n for n in (data or {}).values() if n], default=None)
    if items is not None and size.items is not None:
        items = max(items, size.items)
    runs = [t.noise_runs_needed for t in found.tasks if t.noise_runs_needed is not None]
    noise = min(max([size.noise_runs, least, *runs]), MOST_NOISE_RUNS)
    return Size(items, noise, size.passes + 1)


def grows(new: Size, old: Size) -> bool:
    bigger = old.items is not None and (new.items is None or new.items > old.items)
    return bigger or new.noise_runs > old.noise_runs


def starts_of(new: Size, old: Size) -> int:
    """The server starts the next pass makes: every pool server where the items grow."""
    if old.items is not None and (new.items is None or new.items > old.items):
        return new.noise_runs + 1
    return new.noise_runs - old.noise_runs
