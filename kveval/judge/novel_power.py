"""What the new answers' cost test (judge/novel.py) catches, planned from a pilot.

A pilot's runs of one setup (three or more: the baseline, the noise runs and a candidate that
is another restart) show what a restart's new answers are, each run read against the others'
majority answers as the gate reads a pool run: how many a run gives per item (a), their net
cost per answer (h), its variance (v), and how far the cost rate moves between restarts
beyond counting (s2, the pilot's own moderated by the declared prior PRIORS["novel"]; the
gate's pool of k + 1 runs then reads it with the prior again, as the gate does).

How many of a run's answers are new depends on how many runs it is read against: an answer
is new where the others all gave the setup's answer. The pilot's share gives how
often a run departs (p, departures taken as independent and each its own answer), and p the
shares at k noise runs: a pool run's a_k against the k other pool runs, the candidate's a_c
against all k + 1.

A loss of d (a share of the items) turns d n right answers wrong: d u n more new answers (u =
(1 - p)^(k + 1): the items every pool run answered alike), each costing 1 where a restart's
cost h. At n items and k noise runs the gate's candidate then has N = (a_c + d u) n new
answers whose cost per answer lies d u (1 - h) / (a_c + d u) above the pool's, against the
scale of the moderated spread (k + 1 pool runs, the prior's df + k) with the counting
variance v / N + v / N_pool, N_pool = (k + 1) a_k n. The test reaches its level (split
between its two readings as if they were unrelated, Bonferroni: the gate's correlated split,
judge/novel.py reading_level, holds a reading to a level at least that high, so a plan errs
long) with probability `power` once that gap is the t quantile plus the normal quantile at
`power` times the scale (judge/detect.py spread_loss).
Where the pool would hold fewer than LEAST_NEW new answers the gate judges by the pool test,
and the plan models that test instead (judge/plan.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from kveval.judge.detect import spread_loss
from kveval.judge.novel import (
    KINDS,
    LEAST_NEW,
    LEAST_RUNS,
    LEAST_VARIANCE,
    each_against_the_rest,
    rate_spread,
)
from kveval.judge.power import smallest_reaching
from kveval.judge.spread import PRIORS, Spread


@dataclass(frozen=True)
class NovelPilot:
    """A restart's new answers as a pilot shows them."""

    share: float  # a: a run's new answers per item, against the pilot's other runs
    rate: float  # h: their net cost per answer
    variance: float  # v: a new answer's cost variance
    between: float  # s2: the cost rate's variance between restarts beyond counting, the
    # pilot's own moderated by the prior (a few runs' sample variance alone is mostly noise)
    runs: int  # the pilot's runs of the setup

    @cached_property
    def departs(self) -> float:
        """p: how often a run departs from the setup's answer to an item, read from the
        share: a departure is new where every other run gave the setup's answer (departures
        taken as independent and each its own; the share is largest at p = 1 / runs)."""
        low, high = 0.0, 1 / self.runs
        for _ in range(40):
            mid = (low + high) / 2
            low, high = (mid, high) if _new_share(mid, self.runs - 1) < self.share \
                else (low, mid)
        return high

    def shares(self, noise_runs: int) -> tuple[float, float]:
        """(a pool run's new answers per item, the candidate's): a pool run is read against
        the pool's other runs, the candidate against all of them."""
        p = self.departs
        return _new_share(p, noise_runs), _new_share(p, noise_runs + 1)

    def applies(self, n: int, noise_runs: int) -> bool:
        """Whether the gate judges n items with this many noise runs by this test."""
        pool = noise_runs + 1
        return pool >= LEAST_RUNS and pool * self.shares(noise_runs)[0] * n >= LEAST_NEW

    def seen_loss(self, noise_runs: int, loss: float) -> float:
        """The share of the items a loss turns into new answers: those every pool run
        answered alike."""
        return loss * (1 - self.departs) ** (noise_runs + 1)

    def spread(self, n: int, noise_runs: int, loss: float) -> Spread:
        """The spread the gate's test would read, with a candidate that loses `loss`."""
        prior = PRIORS["novel"]
        moderated = (prior.df * prior.spread ** 2 + noise_runs * self.between) / \
            (prior.df + noise_runs)
        own, theirs = self.shares(noise_runs)
        answers = max((theirs + self.seen_loss(noise_runs, loss)) * n, 1.0)
        pool = max((noise_runs + 1) * own * n, 1.0)
        counting = self.variance / answers + self.variance / pool
        return Spread(moderated, prior.df + noise_runs, noise_runs + 1, True, self.variance,
                      extra=counting)

    def gap(self, noise_runs: int, loss: float) -> float:
        """The candidate's cost per new answer beyond the pool's, at this loss."""
        lost = self.seen_loss(noise_runs, loss)
        answers = self.shares(noise_runs)[1] + lost
        return lost * (1 - self.rate) / answers if answers > 0 else 0.0

    def catches(self, n: int, noise_runs: int, loss: float, level: float,
                power: float) -> bool:
        found = spread_loss(self.spread(n, noise_runs, loss), level / len(KINDS), power)
        return self.gap(noise_runs, loss) >= found

    def loss(self, n: int, noise_runs: int, level: float, power: float,
             ceiling: float = 1.0) -> float | None:
        """The smallest loss (a fraction) caught with this power; None when even `ceiling`
        is not."""
        return smallest_reaching(
            lambda loss: not self.catches(n, noise_runs, loss, level, power), ceiling)


def _new_share(departs: float, others: int) -> float:
    """A run's new answers per item against `others` runs: it departs, and none of them
    does."""
    return departs * (1 - departs) ** others


def of_pilot(codes: np.ndarray, wrong: np.ndarray, collapsed: np.ndarray,
             ) -> NovelPilot | None:
    """From runs x items of answer codes, wrong answers and answers cut short or empty, every
    run a restart of the setup; None with fewer than LEAST_RUNS runs or no new answer."""
    runs = codes.shape[0]
    if runs < LEAST_RUNS or not codes.shape[1]:
        return None
    per_run = each_against_the_rest(list(range(runs)), codes, wrong, collapsed)
    every = np.concatenate(per_run)
    if not every.size:
        return None
    rate = float(every.mean())
    variance = max(float(every.var()), LEAST_VARIANCE)
    between, _ = rate_spread(per_run, rate, variance)
    return NovelPilot(every.size / runs / codes.shape[1], rate, variance, between, runs)
