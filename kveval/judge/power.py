"""How many items a paired accuracy check needs, and whether a task's size can reach a
margin at the share of answers that flip between its runs.

A paired difference estimated from n items of which a share f flip (right in one run, wrong
in the other) has standard error about sqrt(f / n) at no true difference, so Tango's 95%
interval rules out a loss of M points with probability `power` once
n >= f (z_{0.975} + z_{power})^2 / M^2 (the usual sample size of a paired non-inferiority
test; at f = 6% and M = 3 points, 523 items). With no flips at all, n must still be large
enough that a table without a single change rules M out (best_case_loss).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

from kveval.judge.stats import CONFIDENCE, PairedTable, paired_difference_ci

LARGEST_N = 10_000_000  # the search for the items a margin needs stops here
POWER = 0.80


@lru_cache(maxsize=4096)
def best_case_loss(n: int) -> float:
    """The loss (a fraction) n paired items cannot rule out even when no answer changes."""
    return -paired_difference_ci(PairedTable(n, 0, 0, 0)).low


def smallest_size(short: Callable[[int], bool], start: int = 1,
                  largest: int = LARGEST_N) -> int | None:
    """The smallest n >= start that is not `short` (short must be monotone: true below some
    size, false from it on), by doubling from `start`, then bisection; None past `largest`."""
    high = start
    while short(high):
        if high > largest:
            return None
        high *= 2
    low = high // 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if short(mid) else (low, mid)
    return high


def smallest_reaching(short: Callable[[float], bool], high: float, steps: int = 40,
                      ) -> float | None:
    """The smallest x in (0, high] that is not `short` (monotone: true below some x, false
    from it on), by `steps` bisections; None where `high` itself is short."""
    if short(high):
        return None
    low = 0.0
    for _ in range(steps):
        mid = (low + high) / 2
        low, high = (mid, high) if short(mid) else (low, mid)
    return high


def zero_flip_items(margin_points: float) -> int | None:
    """The fewest items whose best case rules out a loss larger than the margin; None past
    LARGEST_N (a margin of 0 needs infinitely many)."""
    margin = margin_points / 100
    return smallest_size(lambda n: best_case_loss(n) > margin)


def margin_items(flip_rate: float, margin_points: float, power: float = POWER) -> int | None:
    """Items that rule out a loss of the margin with this power when nothing changes but
    the share `flip_rate` of answers flips; None when no size can (a margin of 0)."""
    from scipy.stats import norm

    best = zero_flip_items(margin_points)
    if best is None:
        return None
    z = float(norm.ppf(0.5 + CONFIDENCE / 2) + norm.ppf(power))
    return max(best, math.ceil(flip_rate * z * z / (margin_points / 100) ** 2))


def expected_table(n: int, flips: int) -> PairedTable:
    """n items with `flips` discordant pairs split evenly: no difference at this flip rate."""
    lost = flips - flips // 2
    return PairedTable(0, lost, flips // 2, n - flips)


def reaches_margin(n: int, flips: int, margin_points: float) -> bool:
    """Whether n items at this many flips would rule out the margin with no true loss."""
    low = paired_difference_ci(expected_table(n, flips)).low
    return low >= -margin_points / 100
