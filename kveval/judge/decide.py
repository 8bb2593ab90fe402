"""One decision per task of the baseline: which rule judges it, pass or regression, or why it
cannot be judged.

- overlap: the candidate's Wilson 95% interval overlaps the baseline's (or lies above it);
- paired: the 95% interval for the paired accuracy difference, in the worst case (the
  candidate's own errors counted as losses), rules out a loss larger than the margin. A task
  too small for the margin even when no answer changes cannot be judged (exit 2);
- drift, for tasks without ground truth when a noise run is given: the candidate does not
  change more answers than the noise floor (one noise run: exact McNemar on the same items;
  two or more: their spread, see judge/floor.py), Holm-adjusted across tasks;
- collapse, every task: the candidate's truncated or empty answers do not exceed the noise
  floor's (the same tests as drift) or, without a noise run, the baseline's (exact one-sided
  McNemar on the paired items), Holm-adjusted across tasks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from kveval.judge.accuracy import PairedComparison
from kveval.judge.compare import Comparison, NoiseTest, TaskDrift
from kveval.judge.floor import ALPHA, count_test, holm
from kveval.judge.stats import Interval, PairedTable, mcnemar_greater, paired_difference_ci

LARGEST_N = 10_000_000  # the search for the items a margin needs stops here


def overlap_regression(baseline: Interval, candidate: Interval) -> bool:
    """The overlap policy fails only a candidate whose interval lies wholly below the baseline's."""
    return candidate.high < baseline.low


def paired_regression(difference: Interval, margin_points: float) -> bool:
    """The paired policy fails unless the interval rules out a loss larger than the margin."""
    return difference.low < -margin_points / 100


def drift_regression(test: NoiseTest) -> bool:
    return test.drifts_more


@dataclass(frozen=True)
class TaskDecision:
    task: str
    rule: str | None  # "overlap", "paired" or "drift"; None when nothing judges the task
    passed: bool | None  # False: a regression (collapse included); None: not judged
    cannot_judge: str | None = None  # why the rule cannot judge this task, with the numbers
    skipped: bool = False  # left out with --skip
    collapsed: bool = False  # more truncated or empty answers than the floor, beyond chance
    drift_p: float | None = None  # the drift test's p-value, Holm-adjusted across tasks
    collapse_p: float | None = None  # the collapse test's p-value, Holm-adjusted across tasks
    detail: str | None = None  # the reason in words, for rules judged elsewhere ("recovery")

    @property
    def status(self) -> str:
        """"pass", "regression", "cannot judge", "skipped" or "not judged"."""
        if self.skipped:
            return "skipped"
        if self.passed is False:
            return "regression"
        if self.cannot_judge is not None:
            return "cannot judge"
        return "pass" if self.passed else "not judged"


@lru_cache(maxsize=4096)
def best_case_loss(n: int) -> float:
    """The loss (a fraction) n paired items cannot rule out even when no answer changes."""
    return -paired_difference_ci(PairedTable(n, 0, 0, 0)).low


def items_needed(margin_points: float) -> int | None:
    """The fewest items whose best case rules out a loss larger than the margin; None past
    LARGEST_N (a margin of 0 needs infinitely many)."""
    margin = margin_points / 100
    high = 1
    while best_case_loss(high) > margin:
        if high > LARGEST_N:
            return None
        high *= 2
    low = high // 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if best_case_loss(mid) > margin else (low, mid)
    return high


def too_small(n: int, margin_points: float) -> str | None:
    """Why n items cannot judge the paired policy at this margin, or None when they can."""
    loss = best_case_loss(n)
    if loss <= margin_points / 100:
        return None
    needed = items_needed(margin_points)
    needs = f"needs {needed}" if needed else f"needs more than {LARGEST_N:,}"
    wider = math.ceil(loss * 1000 - 1e-9) / 10
    return (f"{n} items cannot rule out a loss of {margin_points:g} points even if nothing "
            f"changes: {needs}, or `--margin {wider:.1f}`")


def drift_p(t: TaskDrift) -> float | None:
    """The drift test's p-value: the spread test with two or more noise runs, else McNemar."""
    if t.spread is not None:
        return t.spread.p_value
    return t.test.p_value if t.test is not None else None


def drifts_beyond(t: TaskDrift, adjusted_p: float) -> bool:
    if adjusted_p >= ALPHA:
        return False
    return t.spread is not None or (t.test is not None and
                                    t.test.candidate_only > t.test.noise_only)


def collapse_p(t: TaskDrift) -> float | None:
    c = t.collapse
    if c is None or not c.candidate.answers:
        return None
    if len(c.noise) >= 2:
        runs = [c.baseline.collapsed, *(n.collapsed for n in c.noise)]
        return count_test(c.candidate.collapsed, runs, c.candidate.answers).p_value
    return mcnemar_greater(c.candidate_only, c.reference_only)


def _holm(found: dict[str, float | None]) -> dict[str, float]:
    tested = {task: p for task, p in found.items() if p is not None}
    return dict(zip(tested, holm(list(tested.values())), strict=True))


def _primary(t: TaskDrift, comp: PairedComparison | None, policy: str, margin: float,
             drift: float | None) -> tuple[str | None, bool | None, str | None]:
    """(rule, passed, why it cannot judge) by the accuracy policy or drift."""
    if comp is not None and policy == "paired":
        worst = comp.decisive
        why = too_small(worst.table.n, margin)
        return "paired", None if why else not paired_regression(worst.difference, margin), why
    if comp is not None:
        return policy, not overlap_regression(comp.baseline.interval,
                                              comp.candidate.interval), None
    if drift is not None:
        return "drift", not drifts_beyond(t, drift), None
    return None, None, None


def decide(policy: str, margin: float, comparisons: Sequence[PairedComparison],
           comparison: Comparison, skip: Sequence[str] = ()) -> tuple[TaskDecision, ...]:
    """One decision per task of the baseline, in its order: a task with no pair answered in
    both runs cannot be judged."""
    judged = {c.task: c for c in comparisons}
    by_name = {t.task: t for t in comparison.tasks if t.task not in skip}
    drifts = _holm({n: drift_p(t) for n, t in by_name.items() if n not in judged})
    collapses = _holm({n: collapse_p(t) for n, t in by_name.items()})
    names = dict.fromkeys([*(item.task for item in comparison.base.items),
                           *(t.task for t in comparison.tasks)])
    decisions = []
    for name in names:
        t = by_name.get(name)
        if name in skip:
            decisions.append(TaskDecision(name, None, None, skipped=True))
        elif t is None:
            decisions.append(TaskDecision(name, None, None, cannot_judge=(
                f"no item of {name} was answered in both runs (errors or missing)")))
        else:
            rule, passed, why = _primary(t, judged.get(name), policy, margin, drifts.get(name))
            collapsed = collapses.get(name, 1.0) < ALPHA
            decisions.append(TaskDecision(name, rule, False if collapsed else passed, why,
                                          False, collapsed, drifts.get(name),
                                          collapses.get(name)))
    return tuple(decisions)
