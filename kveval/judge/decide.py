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
- divergence, tasks with log-probabilities in every run, with --max-kl.

Task verdicts: under the overlap policy a task fails when a check of it is significant or its
candidate's Wilson interval lies wholly below the baseline's. Under the paired policy a task
fails with "a loss shown" when its accuracy check is significant, passes when Tango's 95%
interval rules out a loss above its margin, cannot be judged when its size cannot reach the
margin at its own flip rate (with the items it would need), and else fails with "a loss above
the margin not ruled out". A task without ground truth is judged by drift beside collapse.
Without --max-kl, divergence beyond the noise floor is a warning (its own Holm family) and
never changes the exit code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kveval.judge.accuracy import PairedComparison
from kveval.judge.checks import ALPHA, Check, adjust, first, not_run, of_task, weigh
from kveval.judge.floor import CountTest
from kveval.judge.kl_test import KlTest
from kveval.judge.lengthstats import MIN_PER_LENGTH, PairedScores, Recovery
from kveval.judge.power import margin_items, reaches_margin
from kveval.judge.stats import mcnemar_greater

POLICIES = ("overlap", "paired")
DEFAULT_MARGIN = 3.0  # points: the paired policy's largest tolerated loss


@dataclass(frozen=True)
class TaskEvidence:
    """What the runs show for one task, as the checks read it."""

    task: str
    accuracy: PairedComparison | None = None  # tasks with ground truth
    wrong: CountTest | None = None  # the accuracy check: wrong answers against the pool
    changed: CountTest | None = None  # with noise runs
    truncated: CountTest | None = None
    empty: CountTest | None = None
    lengths: tuple[PairedScores, ...] = ()  # long-context tasks, one per length
    length_pool: tuple[tuple[int, float, float], ...] = ()  # (length, p, min_p) vs the pool
    across: PairedScores | None = None  # graded long-context scores, every length together
    recovery: Recovery | None = None  # with --min-recovery
    fewest_pairs: int = 0  # paired items in the task's smallest length
    divergence: KlTest | None = None  # with log-probabilities and noise runs
    log_probs: bool = False  # the baseline has log-probabilities for this task
    margin: float | None = None  # the task's own margin (a suite's `margin`)
    missing: str | None = None  # why the task cannot be judged at all
    skipped: bool = False


@dataclass(frozen=True)
class Options:
    policy: str = "overlap"
    margin: float = DEFAULT_MARGIN  # points
    alpha: float = ALPHA
    max_kl: float | None = None  # divergence joins the family
    min_recovery: float | None = None  # recovery joins the family


def _count(task: str, kind: str, test: CountTest | None) -> list[Check]:
    return [] if test is None else [weigh(task, kind, test.p_value, test.min_p)]


def _accuracy(e: TaskEvidence) -> list[Check]:
    if e.accuracy is None:
        return []
    if e.wrong is not None:
        return [weigh(e.task, "accuracy", e.wrong.p_value, e.wrong.min_p)]
    t = e.accuracy.decisive.table
    return [weigh(e.task, "accuracy", mcnemar_greater(t.lost, t.gained), 0.5 ** t.discordant)]


def _drift(e: TaskEvidence) -> list[Check]:
    if e.accuracy is not None:
        return []
    if e.changed is None:
        return [not_run(e.task, "drift", "needs a noise run (--noise): the changes a restart "
                                         "makes are what drift is measured against")]
    return _count(e.task, "drift", e.changed)


def _lengths(e: TaskEvidence) -> list[Check]:
    tested = [s for s in e.lengths if s.pairs]
    longest = max((s.length for s in tested if s.length is not None), default=None)
    pooled: dict[int | None, tuple[float, float]] = {
        length: (p, least) for length, p, least in e.length_pool}
    found = [weigh(e.task, "length", *pooled.get(s.length, (s.p_value, s.min_p)),
                   label=_length_label(s.length), longest=len(tested) > 1 and s.length == longest)
             for s in tested]
    if e.across is not None:
        found.append(weigh(e.task, "lengths", e.across.p_value, e.across.min_p))
    return found


def _length_label(tokens: int | None) -> str:
    if tokens is None:
        return ""
    return f"{tokens / 1024:g}k" if (tokens * 4) % 1024 == 0 else str(tokens)


def _recovery(e: TaskEvidence, o: Options) -> list[Check]:
    r = e.recovery
    if o.min_recovery is None or r is None or r.p_below is None:
        return []
    if e.fewest_pairs < MIN_PER_LENGTH:
        return []
    return [weigh(e.task, "recovery", r.p_below, 1 / (r.rounds + 1))]


def _divergence(e: TaskEvidence, o: Options) -> list[Check]:
    if o.max_kl is None:
        return []
    if e.divergence is not None and e.divergence.items:
        return [weigh(e.task, "divergence", e.divergence.p_value, e.divergence.min_p)]
    if e.log_probs:
        return [not_run(e.task, "divergence", "no item has log-probabilities in the "
                                              "baseline, the candidate and a noise run")]
    return []


def task_checks(e: TaskEvidence, o: Options) -> list[Check]:
    """Every check of one task, before adjustment."""
    if e.skipped or e.missing:
        return []
    found = _accuracy(e) + _drift(e)
    found += _count(e.task, "truncated", e.truncated) + _count(e.task, "empty", e.empty)
    return found + _lengths(e) + _recovery(e, o) + _divergence(e, o)


def warnings_family(evidence: Sequence[TaskEvidence], o: Options) -> tuple[Check, ...]:
    """Without --max-kl: divergence beyond the noise floor, its own family."""
    if o.max_kl is not None:
        return ()
    found = [weigh(e.task, "divergence", e.divergence.p_value, e.divergence.min_p)
             for e in evidence if e.divergence is not None and e.divergence.items
             and not e.skipped and not e.missing]
    return adjust(found, o.alpha)


@dataclass(frozen=True)
class TaskDecision:
    task: str
    rule: str | None  # "overlap", "paired", "drift", "collapse"; None: nothing judges it
    status: str  # "pass", "regression", "cannot judge", "skipped", "not judged"
    failed: tuple[str, ...] = ()  # the significant checks (and "overlap")
    outcome: str | None = None  # paired: "loss_shown" or "not_ruled_out"
    cannot_judge: str | None = None  # why, with the numbers
    margin: float | None = None  # the paired policy's margin for this task (points)

    @property
    def passed(self) -> bool | None:
        return {"pass": True, "regression": False}.get(self.status)

    @property
    def skipped(self) -> bool:
        return self.status == "skipped"


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


def decide_task(e: TaskEvidence, checks: Sequence[Check], o: Options) -> TaskDecision:
    if e.skipped:
        return TaskDecision(e.task, None, "skipped")
    if e.missing:
        return TaskDecision(e.task, None, "cannot judge", cannot_judge=e.missing)
    failed = [c.name for c in of_task(checks, e.task) if c.alarmed]
    blocked = _recovery_missing(e, o)
    acc = e.accuracy
    if acc is not None and o.policy == "paired":
        d = _paired(e, acc, failed, e.margin if e.margin is not None else o.margin)
    elif acc is not None:
        if below_the_setup(e):
            failed.append("overlap")
        d = TaskDecision(e.task, o.policy, "regression" if failed else "pass", tuple(failed))
    else:
        drift = first(checks, e.task, "drift")
        rule = "drift" if drift is not None and drift.run else "collapse"
        status = "regression" if failed else ("pass" if rule == "drift" else "not judged")
        d = TaskDecision(e.task, rule, status, tuple(failed))
    if blocked and d.status != "regression":
        return TaskDecision(e.task, d.rule, "cannot judge", cannot_judge=blocked, margin=d.margin)
    return d


def decide(evidence: Sequence[TaskEvidence], o: Options,
           ) -> tuple[tuple[Check, ...], tuple[TaskDecision, ...]]:
    """The family and one decision per task, in the order given."""
    checks = adjust([c for e in evidence for c in task_checks(e, o)], o.alpha)
    return checks, tuple(decide_task(e, checks, o) for e in evidence)
