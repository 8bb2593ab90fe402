"""Accuracy conditional on what a run changes: do the candidate's new answers cost more than
a restart's new answers do?

A restart changes answers, and on an accurate model a changed answer is more often a wrong
one, so a restart that changes more also scores lower: the accuracy a restart loses follows
how many answers it changes, and restarts differ in that (batches, cache state). Comparing the
candidate's wrong count with the pool's must then allow for the whole spread of the pool's
change counts, which two or three runs measure poorly. This test conditions on the changes
instead: it asks what the candidate's *new* answers cost beside what a restart's cost.

- A run's new answers: on the items every other run answers alike (one answer, none of them
  cut short or empty, nor the run itself: those are the truncated and empty checks' to
  judge), the answers it gives other than theirs. A pool run is read against the other pool
  runs and the candidate, the candidate against every pool run: each against as many runs,
  so that under the null hypothesis (the candidate is one more restart) the candidate's new
  answers and each pool run's are read alike.
- A new answer's cost: 1 where it turned the others' right answer wrong (a new loss), -1
  where it turned a wrong one right (a new gain), 0 where its score did not change (another
  right answer, another wrong one). A loss that lands on a wrong answer some restart once
  gave elsewhere (a multiple-choice letter) is still new on an item the others answer alike.
- The reference is exact for counting: under the null the candidate's new answers and the
  pool's are exchangeable, so the candidate's N are N drawn without replacement from the N +
  N_pool new answers of the candidate and the pool together (losses, gains and the rest: a
  multivariate hypergeometric), and its net cost's tail is summed from that law. Restarts
  differ in their cost rate too, so the candidate's rate is shifted by a normal of sd tau
  (1 + 1 / m)^(1/2), tau declared (judge/spread.py PRIORS["novel"], 0.03), m the pool's
  runs: the p-value is the exchange's tail with that shift added, summed over its law.

The exchange needs no rate read from a few answers and no normal tail, so it holds however
few new answers the pool has: with one, a candidate's many new answers can hardly be told
from it, and it says so. `python bench/novel_reference.py` reads the test's A/A in every
world of the calibration bench (loss-biased, fresh, correlated restarts, stable-right items;
log-sd 0 to 1; two and three noise runs; restarts that change 2% or 7% of the answers) and
the declared shift holds it to its level at 0.05, 0.0115, 0.005 and 0.001 in each within
Monte Carlo error (docs/calibration.md).

It needs three runs of the setup (two noise runs; with one, each run's new answers are read
against one other run only, and a pool that changes little leaves the exchange almost
nothing to learn a restart's cost from: a 20-point loss beside a pool of two runs with two
new answers between them was not shown), and one new answer of the pool's runs at least:
where the pool's runs agree item for item (a deterministic server) the pool test
(judge/floor.py) judges alone, and there any change is the candidate's own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from kveval.judge.exchange import least_shown, net_pmf, shifted_tail
from kveval.judge.spread import PRIORS, Spread

LEAST_RUNS = 3  # runs of the baseline's setup this test needs
LEAST_VARIANCE = 0.1  # a new answer's cost variance is never taken below this (the plan's)


@dataclass(frozen=True)
class NovelCost:
    """The candidate's new answers and their net cost beside the pool's."""

    answers: int  # the candidate's new answers (N)
    cost: float  # their net cost, in answers turned wrong
    pool_answers: int  # the pool runs' new answers, each against the others (N_pool)
    rate: float  # h: the pool's net cost per new answer
    spread: Spread  # the normal view of the reference: counting and the declared shift
    losses: int = 0  # the candidate's new answers that turned a right answer wrong
    gains: int = 0  # and those that turned a wrong one right
    pool_losses: int = 0  # the pool's new losses
    pool_gains: int = 0  # and new gains

    @property
    def excess(self) -> float:
        """S: the candidate's net cost beyond what a restart's new answers cost."""
        return self.cost - self.rate * self.answers

    @property
    def gap(self) -> float:
        """The candidate's cost per new answer less the pool's."""
        return self.cost / self.answers - self.rate if self.answers else 0.0

    @cached_property
    def _law(self) -> np.ndarray:
        """The law of the candidate's net cost under exchange with the pool's answers."""
        return net_pmf(self.answers, self.losses + self.pool_losses,
                       self.gains + self.pool_gains, self.answers + self.pool_answers)

    @property
    def shift_sd(self) -> float:
        """The sd of the candidate's net cost from restarts' differing rates."""
        return math.sqrt(shift_variance(self.spread.runs)) * self.answers

    @property
    def p_value(self) -> float:
        if not self.answers:
            return 1.0
        return shifted_tail(self._law, self.answers, self.cost, self.shift_sd)

    def threshold(self, candidate_wrong: int, level: float) -> float:
        """The largest wrong count at which the candidate's net cost does not reach this
        level (one answer below the smallest net cost that does): its own count less how far
        its cost lies beyond that."""
        if not self.answers:
            return math.inf
        bar = least_shown(self._law, self.answers, self.shift_sd, level)
        return math.inf if bar is None else candidate_wrong + bar - 1 - self.cost

    def loss_per_point(self) -> float:
        """How much of one more answer lost shows as excess: it is a new answer costing 1."""
        return max(1.0 - self.rate, 0.05)


def new_costs(run: int, others: list[int], codes: np.ndarray, wrong: np.ndarray,
              collapsed: np.ndarray) -> np.ndarray:
    """The costs of one run's new answers: on the items `others` all answer alike (none of
    them, nor the run, cut short or empty), its answers other than theirs."""
    theirs = codes[others]
    alike = (theirs == theirs[0]).all(axis=0) & ~collapsed[[run, *others]].any(axis=0)
    away = alike & (codes[run] != theirs[0])
    return (wrong[run].astype(int) - wrong[others[0]].astype(int))[away]


def each_against_the_rest(runs: list[int], codes: np.ndarray, wrong: np.ndarray,
                          collapsed: np.ndarray, among: list[int] | None = None,
                          ) -> list[np.ndarray]:
    """The costs of each run's new answers against the other runs (of `among`, where given:
    the runs it is read against)."""
    every = runs if among is None else among
    return [new_costs(r, [o for o in every if o != r], codes, wrong, collapsed) for r in runs]


def shift_variance(runs: int) -> float:
    """tau^2 (1 + 1 / m): how far a restart's cost rate lies from the mean of m pool runs'."""
    return PRIORS["novel"].spread ** 2 * (1 + 1 / max(runs, 1))


def reference(variance: float, answers: int, pool_answers: int, runs: int) -> Spread:
    """The normal view of the test's reference, for plans and the page: the exchange's
    counting variance v (1 / N + 1 / N_pool) of the candidate's cost per new answer less the
    pool's, and the declared shift tau^2 (1 + 1 / m), all of it known (`extra`)."""
    counting = variance / max(answers, 1) + variance / max(pool_answers, 1)
    return Spread(0.0, math.inf, runs, True, variance, extra=counting + shift_variance(runs))


def novel_cost(codes: np.ndarray, wrong: np.ndarray, collapsed: np.ndarray,
               ) -> NovelCost | None:
    """The test, from runs x items of answer codes, wrong answers and answers cut short or
    empty: the pool's runs (the baseline first) then the candidate last. None where the pool
    has fewer than LEAST_RUNS runs or no new answer at all (its runs agree item for item)."""
    pool = list(range(codes.shape[0] - 1))
    if len(pool) < LEAST_RUNS:
        return None
    every = np.concatenate(each_against_the_rest(pool, codes, wrong, collapsed,
                                                 [*pool, len(pool)]))
    if not every.size:
        return None
    own = new_costs(len(pool), pool, codes, wrong, collapsed)
    variance = max(float(every.var()), LEAST_VARIANCE)
    spread = reference(variance, own.size, every.size, len(pool))
    return NovelCost(int(own.size), float(own.sum()), int(every.size), float(every.mean()),
                     spread, int((own > 0).sum()), int((own < 0).sum()),
                     int((every > 0).sum()), int((every < 0).sum()))
