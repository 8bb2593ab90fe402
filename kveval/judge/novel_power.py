"""What the new answers' cost test (judge/novel.py) catches, planned from a pilot.

A pilot's runs of one setup (three or more: the baseline, the noise runs and a candidate that
is another restart) show what a restart's answers are in each of the gate's two readings,
each run read against the others as the gate reads a pool run: how many a run gives per item
(a), their net cost per answer (h), its variance (v), and how far the cost rate moves between
restarts beyond counting (s2, the pilot's own moderated by the declared prior
PRIORS["novel"]; the gate's pool of k + 1 runs then reads it with the prior again, as the
gate does).

How many of a run's answers a reading holds depends on how many runs it is read against: an
answer is read where most of the others gave the setup's answer.
The pilot's share gives how often a run departs (p, departures taken as independent and each
its own answer), and p the shares at k noise runs: a pool run's a_k against the k other pool
runs (and the candidate, for new answers), the candidate's a_c against all k + 1.

A loss of d (a share of the items) turns d n right answers wrong: d u n more answers of the
reading (u: the chance an item is read, that fewer than half of the k + 1 pool runs depart
there), each costing 1 where a restart's cost h. At n items
and k noise runs the gate's candidate then has N = (a_c + d u) n such answers whose cost per
answer lies d u (1 - h) / (a_c + d u) above the pool's, against the scale of the moderated
spread (k + 1 pool runs, the prior's df + k) with the counting variance v / N + v / N_pool,
N_pool = (k + 1) a_k n. A reading reaches its share of the level (the level split between
the readings the gate can take as if they were unrelated, Bonferroni: the gate's correlated
split, judge/novel.py reading_level, holds a reading to a level at least that high, so a plan
errs long) with probability `power` once that gap is the t quantile plus the normal quantile
at `power` times the scale (judge/detect.py spread_loss); the loss is caught where one of the
readings catches it. Where the pool would hold fewer than LEAST_NEW answers of every reading
the gate judges by the pool test, and the plan models that test instead (judge/plan.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

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
    """One reading of a restart's answers as a pilot shows them: its new answers (kind
    "new") or all its changed ones ("changed")."""

    share: float  # a: a run's answers of this reading per item, against the pilot's others
    rate: float  # h: their net cost per answer
    variance: float  # v: an answer's cost variance
    between: float  # s2: the cost rate's variance between restarts beyond counting, the
    # pilot's own moderated by the prior (a few runs' sample variance alone is mostly noise)
    runs: int  # the pilot's runs of the setup
    kind: str = "new"

    @cached_property
    def departs(self) -> float:
        """p: how often a run departs from the setup's answer to an item, read from the
        share (departures taken as independent and each its own): the share's inverse
        below the departure rate at which it is largest."""
        others = self.runs - 1
        grid = np.linspace(0.0, 0.5, 501)
        low, high = 0.0, float(grid[int(np.argmax(_share(grid, others)))])
        for _ in range(40):
            mid = (low + high) / 2
            low, high = (mid, high) if _share(mid, others) < self.share else (low, mid)
        return high

    def shares(self, noise_runs: int) -> tuple[float, float]:
        """(a pool run's answers of this reading per item, the candidate's): the candidate
        is read against every pool run, a pool run against the others and (new answers)
        the candidate too."""
        p, own = self.departs, noise_runs + 1 if self.kind == "new" else noise_runs
        return _share(p, own), _share(p, noise_runs + 1)

    def applies(self, n: int, noise_runs: int) -> bool:
        """Whether the gate reads n items with this many noise runs this way."""
        pool = noise_runs + 1
        return pool >= LEAST_RUNS and pool * self.shares(noise_runs)[0] * n >= LEAST_NEW

    def seen_loss(self, noise_runs: int, loss: float) -> float:
        """The share of the items a loss turns into answers of this reading: those where
        most pool runs gave the setup's answer."""
        return loss * _kept(self.departs, noise_runs + 1)

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
        """The candidate's cost per answer beyond the pool's, at this loss."""
        lost = self.seen_loss(noise_runs, loss)
        answers = self.shares(noise_runs)[1] + lost
        return lost * (1 - self.rate) / answers if answers > 0 else 0.0

    def catches(self, n: int, noise_runs: int, loss: float, level: float,
                power: float) -> bool:
        found = spread_loss(self.spread(n, noise_runs, loss), level, power)
        return self.gap(noise_runs, loss) >= found

    def loss(self, n: int, noise_runs: int, level: float, power: float,
             ceiling: float = 1.0) -> float | None:
        """The smallest loss (a fraction) caught with this power; None when even `ceiling`
        is not."""
        return _smallest_loss(self, n, noise_runs, level, power, ceiling)


@dataclass(frozen=True)
class NovelReadings:
    """The readings the gate takes (judge/novel.py KINDS), as a pilot shows them: a loss is
    caught where one of the readings the gate can take catches it at its share of the level
    (Bonferroni: the gate's correlated split holds a reading to a level at least that
    high)."""

    readings: tuple[NovelPilot, ...]

    def _taken(self, n: int, noise_runs: int) -> list[NovelPilot]:
        return [r for r in self.readings if r.applies(n, noise_runs)]

    def applies(self, n: int, noise_runs: int) -> bool:
        return bool(self._taken(n, noise_runs))

    def catches(self, n: int, noise_runs: int, loss: float, level: float,
                power: float) -> bool:
        taken = self._taken(n, noise_runs)
        share = level / max(len(taken), 1)
        return any(r.catches(n, noise_runs, loss, share, power) for r in taken)

    def loss(self, n: int, noise_runs: int, level: float, power: float,
             ceiling: float = 1.0) -> float | None:
        return _smallest_loss(self, n, noise_runs, level, power, ceiling)


def _smallest_loss(model: NovelPilot | NovelReadings, n: int, noise_runs: int, level: float,
                   power: float, ceiling: float) -> float | None:
    """The smallest loss the model catches with this power; None when even `ceiling` is
    not."""
    return smallest_reaching(
        lambda loss: not model.catches(n, noise_runs, loss, level, power), ceiling)


def _kept(departs: Any, runs: int) -> Any:
    """The chance that an item is read against `runs` runs: fewer than half of them depart
    (they hold a majority for the setup's answer; a departure is each run's own, so a new
    answer is one none of them gave). `departs`: a rate, or an array of them."""
    from scipy.stats import binom

    return binom.cdf(math.ceil(runs / 2) - 1, runs, departs)


def _share(departs: Any, others: int) -> Any:
    """A run's answers of a reading per item against `others` runs: it departs, on an item
    they read (a rate, or an array of them)."""
    return departs * _kept(departs, others)


def of_pilot(codes: np.ndarray, wrong: np.ndarray, collapsed: np.ndarray,
             ) -> NovelReadings | None:
    """From runs x items of answer codes, wrong answers and answers cut short or empty, every
    run a restart of the setup; None with fewer than LEAST_RUNS runs or no new answer."""
    runs = codes.shape[0]
    if runs < LEAST_RUNS or not codes.shape[1]:
        return None
    found = [reading(codes, wrong, collapsed, kind) for kind in KINDS]
    readings = tuple(r for r in found if r is not None)
    return NovelReadings(readings) if readings else None


def reading(codes: np.ndarray, wrong: np.ndarray, collapsed: np.ndarray, kind: str,
            ) -> NovelPilot | None:
    """One reading of the pilot's runs; None where no run gives an answer of it."""
    runs = codes.shape[0]
    per_run = each_against_the_rest(list(range(runs)), codes, wrong, collapsed, kind)
    every = np.concatenate(per_run)
    if not every.size:
        return None
    rate = float(every.mean())
    variance = max(float(every.var()), LEAST_VARIANCE)
    between, _ = rate_spread(per_run, rate, variance)
    return NovelPilot(every.size / runs / codes.shape[1], rate, variance, between, runs, kind)
