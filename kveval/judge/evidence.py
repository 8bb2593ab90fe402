"""One task's evidence and its checks: what the runs show for a task (TaskEvidence), the
gate's options (Options), and every check the family holds for it (task_checks), each a
one-sided test with its declared weight (judge/checks.py). judge/decide.py decides on them."""

from __future__ import annotations

from dataclasses import dataclass

from kveval.judge.accuracy import PairedComparison
from kveval.judge.checks import ALPHA, KL_KINDS, Check, not_run, weigh
from kveval.judge.floor import CountTest
from kveval.judge.kl_test import KlTest
from kveval.judge.lengthstats import MIN_PER_LENGTH, PairedScores, Recovery
from kveval.judge.positions import ContextFound
from kveval.judge.stats import mcnemar_greater

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
    forced: KlTest | None = None  # teacher-forced runs: the candidate's against the restarts'
    forced_expected: bool = False  # the baseline's forced pass holds this task
    log_probs: bool = False  # the baseline has log-probabilities for this task
    margin: float | None = None  # the task's own margin (a suite's `margin`)
    context: ContextFound | None = None  # the context task: divergence by position
    context_expected: bool = False  # a context task (forced documents): judged by position
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


def _divergence(e: TaskEvidence) -> list[Check]:
    if e.divergence is not None and e.divergence.items:
        return [weigh(e.task, "divergence", e.divergence.p_value, e.divergence.min_p)]
    if e.log_probs:
        return [not_run(e.task, "divergence", "no item has log-probabilities in the "
                                              "baseline, the candidate and a noise run")]
    return []


def _forced(e: TaskEvidence) -> list[Check]:
    if not e.forced_expected:
        return []
    if e.forced is not None and e.forced.items:
        return [weigh(e.task, "forced", e.forced.p_value, e.forced.min_p)]
    return [not_run(e.task, "forced", "no item forced in the baseline's own forced pass, the "
                                      "candidate's and a restart's")]


def _context(e: TaskEvidence) -> list[Check]:
    """A context task's checks: its KL by position against the restarts', and with
    --max-ppl-rise its perplexity change beyond that rise."""
    found = e.context
    if found is None or found.test is None or not found.test.items:
        return [not_run(e.task, "context", "needs the documents forced in the baseline, the "
                                           "candidate and a noise run")]
    checks = [weigh(e.task, "context", found.test.p_value, found.min_p)]
    if found.ppl_p is not None:
        checks.append(weigh(e.task, "context-ppl", found.ppl_p, min(found.ppl_min_p,
                                                                     found.min_p)))
    return checks


def gating(c: Check, o: Options) -> bool:
    """Whether the check fails a task when it alarms: every check but the divergence ones,
    and those too with --max-kl."""
    return c.kind not in KL_KINDS or o.max_kl is not None


def task_checks(e: TaskEvidence, o: Options) -> list[Check]:
    """Every check of one task, before adjustment."""
    if e.skipped or e.missing:
        return []
    if e.context_expected:
        return _context(e)
    found = _accuracy(e) + _drift(e)
    found += _count(e.task, "truncated", e.truncated) + _count(e.task, "empty", e.empty)
    return found + _lengths(e) + _recovery(e, o) + _divergence(e) + _forced(e)


