"""Accuracy conditional on what a run changes: do the candidate's new answers cost more than
a restart's new answers do?

A restart changes answers, and on an accurate model a changed answer is more often a wrong
one, so a restart that changes more also scores lower: the accuracy a restart loses follows
how many answers it changes, and restarts differ in that (batches, cache state). Comparing the
candidate's wrong count with the pool's must then allow for the whole spread of the pool's
change counts, which two or three runs measure poorly. This test conditions on the changes
instead: it asks what the candidate's *new* answers cost, each against the answer the setup
gives, beside what a restart's new answers cost.

- The setup's answer to an item: the one a strict majority of the pool's runs give (the
  baseline and the noise runs); items without one are left out.
- A run's new answers: those no other run gave, on items where the others hold a majority
  answer and none of them was cut short or came back empty (those are the truncated and
  empty checks' to judge). A pool run is read against the other pool runs and the
  candidate, the candidate against every pool run: each against as many runs, so that a
  restart's answers are read alike wherever they sit. (Against its fellows alone a pool run
  would have more of its returns to the usual answer, where the others gave one shared
  alternative, read as new: they cost less, and a restart's would seem to cost more than
  the pool's.) Answers the setup also gave cost what the setup's own answers cost: they are
  not new, whatever their number.
- A new answer's cost: 1 where it turned the setup's right answer wrong, -1 where it turned
  a wrong one right, 0 where its score did not change.
- Under the null hypothesis the candidate is one more restart: its new answers cost, on
  average, what the pool's cost (h, read leave-one-out from each pool run), and its net cost
  S = sum(cost) - h N over its N new answers has the counting variance N v (1 + N / N_pool)
  (v: a new answer's cost variance) plus the spread of h between restarts, moderated toward a
  declared prior (judge/spread.py PRIORS["novel"]); one-sided, Student's t with Satterthwaite's
  degrees of freedom.

Two readings, the smaller p taken: the candidate's *new* answers, the sharper where a
restart's changes land on alternatives the setup has seen; and all its *changed* answers
(every answer other than the setup's, seen or not), which also sees a loss that lands on a
wrong answer some restart once gave (a multiple-choice letter, a fragile item's one wrong
number), where the new answers would call it explained. Both condition on the changes, so a
restart that changes three times as much at a restart's cost passes both. The smaller p is
adjusted for having been the smaller of two (`either_p`): the new answers are a share of the
changed ones, so the two gaps move together; their statistics are taken as jointly normal with
the correlation that share gives (`correlation`), 2p at none and p at full, where doubling
(Bonferroni) would spend the level as if they were unrelated.

It needs three runs of the setup (two noise runs): with fewer there is no majority to read a
restart's new answers against; and LEAST_NEW new answers in the pool's runs, so that a small
task's few new answers are not judged on a normal reference. Otherwise the pool test
(judge/floor.py) judges alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from kveval.judge.harm import usual_answer
from kveval.judge.spread import PRIORS, Spread, prediction_bound, prediction_p, scale

LEAST_RUNS = 3  # runs of the baseline's setup this test needs
LEAST_NEW = 30  # new answers of the pool's runs it needs to read a restart's cost from
KINDS = ("new", "changed")  # the candidate's answers no pool run gave; all it gives other
# than the majority's
LEAST_VARIANCE = 0.1  # a new answer's cost variance is never taken below this
MAX_CORRELATION = 0.999  # of the two readings' statistics (1: one reading twice)


@dataclass(frozen=True)
class NovelCost:
    """The candidate's new answers and their net cost beside the pool's."""

    answers: int  # the candidate's new answers (N)
    cost: float  # their net cost, in answers turned wrong
    pool_answers: int  # the pool runs' new answers, each against the others (N_pool)
    rate: float  # h: the pool's net cost per new answer
    spread: Spread  # of a run's cost per new answer between restarts; extra: the counting part
    kind: str = "new"  # which reading (KINDS)
    readings: int = 1  # how many readings were taken: the p is the smaller of that many
    correlation: float = 0.0  # of the two readings' statistics under the null (`correlation`)

    @property
    def excess(self) -> float:
        """S: the candidate's net cost beyond what a restart's new answers cost."""
        return self.cost - self.rate * self.answers

    @property
    def gap(self) -> float:
        """The candidate's cost per new answer less the pool's."""
        return self.cost / self.answers - self.rate if self.answers else 0.0

    @property
    def raw_p(self) -> float:
        return prediction_p(self.gap, self.spread) if self.answers else 1.0

    @property
    def p_value(self) -> float:
        return either_p(self.raw_p, self.correlation) if self.readings > 1 else self.raw_p

    def per_reading(self, level: float) -> float:
        """The level the reading taken is held to, so that the test is at `level`."""
        return reading_level(level, self.correlation) if self.readings > 1 else level

    def threshold(self, candidate_wrong: int, level: float) -> float:
        """The wrong count at which the candidate's excess reaches this level: its own count
        less how far its cost per new answer lies beyond the bound, in answers."""
        if not self.answers:
            return math.inf
        bound = prediction_bound(self.gap, self.spread, self.per_reading(level))
        return candidate_wrong - bound * self.answers

    def loss_per_point(self) -> float:
        """How much of one more answer lost shows as excess: it is a new answer costing 1."""
        return max(1.0 - self.rate, 0.05)


def new_costs(run: int, others: list[int], codes: np.ndarray, wrong: np.ndarray,
              collapsed: np.ndarray, kind: str = "new") -> np.ndarray:
    """The costs of one run's new answers (kind "new": answers none of `others` gave) or of
    all its answers other than the setup's (kind "changed"), against the setup's answers
    among `others` (their majority's)."""
    usual, holder = usual_answer(codes[others])
    usual_wrong = wrong[others][holder, np.arange(codes.shape[1])]
    seen = (codes[others] == codes[run]).any(axis=0) if kind == "new" else codes[run] == usual
    away = (usual >= 0) & ~seen & ~collapsed[[run, *others]].any(axis=0)
    return (wrong[run].astype(int) - usual_wrong.astype(int))[away]


def each_against_the_rest(runs: list[int], codes: np.ndarray, wrong: np.ndarray,
                          collapsed: np.ndarray, kind: str = "new",
                          among: list[int] | None = None) -> list[np.ndarray]:
    """The costs of each run's new answers (or changed ones) against the other runs (of
    `among`, where given: the runs it is read against)."""
    every = runs if among is None else among
    return [new_costs(r, [o for o in every if o != r], codes, wrong, collapsed, kind)
            for r in runs]


def rate_spread(per_run: list[np.ndarray], rate: float, variance: float) -> tuple[float, int]:
    """(the moderated variance of a run's cost per new answer between restarts, its
    degrees of freedom): the pool runs' own rates beyond their counting variance, with the
    declared prior."""
    prior = PRIORS["novel"]
    rates = [float(c.mean()) if c.size else rate for c in per_run]
    m = len(rates)
    counting = float(np.mean([variance / max(c.size, 1) for c in per_run]))
    sample = max(float(np.var(rates, ddof=1)) - counting, 0.0) if m > 1 else 0.0
    pooled = (prior.df * prior.spread ** 2 + (m - 1) * sample) / (prior.df + m - 1)
    return pooled, int(prior.df + m - 1)


def novel_cost(codes: np.ndarray, wrong: np.ndarray, collapsed: np.ndarray,
               ) -> NovelCost | None:
    """The test, from runs x items of answer codes, wrong answers and answers cut short or
    empty: the pool's runs (the baseline first) then the candidate last. Of the two readings
    (KINDS) the one with the smaller p, its p adjusted for being the smaller (`either_p`).
    None where the pool has fewer than LEAST_RUNS runs or fewer than LEAST_NEW answers to
    read a restart's cost from (a small task: the normal reference would not hold)."""
    found = {kind: t for kind in KINDS if (t := one_reading(codes, wrong, collapsed, kind))}
    if not found:
        return None
    best = min(found.values(), key=lambda t: t.raw_p)
    if len(found) < len(KINDS):
        return best
    return replace(best, readings=len(found),
                   correlation=correlation(found["new"], found["changed"]))


def correlation(new: NovelCost, changed: NovelCost) -> float:
    """Of the two readings' gaps under the null. The candidate's new answers are a share
    (N_new / N_changed) of its changed ones, and each pool run's of its own, so the two gaps
    share the new answers' counting variance, v (1 / N_changed + 1 / N_pool,changed), and
    that share of the new answers' spread between restarts: what the two would share if the
    new and the other changed answers moved between restarts independently. Where a restart
    moves the cost of all its changed answers alike the readings agree more, and the p
    taken is larger than it need be; only costs that moved against each other between
    restarts would make it smaller."""
    share = min(new.answers / max(changed.answers, 1), 1.0)
    between = new.spread.variance * (1 + 1 / max(new.spread.runs, 1))
    counting = new.spread.floor * (1 / max(changed.answers, 1) +
                                   1 / max(changed.pool_answers, 1))
    both = scale(new.spread) * scale(changed.spread)  # > 0: v is at least LEAST_VARIANCE
    return min(max((share * between + counting) / both, 0.0), MAX_CORRELATION)


def either_p(p: float, rho: float) -> float:
    """The chance under the null that the smaller of two one-sided p-values is at most p,
    their statistics jointly normal with correlation rho: 2p less the chance that both lie
    that far out (p squared at no correlation)."""
    from scipy.stats import multivariate_normal, norm

    if p <= 0.0 or p >= 1.0:
        return min(max(p, 0.0), 1.0)
    r = min(max(rho, 0.0), MAX_CORRELATION) if math.isfinite(rho) else 0.0
    z = float(norm.isf(p))
    both = float(multivariate_normal.cdf([-z, -z], mean=[0.0, 0.0], cov=[[1.0, r], [r, 1.0]]))
    return min(1.0, max(2 * p - both, p))


def reading_level(level: float, rho: float) -> float:
    """The level one reading is held to so that the smaller of the two is at `level`:
    between level / 2 (no correlation) and level (full)."""
    from scipy.optimize import brentq

    if level <= 0.0 or level >= 1.0:
        return level
    return float(brentq(lambda p: either_p(p, rho) - level, level / 2, level,
                        xtol=level * 1e-9))


def one_reading(codes: np.ndarray, wrong: np.ndarray, collapsed: np.ndarray, kind: str,
                ) -> NovelCost | None:
    """One reading's test (None where it cannot be read)."""
    pool = list(range(codes.shape[0] - 1))
    if len(pool) < LEAST_RUNS:
        return None
    among = [*pool, len(pool)] if kind == "new" else pool
    per_run = each_against_the_rest(pool, codes, wrong, collapsed, kind, among)
    every = np.concatenate(per_run)
    if every.size < LEAST_NEW:
        return None
    own = new_costs(len(pool), pool, codes, wrong, collapsed, kind)
    rate = float(every.mean())
    variance = max(float(every.var()), LEAST_VARIANCE)
    between, df = rate_spread(per_run, rate, variance)
    n = max(own.size, 1)
    counting = variance / n + variance / every.size
    spread = Spread(between, float(df), len(pool), True, variance, extra=counting)
    return NovelCost(int(own.size), float(own.sum()), int(every.size), rate, spread, kind)
