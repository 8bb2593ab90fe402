"""Accuracy per task (Wilson 95% intervals) and the paired view of two runs on the same items
(exact McNemar, Tango's interval for the difference, the largest loss not ruled out)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter

from kveval.errors import IncomparableError
from kveval.formats.records import ItemRecord
from kveval.judge.collapse import Collapse, collapse_of
from kveval.judge.compare import Pair, Pairing, Side, by_task, pair_sides
from kveval.judge.setup import Setup, inspect_setup
from kveval.judge.stats import (
    Interval,
    PairedTable,
    largest_loss,
    mcnemar_exact,
    paired_difference_ci,
    paired_table,
    wilson,
)

METRICS = {"flexible": "correct", "strict": "correct_strict"}  # metric -> ItemRecord field


@dataclass(frozen=True)
class Accuracy:
    correct: int
    n: int
    interval: Interval  # Wilson 95%

    @property
    def rate(self) -> float | None:
        return self.correct / self.n if self.n else None


def accuracy(correct: int, n: int) -> Accuracy:
    return Accuracy(correct, n, wilson(correct, n))


@dataclass(frozen=True)
class TaskScore:
    task: str
    items: int
    errors: int  # error items: counted apart, never scored as wrong
    unscored: int  # answered, but without ground truth
    flexible: Accuracy | None  # from `correct`; None when the task has no ground truth
    strict: Accuracy | None  # from `correct_strict`; None when the task has no strict match


def _accuracy_of(values: Sequence[bool | None]) -> Accuracy | None:
    scored = [v for v in values if v is not None]
    return accuracy(sum(scored), len(scored)) if scored else None


def score_side(side: Side) -> tuple[TaskScore, ...]:
    tasks: dict[str, list[ItemRecord]] = {}
    for item in side.items:
        tasks.setdefault(item.task, []).append(item)
    scores = []
    for task, items in tasks.items():
        answered = [i for i in items if i.ok]
        scores.append(TaskScore(
            task=task,
            items=len(items),
            errors=len(items) - len(answered),
            unscored=sum(i.correct is None for i in answered),
            flexible=_accuracy_of([i.correct for i in answered]),
            strict=_accuracy_of([i.correct_strict for i in answered]),
        ))
    return tuple(scores)


@dataclass(frozen=True)
class WorstCase:
    """The paired table with the candidate's errors (and missing items) on items the baseline
    answered counted against it: a loss where the baseline was right, wrong in both where it
    was wrong. Errors cannot hide losses."""

    errors: int  # candidate-only errors and missing items among the baseline's scored answers
    table: PairedTable
    difference: Interval  # Tango 95%, as for the paired table

    @property
    def largest_loss(self) -> float:
        return largest_loss(self.difference)


def worst_case(table: PairedTable, baseline_values: Sequence[bool]) -> WorstCase:
    """`baseline_values`: the baseline's scores on the items the candidate did not answer."""
    right = sum(baseline_values)
    worst = PairedTable(table.both, table.lost + right, table.gained,
                        table.neither + len(baseline_values) - right)
    return WorstCase(len(baseline_values), worst, paired_difference_ci(worst))


def unanswered(base: Side, candidate: Side, task: str, field: str) -> list[bool]:
    """The baseline's scores (`field`) on its answered items of `task` that the candidate
    answered with an error or not at all."""
    theirs = {item.item_id: item.ok for item in candidate.items if item.task == task}
    return [bool(getattr(item, field)) for item in base.items
            if item.task == task and item.ok and getattr(item, field) is not None
            and not theirs.get(item.item_id, False)]


def with_worst_case(comparisons: Sequence[PairedComparison], base: Side,
                    candidate: Side) -> tuple[PairedComparison, ...]:
    """Each comparison with its worst case, where the candidate has errors the baseline lacks."""
    found = []
    for c in comparisons:
        values = unanswered(base, candidate, c.task, METRICS[c.metric])
        found.append(replace(c, worst=worst_case(c.table, values)) if values else c)
    return tuple(found)


@dataclass(frozen=True)
class PairedComparison:
    """Baseline vs candidate accuracy on the same items of one task."""

    task: str
    metric: str  # "flexible" or "strict"
    baseline: Accuracy
    candidate: Accuracy
    table: PairedTable
    difference: Interval  # candidate minus baseline, Tango 95% score interval
    p_value: float  # exact McNemar
    sole_metric: bool = False  # the task has one metric (no strict match): name it no further
    worst: WorstCase | None = None  # candidate-only errors counted as losses

    @property
    def decisive(self) -> WorstCase:
        """The table a policy decides on: the worst case (equal to the paired table when the
        candidate has no error the baseline lacks)."""
        return self.worst or WorstCase(0, self.table, self.difference)

    @property
    def overlap(self) -> bool:
        return self.baseline.interval.overlaps(self.candidate.interval)

    @property
    def largest_loss(self) -> float:
        """The largest loss (a fraction) the paired data cannot rule out."""
        return largest_loss(self.difference)


def paired_accuracy(task: str, pairs: Sequence[Pair], metric: str) -> PairedComparison | None:
    """None when no pair has this metric on both sides."""
    field = METRICS[metric]
    mine, theirs = (list(map(attrgetter(f"{side}.{field}"), pairs)) for side in ("base", "other"))
    if None in mine or None in theirs:
        scored = [(a, b) for a, b in zip(mine, theirs, strict=True)
                  if a is not None and b is not None]
        mine, theirs = [a for a, _ in scored], [b for _, b in scored]
    if not mine:
        return None
    table = paired_table(mine, theirs)
    return PairedComparison(
        task=task,
        metric=metric,
        baseline=accuracy(table.baseline_correct, table.n),
        candidate=accuracy(table.candidate_correct, table.n),
        table=table,
        difference=paired_difference_ci(table),
        p_value=mcnemar_exact(table.lost, table.gained),
    )


def _has_strict(pairs: Sequence[Pair]) -> bool:
    return any(p.base.correct_strict is not None for p in pairs)


def compare_accuracy(pairing: Pairing) -> tuple[PairedComparison, ...]:
    """Every task's paired comparison, flexible then strict where the task has one."""
    found = []
    for task, pairs in by_task(pairing.pairs).items():
        sole = not _has_strict(pairs)
        for metric in METRICS:
            comparison = paired_accuracy(task, pairs, metric)
            if comparison is not None:
                found.append(replace(comparison, sole_metric=sole))
    return tuple(found)


def judged_accuracy(pairing: Pairing, metric: str) -> tuple[PairedComparison, ...]:
    """One comparison per task with ground truth, on the metric the gate judges; a task
    without a strict match is judged on its only one."""
    found = []
    for task, pairs in by_task(pairing.pairs).items():
        comparison = (paired_accuracy(task, pairs, metric)
                      or paired_accuracy(task, pairs, "flexible"))
        if comparison is not None:
            found.append(replace(comparison, sole_metric=not _has_strict(pairs)))
    return tuple(found)


@dataclass(frozen=True)
class ScoreReport:
    run: Side
    scores: tuple[TaskScore, ...]
    baseline: Side | None = None
    setup: Setup | None = None
    pairing: Pairing | None = None
    accuracy: tuple[PairedComparison, ...] = ()
    collapse: dict[str, Collapse] = field(default_factory=dict)  # per task, the run's answers
    baseline_collapse: dict[str, Collapse] = field(default_factory=dict)


def collapse_by_task(side: Side) -> dict[str, Collapse]:
    answered: dict[str, list[ItemRecord]] = {}
    for item in side.items:
        if item.ok:
            answered.setdefault(item.task, []).append(item)
    return {task: collapse_of(items) for task, items in answered.items()}


def score_report(run: Side, baseline: Side | None = None) -> ScoreReport:
    scores = score_side(run)
    if baseline is None:
        return ScoreReport(run, scores, collapse=collapse_by_task(run))
    setup = inspect_setup(baseline, run)
    pairing = pair_sides(baseline, run)
    if not pairing.pairs:
        raise IncomparableError(f"no paired items: {baseline.path} and {run.path} share no "
                                "answered (task, item_id)")
    return ScoreReport(run, scores, baseline, setup, pairing,
                       with_worst_case(compare_accuracy(pairing), baseline, run),
                       collapse_by_task(run), collapse_by_task(baseline))
