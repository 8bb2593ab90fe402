"""The accuracy check's power as the gate will judge a planned run (judge/plan.py).

With two noise runs or more, and a new answer in the pool, the gate judges accuracy by
the cost of the candidate's new answers alone (judge/novel.py), and a plan sizes for that test
(judge/novel_power.py, from the pilot's restarts). Otherwise the gate's pool test decides: the
exact McNemar part against the baseline (judge/detect.py mcnemar_power) and the spread part, a
restart's wrong count moving by its counting variance and the restarts' own spread
(`Restarts`); a size reaches a loss once both parts do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kveval.judge.detect import detectable_loss, mcnemar_power
from kveval.judge.floor import CountTest
from kveval.judge.novel import NovelCost, shift_variance
from kveval.judge.novel_power import NovelPilot
from kveval.judge.spread import PRIORS


@dataclass(frozen=True)
class Restarts:
    """How far a restart moves one run's wrong count, per item of the task: the counting part
    (its variance grows with the items) and the restarts' own part (its sd grows with them)."""

    counting: float  # variance per item
    spread: float  # sd per item

    @classmethod
    def of(cls, test: CountTest | None) -> Restarts:
        if test is None or test.spread is None or not test.items:
            return cls(0.0, 0.0)
        if test.novel is not None:
            return cls.of_novel(test.novel, test.items)
        run = max(test.spread.variance - (test.spread.floor if test.spread.measured else 0.0),
                  0.0)  # with the baseline alone the counting part is apart (`extra`)
        return cls(test.spread.floor / test.items, math.sqrt(run) / test.items)

    @classmethod
    def of_novel(cls, novel: NovelCost, items: int) -> Restarts:
        """The new answers' test (judge/novel.py) in answers lost per item: the candidate's
        new answers grow with the items as the pool's do, and each lost answer adds one new
        answer's excess."""
        share, per = max(novel.answers, 1) / items, novel.loss_per_point()
        ratio = max(novel.answers, 1) / max(novel.pool_answers, 1)
        return cls(novel.spread.floor * share * (1 + ratio) / per ** 2,
                   math.sqrt(shift_variance(novel.spread.runs)) * share / per)

    def loss(self, n: int, noise_runs: int, level: float, power: float) -> float:
        """The loss (a fraction) the spread part catches with this power at n items."""
        from scipy.stats import norm, t

        df = PRIORS["accuracy"].df + noise_runs
        variance = self.counting * n + (self.spread * n) ** 2
        scale = math.sqrt(variance * (1 + 1 / (noise_runs + 1)))
        return (float(t.isf(level, df)) + float(norm.ppf(power))) * scale / n if n else 1.0


@dataclass(frozen=True)
class AccuracyModel:
    """A task's accuracy check as a pilot shows it: the share of answers flipping between
    runs, how far a restart moves the wrong count, and (with three runs or more) what a
    restart's new answers cost."""

    flip_rate: float
    restarts: Restarts
    novel: NovelPilot | None = None

    def _by_cost(self, n: int, runs: int) -> NovelPilot | None:
        """The cost test's model where the gate judges n items and these runs by it."""
        return self.novel if self.novel is not None and self.novel.applies(n, runs) else None

    def loss(self, n: int, runs: int, level: float, ceiling: float,
             power: float) -> float | None:
        """The smallest loss (a fraction, at most `ceiling`) caught with this power at n
        items and this many noise runs; None when none is."""
        if (cost := self._by_cost(n, runs)) is not None:
            return cost.loss(n, runs, level, power, ceiling)
        exact = detectable_loss(n, self.flip_rate, level, ceiling, power) if n else None
        if exact is None:
            return None
        value = max(exact, self.restarts.loss(n, runs, level, power))
        return value if value <= ceiling else None

    def short(self, n: int, runs: int, level: float, loss: float, power: float) -> bool:
        """Whether n items miss this loss (`loss` read as the power at it)."""
        if (cost := self._by_cost(n, runs)) is not None:
            return not cost.catches(n, runs, loss, level, power)
        return self.restarts.loss(n, runs, level, power) > loss or \
            mcnemar_power(n, self.flip_rate, loss, level) < power
