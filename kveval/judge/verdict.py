"""The gate: can the runs be judged at all, and does the candidate pass.

Cannot judge the runs (IncomparableError, exit 2): different sampling parameters, a pair whose
prompt differs, no paired items, a task of the baseline that the candidate or a noise run
lacks (unless skipped), error and missing items above the limit. Each task then gets one
decision (judge/decide.py: the overlap, paired and drift rules, collapse, and "cannot judge"
for a task too small for the paired margin). Exit 1 when a regression was found, else 2 when a
task could not be judged, else 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kveval.errors import EXIT_INPUT, EXIT_OK, EXIT_REGRESSION, IncomparableError, UsageError
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
    with_worst_case,
)
from kveval.judge.compare import Comparison, Side, compare_sides
from kveval.judge.decide import (
    TaskDecision,
    decide,
    drift_regression,
    overlap_regression,
    paired_regression,
)
from kveval.judge.setup import (
    Difference,
    Setup,
    check_sampling,
    fingerprint_differences,
    flatten,
    inspect_setup,
)

POLICIES = ("overlap", "paired")
# Points: the paired policy's largest tolerated loss. At n = 1319 it false-alarms on under 1%
# of A/A runs even when restarts flip 6% of right/wrong answers (bench/gate_simulation.py).
DEFAULT_MARGIN = 3.0

__all__ = [
    "TaskDecision", "drift_regression", "overlap_regression", "paired_regression",
    "METRICS", "Accuracy", "Difference", "PairedComparison", "ScoreReport", "Setup", "TaskScore",
    "accuracy", "check_sampling", "compare_accuracy", "fingerprint_differences", "flatten",
    "inspect_setup", "judged_accuracy", "paired_accuracy", "score_report", "score_side",
]


def check_skip(base: Side, skip: Sequence[str]) -> None:
    known = {item.task for item in base.items}
    for task in skip:
        if task not in known:
            raise UsageError(f"--skip {task}: the baseline has no such task "
                             f"(it has {', '.join(sorted(known))})")


def check_error_rate(base: Side, others: Sequence[Side], max_rate: float,
                     skip: Sequence[str] = ()) -> None:
    """Error items, and in the other runs the baseline's items they lack, against the limit."""
    wanted = [item for item in base.items if item.task not in skip]
    for side in [base, *others]:
        mine = {item.key: item for item in side.items}
        errors = sum(not mine[i.key].ok for i in wanted if i.key in mine)
        missing = sum(i.key not in mine for i in wanted)
        rate = (errors + missing) / len(wanted) if wanted else 0.0
        if rate > max_rate:
            lacking = f" and {missing} missing" if missing else ""
            raise IncomparableError(f"{side.path}: {errors} of {len(wanted)} items are errors"
                                    f"{lacking} ({rate:.1%}), above --max-error-rate "
                                    f"{max_rate:g}")


@dataclass(frozen=True)
class GateReport:
    policy: str
    margin: float  # points
    metric: str
    setup: Setup
    comparison: Comparison  # drift of the candidate (and the noise runs) from the baseline
    accuracy: tuple[PairedComparison, ...]  # the judged metric, per task with ground truth
    decisions: tuple[TaskDecision, ...]

    @property
    def regression(self) -> bool:
        return any(d.passed is False for d in self.decisions)

    @property
    def cannot_judge(self) -> bool:
        return any(d.status == "cannot judge" for d in self.decisions)

    @property
    def passed(self) -> bool:
        return not self.regression and not self.cannot_judge

    @property
    def verdict(self) -> str:
        """A found regression outranks a task that could not be judged."""
        if self.regression:
            return "regression"
        return "cannot judge" if self.cannot_judge else "pass"

    @property
    def exit_code(self) -> int:
        return {"pass": EXIT_OK, "regression": EXIT_REGRESSION}.get(self.verdict, EXIT_INPUT)


def gate(baseline: Side, candidate: Side, noise: Side | None = None, *, policy: str = "overlap",
         margin: float = DEFAULT_MARGIN, metric: str = "flexible", max_error_rate: float = 0.0,
         noises: Sequence[Side] = (), repeats: Sequence[Side] = (),
         skip: Sequence[str] = ()) -> GateReport:
    """Judge a candidate run; raise IncomparableError when it cannot be judged at all."""
    if policy not in POLICIES or metric not in METRICS:
        raise ValueError(f"unknown policy {policy!r} or metric {metric!r}")
    all_noise = ([noise] if noise else []) + list(noises)
    check_skip(baseline, skip)
    setup = inspect_setup(baseline, candidate, all_noise[0] if all_noise else None,
                          all_noise[1:], repeats)
    comparison = compare_sides(baseline, candidate, noises=all_noise, repeats=repeats, skip=skip)
    check_error_rate(baseline, [candidate, *all_noise], max_error_rate, skip)
    judged = with_worst_case(judged_accuracy(comparison.pairing, metric), baseline, candidate)
    decisions = decide(policy, margin, judged, comparison, skip)
    if all(d.passed is None and d.cannot_judge is None for d in decisions):
        raise IncomparableError("nothing to judge: no task has ground truth (correct is null) "
                                "and no --noise run was given to measure drift against")
    return GateReport(policy, margin, metric, setup, comparison, judged, decisions)
