"""Verdicts from paired runs: can they be judged at all, how accurate is each, does the
candidate pass the gate.

Cannot judge (IncomparableError, exit 2): different sampling parameters, a pair whose prompt
differs, no paired items, too many error items. Policies:

- overlap: the candidate's Wilson 95% interval overlaps the baseline's (or lies above it);
- paired: the 95% interval for the paired accuracy difference rules out a loss larger than
  the margin (non-inferiority);
- drift, for tasks without ground truth when a noise run is given: the candidate does not
  change more answers than the noise run does (exact McNemar, p < 0.05).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kveval.errors import IncomparableError
from kveval.formats.records import ItemRecord, RunHeader
from kveval.judge.compare import (
    Comparison,
    NoiseTest,
    Pair,
    Pairing,
    Side,
    by_task,
    compare_sides,
    pair_sides,
)
from kveval.judge.stats import (
    Interval,
    PairedTable,
    largest_loss,
    mcnemar_exact,
    paired_difference_ci,
    paired_table,
    wilson,
)

POLICIES = ("overlap", "paired")
METRICS = {"flexible": "correct", "strict": "correct_strict"}  # metric -> ItemRecord field
# Points: the paired policy's largest tolerated loss. At n = 1319 it false-alarms on under 1%
# of A/A runs even when restarts flip 6% of right/wrong answers (bench/gate_simulation.py).
DEFAULT_MARGIN = 3.0
SAMPLING_FIELDS = ("api", "max_tokens", "stop", "temperature")
# Fingerprint values that change on every request to /v1/models, not with the setup.
VOLATILE_KEYS = frozenset({"created", "permission"})


# ---------------------------------------------------------------- can these runs be judged


@dataclass(frozen=True)
class Difference:
    key: str  # a dotted fingerprint key, or "model"
    base: str | None  # None: absent on that side
    other: str | None


@dataclass(frozen=True)
class Setup:
    """What differs between the baseline's and the candidate's setups, and what looks wrong."""

    labels: tuple[str, ...]  # baseline, candidate[, noise]
    models: tuple[str, ...]
    concurrency: tuple[int, ...]
    differences: tuple[Difference, ...]  # baseline -> candidate: model, then fingerprint
    warnings: tuple[str, ...]


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts (and lists of dicts) to dotted keys: {"engine": {"a": 1}} -> {"engine.a": 1}."""
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, inner in value.items():
            if key not in VOLATILE_KEYS:
                flat.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        flat = {}
        for index, inner in enumerate(value):
            flat.update(flatten(inner, f"{prefix}[{index}]"))
        return flat
    return {prefix: value}


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def fingerprint_differences(base: dict[str, Any], other: dict[str, Any]) -> tuple[Difference, ...]:
    a, b = flatten(base), flatten(other)
    keys = list(a) + [k for k in b if k not in a]
    return tuple(
        Difference(key, _show(a[key]) if key in a else None, _show(b[key]) if key in b else None)
        for key in keys
        if a.get(key, ...) != b.get(key, ...)
    )


def check_sampling(base: Side, other: Side) -> None:
    """Runs with different sampling parameters cannot be judged against each other."""
    if base.header is None or other.header is None:
        return
    where = f"({base.path} vs {other.path})"
    for key in dict.fromkeys([*base.header.sampling, *other.header.sampling]):
        a, b = base.header.sampling.get(key), other.header.sampling.get(key)
        if a != b:
            raise IncomparableError(f"different sampling parameters: {key} {_show(a)} vs "
                                    f"{_show(b)} {where}")
    for spec in base.header.tasks:
        theirs = other.header.task(str(spec.get("name")))
        if theirs is None:
            continue
        for key in SAMPLING_FIELDS:
            a, b = spec.get(key), theirs.get(key)
            if a != b:
                raise IncomparableError(f"different sampling parameters: task {spec.get('name')} "
                                        f"{key} {_show(a)} vs {_show(b)} {where}")


def check_error_rate(sides: Sequence[Side], max_rate: float) -> None:
    for side in sides:
        rate = side.errors / len(side.items) if side.items else 0.0
        if rate > max_rate:
            raise IncomparableError(f"{side.path}: {side.errors} of {len(side.items)} items are "
                                    f"errors ({rate:.1%}), above --max-error-rate {max_rate:g}")


def _fingerprint_warnings(labels: Sequence[str], headers: Sequence[RunHeader],
                          diffs: Sequence[Difference]) -> list[str]:
    base, cand = headers[0], headers[1]
    if not base.fingerprint and not cand.fingerprint:
        return [f"{labels[0]} and {labels[1]} carry no server fingerprint: kveval cannot show "
                "what changed"]
    if not diffs:
        return [f"nothing in the server fingerprints differs between {labels[0]} and "
                f"{labels[1]}: is the candidate really a different setup?"]
    return []


def _concurrency_warnings(labels: Sequence[str], headers: Sequence[RunHeader]) -> list[str]:
    base = headers[0].concurrency
    return [f"{labels[0]} ran at concurrency {base}, {label} at {h.concurrency}: batching "
            "changes temperature-0 answers too"
            for label, h in zip(labels[1:], headers[1:], strict=True) if h.concurrency != base]


def _noise_warnings(labels: Sequence[str], headers: Sequence[RunHeader]) -> list[str]:
    """The noise run should be the baseline's setup restarted, nothing else."""
    if len(headers) < 3:
        return []
    base, noise = headers[0], headers[2]
    changed = fingerprint_differences(base.fingerprint, noise.fingerprint)
    if not changed and noise.model == base.model:
        return []
    keys = ", ".join(d.key for d in changed[:3]) or "model"
    return [f"the noise run {labels[2]} differs from the baseline's setup ({keys}): it is not "
            "a restart of the same setup"]


def inspect_setup(base: Side, candidate: Side, noise: Side | None = None) -> Setup:
    """Raise when the runs cannot be judged; else say what differs and what looks wrong."""
    sides = [base, candidate] + ([noise] if noise else [])
    for other in sides[1:]:
        check_sampling(base, other)
    labels = tuple(s.label for s in sides)
    headers = [s.header for s in sides if s.header is not None]
    if len(headers) < len(sides):  # arrays of answers: nothing to inspect
        return Setup(labels, (), (), (), ())
    diffs = fingerprint_differences(headers[0].fingerprint, headers[1].fingerprint)
    if headers[0].model != headers[1].model:
        diffs = (Difference("model", headers[0].model, headers[1].model), *diffs)
    warnings = [f"{s.path}: the last line was cut short (a crash mid-write) and skipped"
                for s in sides if s.truncated_tail]
    warnings += _fingerprint_warnings(labels, headers, diffs)
    warnings += _concurrency_warnings(labels, headers)
    warnings += _noise_warnings(labels, headers)
    return Setup(labels, tuple(h.model for h in headers), tuple(h.concurrency for h in headers),
                 diffs, tuple(warnings))


# ---------------------------------------------------------------- accuracy


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
class PairedComparison:
    """Baseline vs candidate accuracy on the same items of one task."""

    task: str
    metric: str  # "flexible" or "strict"
    baseline: Accuracy
    candidate: Accuracy
    table: PairedTable
    difference: Interval  # candidate minus baseline, Newcombe 95%
    p_value: float  # exact McNemar

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
    values = [(getattr(p.base, field), getattr(p.other, field)) for p in pairs]
    scored = [(a, b) for a, b in values if a is not None and b is not None]
    if not scored:
        return None
    table = paired_table([a for a, _ in scored], [b for _, b in scored])
    return PairedComparison(
        task=task,
        metric=metric,
        baseline=accuracy(table.baseline_correct, table.n),
        candidate=accuracy(table.candidate_correct, table.n),
        table=table,
        difference=paired_difference_ci(table),
        p_value=mcnemar_exact(table.lost, table.gained),
    )


def compare_accuracy(pairing: Pairing) -> tuple[PairedComparison, ...]:
    """Every task's paired comparison, flexible then strict where the task has one."""
    found = []
    for task, pairs in by_task(pairing.pairs).items():
        for metric in METRICS:
            comparison = paired_accuracy(task, pairs, metric)
            if comparison is not None:
                found.append(comparison)
    return tuple(found)


def judged_accuracy(pairing: Pairing, metric: str) -> tuple[PairedComparison, ...]:
    """One comparison per task with ground truth, on the metric the gate judges; a task
    without a strict match is judged on its only one."""
    found = []
    for task, pairs in by_task(pairing.pairs).items():
        comparison = (paired_accuracy(task, pairs, metric)
                      or paired_accuracy(task, pairs, "flexible"))
        if comparison is not None:
            found.append(comparison)
    return tuple(found)


@dataclass(frozen=True)
class ScoreReport:
    run: Side
    scores: tuple[TaskScore, ...]
    baseline: Side | None = None
    setup: Setup | None = None
    pairing: Pairing | None = None
    accuracy: tuple[PairedComparison, ...] = ()


def score_report(run: Side, baseline: Side | None = None) -> ScoreReport:
    scores = score_side(run)
    if baseline is None:
        return ScoreReport(run, scores)
    setup = inspect_setup(baseline, run)
    pairing = pair_sides(baseline, run)
    if not pairing.pairs:
        raise IncomparableError(f"no paired items: {baseline.path} and {run.path} share no "
                                "answered (task, item_id)")
    return ScoreReport(run, scores, baseline, setup, pairing, compare_accuracy(pairing))


# ---------------------------------------------------------------- the gate


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
    rule: str | None  # "overlap", "paired" or "drift"; None when the task cannot be judged
    passed: bool | None  # None: not judged
    detail: str | None = None  # the reason in words, for rules judged elsewhere ("recovery")


@dataclass(frozen=True)
class GateReport:
    policy: str
    margin: float  # points
    metric: str
    setup: Setup
    comparison: Comparison  # drift of the candidate (and the noise run) from the baseline
    accuracy: tuple[PairedComparison, ...]  # the judged metric, per task with ground truth
    decisions: tuple[TaskDecision, ...]

    @property
    def passed(self) -> bool:
        return all(d.passed is not False for d in self.decisions)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1


def decide(policy: str, margin: float, comparisons: Sequence[PairedComparison],
           comparison: Comparison) -> tuple[TaskDecision, ...]:
    judged = {c.task: c for c in comparisons}
    decisions = []
    for drift in comparison.tasks:
        found = judged.get(drift.task)
        if found is not None and policy == "paired":
            failed = paired_regression(found.difference, margin)
        elif found is not None:
            failed = overlap_regression(found.baseline.interval, found.candidate.interval)
        elif drift.test is not None:
            decisions.append(TaskDecision(drift.task, "drift", not drift_regression(drift.test)))
            continue
        else:
            decisions.append(TaskDecision(drift.task, None, None))
            continue
        decisions.append(TaskDecision(drift.task, policy, not failed))
    return tuple(decisions)


def gate(baseline: Side, candidate: Side, noise: Side | None = None, *, policy: str = "overlap",
         margin: float = DEFAULT_MARGIN, metric: str = "flexible",
         max_error_rate: float = 0.0) -> GateReport:
    """Judge a candidate run; raise IncomparableError when it cannot be judged."""
    if policy not in POLICIES or metric not in METRICS:
        raise ValueError(f"unknown policy {policy!r} or metric {metric!r}")
    setup = inspect_setup(baseline, candidate, noise)
    comparison = compare_sides(baseline, candidate, noise)
    check_error_rate([baseline, candidate] + ([noise] if noise else []), max_error_rate)
    judged = judged_accuracy(comparison.pairing, metric)
    decisions = decide(policy, margin, judged, comparison)
    if all(d.passed is None for d in decisions):
        raise IncomparableError("nothing to judge: no task has ground truth (correct is null) "
                                "and no --noise run was given to measure drift against")
    return GateReport(policy, margin, metric, setup, comparison, judged, decisions)
