"""What the new answers' cost test (judge/novel.py) catches, planned from a pilot.

A pilot's runs of one setup (three or more: the baseline, the noise runs and a candidate that
is another restart) show what a restart's new answers are, each run read against the others
as the gate reads a pool run: how many a run gives per item (a), their net cost per answer
(h) and its variance (v).

A run's new answers are its departures on items every run it is read against answers alike.
The pilot's share gives how often a run departs (p, departures taken as independent and each
its own answer), and p the share at k noise runs: a pool run is read against the k other
pool runs and the candidate, the candidate against the k + 1 pool runs, both against k + 1
runs, a (1 - p)^(k + 1) p an item.

A loss of d (a share of the items) turns d n right answers wrong: d u n more new answers
(u = (1 - p)^(k + 1): the chance that no pool run departs there), each costing 1 where a
restart's cost h. At n items and k noise runs the gate's candidate then has N = (a + d u) n
new answers whose cost per answer lies d u (1 - h) / (a + d u) above the pool's, against the
gate's reference in its normal view (judge/novel.py `reference`: the exchange's counting
variance v / N + v / N_pool, N_pool = (k + 1) a n, and the declared spread of the rate
between restarts). The test reaches the level with probability `power` once that gap is the
level's normal quantile times that scale plus the normal quantile at `power` times the scale
the gap has under the loss: the lost answers each cost exactly 1, so only the candidate's
restart-like answers vary (v a n / N^2 for the candidate's mean, the pool's and the shift as
under the null). That power is averaged over what a restart's new answer may cost (normal
about h with its posterior sd, truncated to -1 to 1): a size's assurance (O'Hagan & Stevens 2001),
since a pilot reads h from a few new answers and a cost read too low loses more power than
one read too high gains.
Where the pool would hold no new answer (its runs agree item for item) the gate judges by the
pool test, and the plan models that test instead (judge/plan.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from kveval.judge.novel import (
    LEAST_RUNS,
    LEAST_VARIANCE,
    each_against_the_rest,
    reference,
    shift_variance,
)
from kveval.judge.power import smallest_reaching
from kveval.judge.spread import Spread


@dataclass(frozen=True)
class NovelPilot:
    """A restart's new answers as a pilot shows them."""

    share: float  # a: a run's new answers per item, against the pilot's others
    rate: float  # h: their net cost per answer
    variance: float  # v: an answer's cost variance
    runs: int  # the pilot's runs of the setup
    read_from: int = 0  # the pilot's new answers h and v were read from
    rate_sd: float = 0.0  # h's posterior sd: how far a restart's own cost may lie from it

    def at_rate(self, rate: float) -> NovelPilot:
        """The same pilot with its new answers costing `rate` each (within -1 to 1), known."""
        return replace(self, rate=min(max(rate, -1.0), 1.0), rate_sd=0.0)

    @cached_property
    def departs(self) -> float:
        """p: how often a run departs from the setup's answer to an item, read from the
        share a p (1 - p)^(runs - 1), below the departure rate at which it is largest."""
        others = self.runs - 1
        low, high = 0.0, 1.0 / self.runs
        for _ in range(40):
            mid = (low + high) / 2
            low, high = (mid, high) if _share(mid, others) < self.share else (low, mid)
        return high

    def share_at(self, noise_runs: int) -> float:
        """A run's new answers per item with this many noise runs (read against k + 1)."""
        return _share(self.departs, noise_runs + 1)

    def applies(self, n: int, noise_runs: int) -> bool:
        """Whether the gate reads n items with this many noise runs this way."""
        pool = noise_runs + 1
        return pool >= LEAST_RUNS and pool * self.share_at(noise_runs) * n >= 1

    def seen_loss(self, noise_runs: int, loss: float) -> float:
        """The share of the items a loss turns into new answers: those no pool run departs
        on."""
        return loss * (1 - self.departs) ** (noise_runs + 1)

    def answers(self, n: int, noise_runs: int, loss: float) -> tuple[float, float]:
        """(the candidate's new answers, the pool's) at n items, with a candidate that loses
        `loss`: one at least each."""
        share = self.share_at(noise_runs)
        return (max((share + self.seen_loss(noise_runs, loss)) * n, 1.0),
                max((noise_runs + 1) * share * n, 1.0))

    def spread(self, n: int, noise_runs: int, loss: float) -> Spread:
        """The reference the gate's test would read, with a candidate that loses `loss`."""
        answers, pool = self.answers(n, noise_runs, loss)
        return reference(self.variance, int(round(answers)), int(round(pool)), noise_runs + 1)

    def gap(self, noise_runs: int, loss: float, rate: np.ndarray | float | None = None,
            ) -> np.ndarray | float:
        """The candidate's cost per answer beyond the pool's, at this loss, where a restart's
        new answer costs `rate` (the pilot's own where None)."""
        lost = self.seen_loss(noise_runs, loss)
        answers = self.share_at(noise_runs) + lost
        cost = self.rate if rate is None else rate
        return lost * (1 - cost) / answers if answers > 0 else 0.0 * cost

    def alternative_scale(self, n: int, noise_runs: int, loss: float) -> float:
        """The sd of the candidate's cost per new answer less the pool's where it loses
        `loss`: its lost answers each cost exactly 1, so only its restart-like answers vary."""
        answers, pool = self.answers(n, noise_runs, loss)
        restart_like = self.share_at(noise_runs) * n
        return math.sqrt(self.variance * restart_like / answers ** 2 + self.variance / pool
                         + shift_variance(noise_runs + 1))

    def assurance(self, n: int, noise_runs: int, loss: float, level: float) -> float:
        """The chance the gap reaches the level's quantile of the null's scale, the
        alternative's own scale around it, averaged over what a restart's new answer may cost
        (the module's docstring): a pilot's few new answers ask for the items their doubt
        needs, not those their mean needs."""
        from scipy.stats import norm

        null = math.sqrt(self.spread(n, noise_runs, loss).extra)
        rates, weights = _rate_posterior(self.rate, self.rate_sd)
        reach = (self.gap(noise_runs, loss, rates) - float(norm.isf(level)) * null) / \
            self.alternative_scale(n, noise_runs, loss)
        return float(weights @ norm.cdf(reach))

    def catches(self, n: int, noise_runs: int, loss: float, level: float,
                power: float) -> bool:
        """Whether n items and these noise runs catch the loss with this power, assured."""
        return self.assurance(n, noise_runs, loss, level) >= power

    def loss(self, n: int, noise_runs: int, level: float, power: float,
             ceiling: float = 1.0) -> float | None:
        """The smallest loss (a fraction) caught with this power; None when even `ceiling`
        is not."""
        return smallest_reaching(
            lambda loss: not self.catches(n, noise_runs, loss, level, power), ceiling)


_Z = np.linspace(-6.0, 6.0, 1201)  # a dense grid: near a size's edge the power is a step
_DENSITY = np.exp(-_Z ** 2 / 2)


def _rate_posterior(rate: float, sd: float) -> tuple[np.ndarray, np.ndarray]:
    """Costs and their weights (summing to 1): normal about `rate` with this sd, truncated to
    the costs an answer can have (-1 to 1); a rate outside them is taken at its bound."""
    rates = rate + sd * _Z
    weights = _DENSITY * (np.abs(rates) <= 1.0)
    if not weights.any():
        rates, weights = np.clip(rates, -1.0, 1.0), _DENSITY
    return rates, weights / weights.sum()


def _share(departs: float, others: int) -> float:
    """A run's new answers per item against `others` runs: it departs where none of them
    does."""
    return departs * (1 - departs) ** others


def of_pilot(codes: np.ndarray, wrong: np.ndarray, collapsed: np.ndarray,
             ) -> NovelPilot | None:
    """From runs x items of answer codes, wrong answers and answers cut short or empty, every
    run a restart of the setup; None with fewer than LEAST_RUNS runs or no new answer."""
    runs = codes.shape[0]
    if runs < LEAST_RUNS or not codes.shape[1]:
        return None
    every = np.concatenate(each_against_the_rest(list(range(runs)), codes, wrong, collapsed))
    if not every.size:
        return None
    rate, variance, rate_sd = cost_moments(every)
    return NovelPilot(every.size / runs / codes.shape[1], rate, variance, runs, every.size,
                      rate_sd)


def cost_moments(costs: np.ndarray) -> tuple[float, float, float]:
    """A new answer's net cost, its variance and the cost's posterior sd as a plan reads them
    from a pilot's few: under Jeffreys' prior on the shares of losses, gains and the rest
    (a Dirichlet with half an answer each), so three new losses read as a rate of 0.67, not
    1, and a variance that is not 0; the rate's own posterior variance is the answer's over
    n + 2.5."""
    losses, gains, n = int((costs > 0).sum()), int((costs < 0).sum()), costs.size
    rate = (losses - gains) / (n + 1.5)
    spread = (losses + gains + 1.0) / (n + 1.5) - rate ** 2
    return rate, max(spread, LEAST_VARIANCE), math.sqrt(max(spread, 0.0) / (n + 2.5))
