"""The gate: can the runs be judged at all, what do they show, and does the candidate pass.

Cannot judge the runs (IncomparableError, exit 2): different sampling parameters, a pair whose
prompt differs, no paired items, a task of the baseline that the candidate or a noise run
lacks (unless skipped), error and missing items above the limit (the baseline's missing items
counted against its own header's plan, the others' against the baseline). `examine` gathers
what the runs show, per task, and the family of checks (judge/decide.py); `compare` and
`score` print the same family, `gate` decides on it. Exit 1 when a regression was found, else
2 when a task could not be judged, else 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from kveval.errors import EXIT_INPUT, EXIT_OK, EXIT_REGRESSION, IncomparableError
from kveval.judge import positions
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
from kveval.judge.checks import ALPHA, Check, Levels, first_step_levels
from kveval.judge.compare import Comparison, Side, TaskDrift, compare_sides
from kveval.judge.curves import Curve, CurveOptions, task_curves
from kveval.judge.decide import (
    DEFAULT_MARGIN,
    POLICIES,
    Options,
    TaskDecision,
    TaskEvidence,
    decide,
)
from kveval.judge.detect import Detectable, task_detectable
from kveval.judge.floor import CountTest
from kveval.judge.forced import Forced, check_forced, forced_divergences, forced_tasks
from kveval.judge.inputs import Inputs, prepared
from kveval.judge.judgeable import Need, check_error_rate, check_max_kl, check_skip
from kveval.judge.kl_test import TaskDivergence, task_divergences
from kveval.judge.length_pool import length_pool
from kveval.judge.pooled import pooled_accuracy
from kveval.judge.positions import ContextFound
from kveval.judge.setup import (
    Difference,
    Setup,
    check_sampling,
    fingerprint_differences,
    flatten,
    inspect_setup,
)

__all__ = [
    "DEFAULT_MARGIN", "POLICIES", "TaskDecision", "Check",
    "METRICS", "Accuracy", "Difference", "PairedComparison", "ScoreReport", "Setup", "TaskScore",
    "accuracy", "check_sampling", "compare_accuracy", "fingerprint_differences", "flatten",
    "inspect_setup", "judged_accuracy", "paired_accuracy", "score_report", "score_side",
]


@dataclass(frozen=True)
class Family:
    """The options that shape the family of checks: every command that prints an adjusted
    p-value takes them, so the same runs and options print the same p everywhere."""

    metric: str = "flexible"
    alpha: float = ALPHA
    max_kl: float | None = None
    min_recovery: float | None = None
    max_ppl_rise: float | None = None  # percent, the context task's perplexity check
    curves: CurveOptions = field(default_factory=CurveOptions)
    skip: tuple[str, ...] = ()


@dataclass(frozen=True)
class Examined:
    """What the runs show: drift and collapse, accuracy, length curves, divergence (free
    running and forced), each task's evidence and the family of checks (adjusted)."""

    comparison: Comparison
    accuracy: tuple[PairedComparison, ...]
    curves: dict[str, Curve]
    divergences: tuple[TaskDivergence, ...]
    evidence: tuple[TaskEvidence, ...]
    checks: tuple[Check, ...]
    family: Family
    inputs: Inputs | None = None  # the runs as judged: copies counted once, bad batches apart
    forced: tuple[TaskDivergence, ...] = ()  # teacher-forced, against the baseline's own pass
    forced_runs: Forced | None = None
    context: tuple[ContextFound, ...] = ()  # the context tasks, by position

    @property
    def levels(self) -> Levels:
        """The levels one check must reach on its own in the family (Holm's first step)."""
        return first_step_levels(self.checks, self.family.alpha)

    @cached_property
    def detectable(self) -> dict[str, tuple[Detectable, ...]]:
        """By task: the smallest change each tested figure catches (judge/detect.py)."""
        return {e.task: task_detectable(e, self.levels) for e in self.evidence
                if not e.skipped and not e.missing and not e.context_expected}

    @property
    def by_position(self) -> frozenset[str]:
        """The tasks of forced documents (context): judged by position, their answers never
        change, so drift and collapse say nothing of them."""
        return frozenset(e.task for e in self.evidence if e.context_expected)

    def pooled(self, task: str) -> CountTest | None:
        """The task's accuracy check: its wrong answers against the baseline's setup."""
        return next((e.wrong for e in self.evidence if e.task == task), None)

    @property
    def notices(self) -> tuple[str, ...]:
        """What was set apart or is not what it claims: copies, bad batches."""
        return self.inputs.warnings if self.inputs is not None else ()


def task_margin(base: Side, task: str) -> float | None:
    """A suite task's own `margin` (points), as the baseline's header recorded it."""
    spec = base.header.task(task) if base.header else None
    params = spec.get("params") if spec else None
    value = params.get("margin") if isinstance(params, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


@dataclass(frozen=True)
class _Found:
    """Per task, by name: what compare, accuracy, curves and divergence found."""

    drift: dict[str, TaskDrift]
    accuracy: dict[str, PairedComparison]
    curves: dict[str, Curve]
    divergence: dict[str, TaskDivergence]
    wrong: dict[str, CountTest]
    length_pools: dict[str, dict[int, tuple[float, float]]]
    forced: dict[str, TaskDivergence]
    forced_tasks: frozenset[str]
    context: dict[str, ContextFound]
    context_tasks: frozenset[str]


def _evidence(name: str, found: _Found, base: Side, skip: Sequence[str]) -> TaskEvidence:
    drift = found.drift.get(name)
    if name in skip:
        return TaskEvidence(name, skipped=True)
    if drift is None:
        return TaskEvidence(name, missing=f"no item of {name} was answered in both runs "
                                          "(errors or missing)")
    curve = found.curves.get(name)
    versus = curve.versus if curve is not None else None
    div = found.divergence.get(name)
    forced = found.forced.get(name)
    collapse = drift.collapse
    return TaskEvidence(
        name, accuracy=found.accuracy.get(name), wrong=found.wrong.get(name),
        changed=drift.changed,
        truncated=collapse.truncated_test if collapse else None,
        empty=collapse.empty_test if collapse else None,
        lengths=versus.paired if versus else (),
        length_pool=tuple((n, *found.length_pools[name][n])
                          for n in sorted(found.length_pools.get(name, {}))),
        across=versus.across if versus and not versus.across.binary else None,
        recovery=versus.recovery if versus else None,
        fewest_pairs=versus.fewest_pairs if versus else 0,
        divergence=div.test if div is not None else None,
        forced=forced.test if forced is not None else None,
        forced_expected=name in found.forced_tasks,
        log_probs=any(i.logprobs is not None for i in base.items if i.task == name),
        margin=task_margin(base, name), context=found.context.get(name),
        context_expected=name in found.context_tasks)


def examine(base: Side, cand: Side, noises: Sequence[Side] = (), repeats: Sequence[Side] = (),
            family: Family = Family(), show: int = 0, forced: Forced | None = None) -> Examined:
    """Everything the runs show, and the family of checks on it: copies among the noise runs
    counted once and every run's bad batch set apart first (judge/inputs.py); `forced`: the
    teacher-forced passes of the baseline's answers (judge/forced.py)."""
    check_skip(base, family.skip)
    if forced is not None:
        check_forced(base, forced)
    inputs = prepared(base, cand, noises)
    base, cand, noises = inputs.baseline, inputs.candidate, inputs.noises
    comparison = compare_sides(base, cand, show=show, noises=noises, repeats=repeats,
                               skip=family.skip)
    judged = with_worst_case(judged_accuracy(comparison.pairing, family.metric), base, cand)
    curves = task_curves(cand.items, base.items, base.label, family.curves)
    documents = positions.context_tasks(base.header.tasks if base.header else [])
    pairs = [comparison.pairing.pairs, *(p.pairs for p in comparison.noise_pairings)]
    kept = [positions.apart(p, documents) for p in pairs]
    divergences = tuple(task_divergences(kept[0], kept[1:], family.max_kl))
    labels = [run.label for run in (cand, *noises)]
    context = positions.all_context(documents, pairs, labels, family)
    forced_found = forced_divergences(forced, family.max_kl) if forced else ()
    check_max_kl(family, base, noises, divergences, forced, context)
    wrong = {a.task: t for a in judged
             if (t := pooled_accuracy(a.task, base, noises, cand, a.metric)) is not None}
    pools = {task: length_pool(task, base, noises, cand) for task in curves}
    found = _Found({t.task: t for t in comparison.tasks}, {a.task: a for a in judged},
                   curves, {d.task: d for d in divergences}, wrong, pools,
                   {d.task: d for d in forced_found}, forced_tasks(forced),
                   {c.task: c for c in context}, documents)
    names = dict.fromkeys([*(item.task for item in base.items),
                           *(t.task for t in comparison.tasks)])
    evidence = tuple(_evidence(n, found, base, family.skip) for n in names)
    options = Options(alpha=family.alpha, max_kl=family.max_kl,
                      min_recovery=family.min_recovery)
    checks, _ = decide(evidence, options)
    return Examined(comparison, judged, curves, divergences, evidence, checks, family,
                    inputs, forced_found, forced, context)



@dataclass(frozen=True)
class GateReport:
    policy: str
    margin: float  # points
    metric: str
    setup: Setup
    examined: Examined
    decisions: tuple[TaskDecision, ...]
    needs: tuple[Need, ...] = ()  # what would judge the tasks not judged (judge/needs.py)

    @property
    def comparison(self) -> Comparison:
        return self.examined.comparison

    @property
    def accuracy(self) -> tuple[PairedComparison, ...]:
        return self.examined.accuracy

    @property
    def checks(self) -> tuple[Check, ...]:
        return self.examined.checks

    @property
    def regression(self) -> bool:
        return any(d.status == "regression" for d in self.decisions)

    @property
    def cannot_judge(self) -> bool:
        return any(d.status == "cannot judge" for d in self.decisions)

    @property
    def judged_nothing(self) -> bool:
        """No task could be judged: no verdict without evidence either way."""
        return not any(d.judged for d in self.decisions)

    @property
    def verdict(self) -> str:
        """A found regression outranks a task that could not be judged."""
        if self.regression:
            return "regression"
        return "cannot judge" if self.cannot_judge or self.judged_nothing else "pass"

    @property
    def exit_code(self) -> int:
        return {"pass": EXIT_OK, "regression": EXIT_REGRESSION}.get(self.verdict, EXIT_INPUT)


def gate(baseline: Side, candidate: Side, noises: Sequence[Side] = (), *,
         policy: str = "overlap", margin: float = DEFAULT_MARGIN, max_error_rate: float = 0.0,
         repeats: Sequence[Side] = (), family: Family = Family(),
         forced: Forced | None = None) -> GateReport:
    """Judge a candidate run; raise IncomparableError when it cannot be judged at all."""
    if policy not in POLICIES or family.metric not in METRICS:
        raise ValueError(f"unknown policy {policy!r} or metric {family.metric!r}")
    check_skip(baseline, family.skip)
    setup = inspect_setup(baseline, candidate, noises[0] if noises else None, noises[1:],
                          repeats)
    examined = examine(baseline, candidate, noises, repeats, family, forced=forced)
    check_error_rate(baseline, [candidate, *noises], max_error_rate, family.skip)
    options = Options(policy, margin, family.alpha, family.max_kl, family.min_recovery)
    _, decisions = decide(examined.evidence, options)
    if all(d.skipped or d.rule == "collapse" for d in decisions):
        raise IncomparableError("nothing to judge: no task has ground truth (correct is null) "
                                "and no --noise run was given to measure drift against")
    return GateReport(policy, margin, family.metric, setup, examined, decisions)
