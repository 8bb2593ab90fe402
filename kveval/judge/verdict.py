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

from collections.abc import Sequence
from dataclasses import dataclass

from kveval.errors import IncomparableError
from kveval.judge.accuracy import (
    METRICS,
    Accuracy,
    PairedComparison,
    ScoreReport,
    TaskScore,
    accuracy,
    compare_accuracy,
    judged_accuracy,
    paired_accuracy,
    score_report,
    score_side,
)
from kveval.judge.compare import Comparison, NoiseTest, Side, compare_sides
from kveval.judge.setup import (
    Difference,
    Setup,
    check_sampling,
    fingerprint_differences,
    flatten,
    inspect_setup,
)
from kveval.judge.stats import Interval

POLICIES = ("overlap", "paired")
# Points: the paired policy's largest tolerated loss. At n = 1319 it false-alarms on under 1%
# of A/A runs even when restarts flip 6% of right/wrong answers (bench/gate_simulation.py).
DEFAULT_MARGIN = 3.0

__all__ = [
    "METRICS", "Accuracy", "Difference", "PairedComparison", "ScoreReport", "Setup", "TaskScore",
    "accuracy", "check_sampling", "compare_accuracy", "fingerprint_differences", "flatten",
    "inspect_setup", "judged_accuracy", "paired_accuracy", "score_report", "score_side",
]


def check_error_rate(sides: Sequence[Side], max_rate: float) -> None:
    for side in sides:
        rate = side.errors / len(side.items) if side.items else 0.0
        if rate > max_rate:
            raise IncomparableError(f"{side.path}: {side.errors} of {len(side.items)} items are "
                                    f"errors ({rate:.1%}), above --max-error-rate {max_rate:g}")


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
