"""The gate's one decision: every check of every task in one family, then one verdict per task.

Checks (judge/checks.py), each a one-sided test with a p-value, Holm-adjusted together:
- accuracy, tasks with ground truth: the candidate's wrong answers against the pool of the
  baseline's setup (judge/floor.py: item by item, and as one more restart with the pool's
  spread), in the worst case (the candidate's errors on items the baseline answered counted
  as wrong); without a noise run the pool is the baseline, and the item-by-item part is the
  exact one-sided McNemar test;
- drift, tasks without ground truth: the candidate's changed answers against the pool
  (without a noise run it cannot be run, and keeps its share of alpha);
- truncated and empty, every task: the candidate's answers cut at max_tokens, and its empty
  ones, each against the pool (the baseline alone without a noise run);
- length, every length of a long-context task, and lengths, all its lengths together where
  its scores are graded (with 0/1 scores that test is the accuracy check itself);
- recovery, long-context tasks with --min-recovery: "the AUC recovery is at least R";
- divergence, tasks with log-probabilities in every run: the candidate's KL against the
  noise runs' (free-running, on the positions both runs shared);
- forced, every task of the baseline's own forced pass, where forced runs are given: the
  candidate's forced KL against each restart's, all against that pass (judge/forced.py).

Task verdicts: under the overlap policy a task fails when a check of it is significant or its
candidate's Wilson interval lies wholly below the baseline's. Under the paired policy a task
fails with "a loss shown" when its accuracy check is significant, passes when Tango's 95%
interval rules out a loss above its margin, cannot be judged when its size cannot reach the
margin at its own flip rate (with the items it would need), and else fails with "a loss above
the margin not ruled out". A task without ground truth is judged by drift beside collapse.
The divergence checks (free-running and forced) fail a task only with --max-kl T, a rise
beyond T; without it a rise shown is named beside the verdict (`shown`) and changes no exit
code. Either way they are checks of the one family, with their declared weights.

No verdict without evidence: a task passes only where some check of it could reach its level
(Tarone's reduction kept it) and could fail it, or a divergence check could reach its level
and showed no rise; else it is "not judged", with why. The paired policy's pass is its own
evidence (an interval that rules out the margin).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from kveval.judge.accuracy import PairedComparison
from kveval.judge.checks import Check, Levels, adjust, first, first_step_levels, of_task
from kveval.judge.detect import task_detectable
from kveval.judge.evidence import (
    DEFAULT_MARGIN,
    Options,
    TaskEvidence,
    gating,
    task_checks,
)
from kveval.judge.lengthstats import MIN_PER_LENGTH
from kveval.judge.power import margin_items, reaches_margin

POLICIES = ("overlap", "paired")
__all__ = ["DEFAULT_MARGIN", "POLICIES", "Options", "TaskDecision", "TaskEvidence", "decide"]


@dataclass(frozen=True)
class TaskDecision:
    task: str
    rule: str | None  # "overlap", "paired", "drift", "collapse"; None: nothing judges it
    status: str  # "pass", "regression", "cannot judge", "skipped", "not judged"
    failed: tuple[str, ...] = ()  # the significant checks (and "overlap")
    outcome: str | None = None  # paired: "loss_shown" or "not_ruled_out"
    cannot_judge: str | None = None  # why, with the numbers
    margin: float | None = None  # the paired policy's margin for this task (points)
    shown: tuple[str, ...] = ()  # divergence checks significant without --max-kl
    not_judged: str | None = None  # why no check of the task could judge it

    @property
    def passed(self) -> bool | None:
        return {"pass": True, "regression": False}.get(self.status)

    @property
    def skipped(self) -> bool:
        return self.status == "skipped"

    @property
    def judged(self) -> bool:
        return self.status in ("pass", "regression")


def _paired(e: TaskEvidence, acc: PairedComparison, failed: list[str],
            margin: float) -> TaskDecision:
    worst = acc.decisive
    if "accuracy" in failed:
        return TaskDecision(e.task, "paired", "regression", tuple(failed), "loss_shown",
                            margin=margin)
    if failed:
        return TaskDecision(e.task, "paired", "regression", tuple(failed), margin=margin)
    if worst.difference.low >= -margin / 100:
        return TaskDecision(e.task, "paired", "pass", margin=margin)
    t = worst.table
    if not reaches_margin(t.n, t.discordant, margin):
        return TaskDecision(e.task, "paired", "cannot judge",
                            cannot_judge=too_small(t.n, t.discordant, margin), margin=margin)
    return TaskDecision(e.task, "paired", "regression", ("margin",), "not_ruled_out",
                        margin=margin)


def too_small(n: int, flips: int, margin: float) -> str:
    """Why n items with this many flips cannot rule out the margin, with what they need: the
    items at this flip rate, or the margin these items can reach."""
    import math

    from kveval.judge.power import expected_table
    from kveval.judge.stats import paired_difference_ci

    needed = margin_items(flips / n if n else 0.0, margin)
    needs = f"needs about {needed:,} at that rate" if needed else "no number of items can"
    reach = -paired_difference_ci(expected_table(n, flips)).low
    wider = math.ceil(reach * 1000 - 1e-9) / 10
    rate = f"{100 * flips / n:.1f}%" if n else "0%"
    return (f"{n} items with {flips} ({rate}) of their answers flipping either way cannot rule "
            f"out a loss of {margin:g} points: {needs}, or `--margin {wider:.1f}`")


def _recovery_missing(e: TaskEvidence, o: Options) -> str | None:
    if o.min_recovery is None or e.recovery is None:
        return None
    if e.fewest_pairs < MIN_PER_LENGTH:
        return (f"AUC recovery needs at least {MIN_PER_LENGTH} paired items in every length; "
                f"the smallest length has {e.fewest_pairs}")
    if e.recovery.p_below is None:
        return "AUC recovery cannot be judged: no paired scored items, or a baseline AUC of 0"
    return None


def below_the_setup(e: TaskEvidence) -> bool:
    """The overlap rule: the candidate's Wilson 95% interval lies wholly below the baseline's,
    and below every noise run's too (a restart whose interval the candidate's clears is one
    the setup itself can fall to)."""
    from kveval.judge.stats import wilson

    acc = e.accuracy
    if acc is None or acc.candidate.interval.high >= acc.baseline.interval.low:
        return False
    t = e.wrong
    if t is None or len(t.pool) < 2:
        return True
    lowest = min(wilson(t.items - w, t.items).low for w in t.pool)
    return wilson(t.items - t.candidate, t.items).high < lowest


def _by_rule(e: TaskEvidence, checks: Sequence[Check], failed: list[str],
             o: Options) -> TaskDecision:
    """The task's decision by its rule: paired, overlap, drift or collapse."""
    acc = e.accuracy
    if acc is not None and o.policy == "paired":
        return _paired(e, acc, failed, e.margin if e.margin is not None else o.margin)
    if acc is not None:
        if below_the_setup(e):
            failed.append("overlap")
        return TaskDecision(e.task, o.policy, "regression" if failed else "pass",
                            tuple(failed))
    if e.context_expected:
        return TaskDecision(e.task, "context", "regression" if failed else "pass",
                            tuple(failed))
    drift = first(checks, e.task, "drift")
    rule = "drift" if drift is not None and drift.run else "collapse"
    status = "regression" if failed else ("pass" if rule == "drift" else "not judged")
    return TaskDecision(e.task, rule, status, tuple(failed))


EVIDENT = ("accuracy", "drift")  # the checks whose power is evidence where their p is not


def evidence_of(e: TaskEvidence, checks: Sequence[Check], o: Options, levels: Levels) -> bool:
    """Some check could judge the task: one that can fail it (or a divergence check that
    showed nothing) and either could reach its level on these data, or, for a verdict check,
    would catch some change at all 80% of the time (judge/detect.py: a candidate that changed
    no answer gives McNemar's test nothing to reach its level with, yet a loss would have)."""
    usable = [c for c in checks if c.run and (gating(c, o) or not c.alarmed)]
    if any(c.testable for c in usable):
        return True
    kinds = {c.kind for c in usable} & set(EVIDENT)
    return any(d.value is not None for d in task_detectable(e, levels) if d.kind in kinds)


def unjudged(checks: Sequence[Check], o: Options) -> str:
    """Why none of a task's checks could judge it."""
    shown = [c.name for c in checks if c.testable and c.alarmed and not gating(c, o)]
    if shown:
        return (f"{', '.join(shown)} rose beyond the noise floor, and no check of the answers "
                "could reach its level; --max-kl NATS gates on the rise")
    run = [c for c in checks if c.run]
    if not run:
        return "; ".join(f"{c.name} {c.why_not}" for c in checks) or "it has no check"
    return (f"none of its {len(run)} checks could reach its level on these items (the "
            "smallest p-value each could give is above its share of alpha)")


def decide_task(e: TaskEvidence, checks: Sequence[Check], o: Options,
                levels: Levels | None = None) -> TaskDecision:
    if e.skipped:
        return TaskDecision(e.task, None, "skipped")
    if e.missing:
        return TaskDecision(e.task, None, "cannot judge", cannot_judge=e.missing)
    mine = of_task(checks, e.task)
    failed = [c.name for c in mine if c.alarmed and gating(c, o)]
    shown = tuple(c.name for c in mine if c.alarmed and not gating(c, o))
    blocked = _recovery_missing(e, o)
    d = replace(_by_rule(e, checks, failed, o), shown=shown)
    if blocked and d.status != "regression":
        return TaskDecision(e.task, d.rule, "cannot judge", cannot_judge=blocked,
                            margin=d.margin, shown=shown)
    found = levels or first_step_levels(checks, o.alpha)
    if d.status == "pass" and d.rule != "paired" and not evidence_of(e, mine, o, found):
        return replace(d, status="not judged", not_judged=unjudged(mine, o))
    return d


def decide(evidence: Sequence[TaskEvidence], o: Options,
           ) -> tuple[tuple[Check, ...], tuple[TaskDecision, ...]]:
    """The family and one decision per task, in the order given."""
    checks = adjust([c for e in evidence for c in task_checks(e, o)], o.alpha)
    levels = first_step_levels(checks, o.alpha)
    found = tuple(decide_task(e, checks, o, levels) for e in evidence)
    lost = recovery_lost(evidence, o)
    return checks, tuple(replace(d, status="cannot judge", cannot_judge=lost)
                         if lost and d.status in ("pass", "not judged") else d for d in found)


def recovery_lost(evidence: Sequence[TaskEvidence], o: Options) -> str | None:
    """--min-recovery asked for a check that no task can give: no task has a length curve
    (items with an integer meta.target_tokens), so the recovery check would be silently gone."""
    if o.min_recovery is None or any(e.recovery is not None for e in evidence):
        return None
    return (f"--min-recovery {o.min_recovery:g}: no task has a length curve (items with an "
            "integer meta.target_tokens), so AUC recovery cannot be judged")
