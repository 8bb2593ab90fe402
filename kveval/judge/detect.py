"""What a verdict could have seen: the smallest change each check catches 80% of the time.

Accuracy: n paired items of which a share f flips either way between runs of the baseline's
setup (half each way), and a loss of d points adding d n lost pairs. The discordant count is
Binomial(n, f + d) and the lost ones among D are Binomial(D, (f / 2 + d) / (f + d)); the exact
one-sided McNemar test rejects at level a when the lost ones reach c(D), the smallest count
whose binomial tail at 1/2 is at most a. Power is the sum over D, exact (scipy), and the
detectable loss is the smallest d with power 0.8, at most the baseline's own accuracy: a model
at 1.8% can lose at most 1.8 points.

Accuracy against the pool (judge/floor.py accuracy_test) has a second part, the candidate as
one more restart with the pool's spread: it reaches level a once the loss exceeds the t
quantile at a plus the normal quantile at 0.8 times the spread's scale. The detectable loss is
the larger of the two parts'. With three runs of the setup the new answers' cost decides alone
(judge/novel.py): the loss it catches is the shift its spread part catches, in answers (each
lost answer adds 1 - h to the excess).

Counts (changed, truncated, empty answers): the candidate's count that the floor's two parts
flag at level a (judge/floor.py: the exact part approximated as a binomial of the candidate's
share 1/M of the runs' total, the spread part by the t quantile of its moderated spread), and
the extra count over the pool's mean that reaches it with probability 0.8 (a Poisson count).

Divergence: the smallest rise of the candidate's mean KL over the floor's that the
permutation within items and the run-by-run test together reach with probability 0.8 at level
a (judge/kl_power.py: the noncentral t of the run-by-run test on the noise runs' own spread
from three runs, the assumed spread below).

The level a is the family's first step (judge/checks.py Levels): alpha times the check's weight
over the weight of the testable checks, so a detectable figure never promises more than the
whole gate delivers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kveval.judge.checks import Levels
from kveval.judge.floor import CountTest, logit_share
from kveval.judge.kl_test import KlTest
from kveval.judge.novel import NovelCost
from kveval.judge.power import POWER, smallest_reaching, smallest_size
from kveval.judge.spread import Spread, reference_df, scale
from kveval.judge.stats import PairedTable


def lost_needed(discordant: np.ndarray, level: float) -> np.ndarray:
    """c(D), the fewest lost pairs among D discordant ones the exact one-sided McNemar test
    rejects with at this level (D + 1: none): scipy's binomial isf, from the normal guess
    corrected by its exact tail, a step at a time."""
    from scipy.stats import binom, norm

    guess = np.ceil(discordant / 2 + float(norm.isf(level)) * np.sqrt(discordant) / 2)
    needed = np.clip(guess, 0, discordant + 1)
    while np.any(up := binom.sf(needed - 1, discordant, 0.5) > level):
        needed = needed + up
    while np.any(down := (needed > 0) & (binom.sf(needed - 2, discordant, 0.5) <= level)):
        needed = needed - down
    return needed


def _discordant_range(n: int, rate: float) -> np.ndarray:
    """The discordant counts of n pairs that carry all but about 1e-9 of Binomial(n, rate)."""
    from scipy.stats import binom

    if rate >= 1:
        return np.array([n])
    low, high = int(binom.ppf(1e-9, n, rate)), int(binom.isf(1e-9, n, rate))
    return np.arange(max(low, 1), high + 1)


def mcnemar_power(n: int, flip_rate: float, loss: float, level: float) -> float:
    """The exact one-sided McNemar test's power to show a loss (fractions) at this level."""
    from scipy.stats import binom

    rate = min(1.0, flip_rate + loss)
    if n <= 0 or rate <= 0:
        return 0.0
    discordant = _discordant_range(n, rate)
    share = (flip_rate / 2 + loss) / rate
    hits = binom.sf(lost_needed(discordant, level) - 1, discordant, share)
    return float(np.sum(binom.pmf(discordant, n, rate) * hits))


def detectable_loss(n: int, flip_rate: float, level: float, ceiling: float = 1.0,
                    power: float = POWER) -> float | None:
    """The smallest loss (a fraction) caught with this power; None when even a loss of
    `ceiling` (the baseline's accuracy: all it could lose) is not."""
    return smallest_reaching(lambda loss: mcnemar_power(n, flip_rate, loss, level) < power,
                             ceiling)


def items_for_loss(loss: float, flip_rate: float, level: float, power: float = POWER,
                   largest: int = 10_000_000) -> int | None:
    """The fewest items whose accuracy check catches this loss with this power."""
    if loss <= 0:
        return None
    return smallest_size(lambda n: mcnemar_power(n, flip_rate, loss, level) < power, 8, largest)


@dataclass(frozen=True)
class CountFloor:
    """What a count check compares with: the pool runs' counts of n items (own counts, or
    each run's share of the changes), how many runs the exact part exchanges, and the spread
    part's moderated spread on the logit scale."""

    items: int
    pool: tuple[float, ...]
    exchanged: int  # M: the candidate and the runs it is exchanged with, item by item
    spread: Spread | None = None


def _spread_threshold(floor: CountFloor, level: float) -> float:
    """The candidate's count the spread part flags at this level."""
    from scipy.stats import t

    n, pool = floor.items, [min(max(q, 0.0), floor.items) for q in floor.pool]
    if floor.spread is None:
        return max(pool)
    ys = np.array([logit_share(q, n) for q in pool])
    bar = float(ys.mean()) + float(t.isf(level, reference_df(floor.spread))) * scale(
        floor.spread)
    share = 1 / (1 + math.exp(-bar))
    return max(max(pool), share * (n + 1) - 0.5)


def _exact_threshold(floor: CountFloor, level: float) -> int:
    """The candidate's count the exact part flags: its share 1/M of the total, binomial."""
    from scipy.stats import binom

    total = int(round(sum(floor.pool) * (floor.exchanged - 1) / max(len(floor.pool), 1)))
    counts = np.arange(1, floor.items + 1)
    flagged = np.flatnonzero(binom.sf(counts - 1, counts + total, 1 / floor.exchanged) <= level)
    return int(counts[flagged[0]]) if flagged.size else floor.items + 1


def detectable_extra(floor: CountFloor, level: float, power: float = POWER) -> float | None:
    """The extra count over the pool's mean that the check catches with this power; None
    when no count up to the item total would be flagged."""
    from scipy.stats import poisson

    needed = max(_spread_threshold(floor, level), _exact_threshold(floor, level))
    if needed > floor.items:
        return None
    mean = float(np.mean(floor.pool))
    return smallest_reaching(
        lambda extra: poisson.sf(math.ceil(needed) - 1, mean + extra) < power, float(floor.items))


def detectable_shift(test: KlTest, level: float, power: float = POWER) -> float | None:
    """The per-token KL rise (nats) over the noise floor that the divergence test at its size
    catches with this power (judge/kl_power.py); None when no rise up to a thousand times
    the floor is."""
    from kveval.judge.kl_power import detectable_rise, of_test

    return detectable_rise(of_test(test), test.items, max(test.noise_runs, 1), level, power)


@dataclass(frozen=True)
class Detectable:
    """The smallest change a check catches 80% of the time, in its own unit; `value` None:
    no change of this kind up to the most possible can show."""

    kind: str
    unit: str  # "points" (accuracy lost), "answers" (extra count), "nats" (KL per token)
    value: float | None
    items: int
    flip_rate: float | None = None  # accuracy: the share of answers flipping either way
    ceiling: float | None = None  # accuracy: the most that can be lost (baseline accuracy)
    floor: float | None = None  # divergence: the floor's mean KL (nats per token)
    runs: int | None = None  # divergence: the noise runs


def spread_loss(spread: Spread, level: float, power: float = POWER) -> float:
    """The shift of a count (items) the spread part catches with this power."""
    from scipy.stats import norm, t

    return (float(t.isf(level, reference_df(spread))) + float(norm.ppf(power))) * scale(spread)


def novel_loss(novel: NovelCost, level: float, power: float = POWER) -> float:
    """The answers lost that the new answers' cost catches with this power: each lost answer
    is one more new answer, costing 1 where a restart's cost the pool's rate."""
    return spread_loss(novel.spread, level, power) * max(novel.answers, 1) / \
        novel.loss_per_point()


def of_accuracy(table: PairedTable, level: float, pooled: CountTest | None = None,
                ) -> Detectable:
    n, ceiling = table.n, table.baseline_correct / table.n if table.n else 0.0
    rate = table.discordant / n if n else 0.0
    value = detectable_loss(n, rate, level, ceiling) if n and ceiling > 0 else None
    if pooled is not None and pooled.novel is not None:
        value = novel_loss(pooled.novel, level) / n if n else None
        value = value if value is not None and value <= ceiling else None
    elif value is not None and pooled is not None and pooled.spread is not None:
        value = max(value, spread_loss(pooled.spread, level) / n)
        value = value if value <= ceiling else None
    return Detectable("accuracy", "points", None if value is None else 100 * value, n, rate,
                      100 * ceiling)


def of_count(kind: str, test: CountTest, level: float) -> Detectable:
    floor = CountFloor(test.items, test.figures, test.exchanged, test.spread)
    return Detectable(kind, "answers", detectable_extra(floor, level), test.items)


def of_divergence(test: KlTest, level: float, kind: str = "divergence") -> Detectable:
    """The rise the KL test catches; None where its items cannot reach the level at all (a
    permutation within n items with one noise run never gives less than 1/2^n)."""
    value = detectable_shift(test, level) if test.min_p <= level else None
    floor = float(np.mean(test.noise_means)) if test.noise_means else None
    return Detectable(kind, "nats", value, test.items, floor=floor, runs=test.noise_runs)


def task_detectable(e: object, levels: Levels) -> tuple[Detectable, ...]:
    """Each tested figure of a task's evidence (judge/decide.py TaskEvidence), each at its
    own first-step level."""
    found = []
    accuracy = getattr(e, "accuracy", None)
    if accuracy is not None:
        found.append(of_accuracy(accuracy.decisive.table, levels.of("accuracy"),
                                 getattr(e, "wrong", None)))
    elif getattr(e, "changed", None) is not None:
        found.append(of_count("drift", e.changed, levels.of("drift")))  # type: ignore[attr-defined]
    for kind in ("truncated", "empty"):
        test = getattr(e, kind, None)
        if test is not None:
            found.append(of_count(kind, test, levels.of(kind)))
    for kind in ("divergence", "forced"):
        test = getattr(e, kind, None)
        if test is not None and test.items:
            found.append(of_divergence(test, levels.of(kind), kind))
    return tuple(found)
