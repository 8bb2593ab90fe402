"""The power of the divergence test against the noise floor, and the runs and items it needs.

judge/divergence.py kl_test gives the larger of two p-values, so a rise of the candidate's
mean per-token KL over the floor's is shown only when both reject at the level a:

- item by item, the permutation within items; its normal form: the candidate's mean of
  per-item means less the noise runs' has sd `item_spread` = s sqrt(1 + 1/k) / sqrt(n) under
  the null (n items, k noise runs, s one run's per-item spread);
- run by run, the candidate's mean KL as one more draw among the k noise runs' means on the
  log scale: with k >= 3, Student's t with k - 1 degrees of freedom on their own spread, so its
  power at a log-rise g is the noncentral t's tail at the noncentrality
  g / (sigma sqrt(1 + 1/k)) (exact for normal log means); with fewer, a normal reference with
  the assumed log-sd of judge/floor.py (0.25) between restarts.

The power of the two together is taken as the product of theirs: both grow with the same
candidate mean, so the product is a floor of the joint power. A rise is in nats per token
(absolute); a relative rise is that share of the floor's mean KL. A floor of exactly 0 (noise
runs identical to the baseline, a batch-invariant server) shows any rise.
bench/kl_plan.py checks these figures against the whole test simulated.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kveval.judge.kl_test import ASSUMED_KL_SPREAD, KlTest
from kveval.judge.power import POWER

MOST_NOISE_RUNS = 8
MOST_ITEMS = 1_000_000
TINY = 1e-12


@dataclass(frozen=True)
class Floor:
    """What forced runs say of the floor: its mean KL (nats per token); the log-sd of a run's
    mean between restarts at `items` items (None: not measured); one run's per-item spread
    (the root of the mean per-item variance between runs, nats)."""

    mean: float
    spread: float | None
    item_sd: float
    items: int

    def spread_at(self, items: int) -> float | None:
        """The log-sd of a run's mean at another size: its part from the items' own spread
        shrinks as 1 / sqrt(n), the part between restarts stays."""
        if self.spread is None or self.mean <= TINY:
            return self.spread
        share = (self.item_sd / self.mean) ** 2
        between = max(self.spread ** 2 - share / max(self.items, 1), 0.0)
        return math.sqrt(between + share / items)


def item_power(rise: float, item_spread: float, level: float) -> float:
    from scipy.stats import norm

    if rise <= 0:
        return 0.0
    if item_spread <= 0:
        return 1.0
    return float(norm.sf(norm.isf(level) - rise / item_spread))


def run_power(rise: float, floor: float, spread: float | None, runs: int, level: float) -> float:
    """The run-by-run test's power at this rise over `runs` noise runs whose mean is `floor`
    and whose log means spread by `spread` (measured: used from three runs; else assumed)."""
    from scipy.stats import nct, norm, t

    if rise <= 0 or runs < 1:
        return 0.0
    if floor <= TINY:
        return 1.0
    gap = math.log1p(rise / floor)
    if runs < 3 or spread is None:
        scale = ASSUMED_KL_SPREAD * math.sqrt(1 + 1 / runs)
        return float(norm.sf(norm.isf(level) - gap / scale))
    if spread <= 0:
        return 1.0
    noncentral = gap / (spread * math.sqrt(1 + 1 / runs))
    return float(nct.sf(t.isf(level, runs - 1), runs - 1, noncentral))


def joint_power(rise: float, floor: Floor, items: int, runs: int, level: float) -> float:
    """Both parts' power together (their product) at n items and k noise runs."""
    spread = floor.item_sd * math.sqrt(1 + 1 / runs) / math.sqrt(items)
    measured = floor.spread_at(items) if runs >= 3 else None
    return (item_power(rise, spread, level)
            * run_power(rise, floor.mean, measured, runs, level))


def item_sd(test: KlTest) -> float:
    """One run's per-item spread under the null: between the noise runs alone where there
    are two (the candidate's own rise would widen it), else from the test's whole spread."""
    if test.noise_item_sd is not None:
        return test.noise_item_sd
    return test.item_spread * math.sqrt(test.items) / math.sqrt(1 + 1 / max(test.noise_runs, 1))


def of_test(test: KlTest) -> Floor:
    """The floor a gate's divergence test saw: its noise runs' mean KL, their spread
    (measured from three), and the per-item spread."""
    means = np.asarray(test.noise_means, dtype=float)
    logs = np.log(np.maximum(means, TINY))
    spread = float(logs.std(ddof=1)) if len(means) >= 3 else None
    return Floor(float(means.mean()) if len(means) else 0.0, spread, item_sd(test), test.items)


def detectable_rise(floor: Floor, items: int, runs: int, level: float,
                    power: float = POWER) -> float | None:
    """The smallest rise (nats per token) over the floor shown with this power at n items
    and k noise runs; None when none up to a thousand times the floor is."""
    if items < 1 or runs < 1:
        return None
    if floor.mean <= TINY and floor.item_sd <= 0:
        return 0.0  # a quiet floor: any rise shows
    high = floor.mean * 1000 if floor.mean > TINY else 1.0
    if joint_power(high, floor, items, runs, level) < power:
        return None
    low = 0.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if joint_power(mid, floor, items, runs, level) < power \
            else (low, mid)
    return high


@dataclass(frozen=True)
class Needed:
    """The noise runs and items a rise needs; None: none up to the most tried."""

    runs: int | None
    items: int | None


def needed(rise: float, floor: Floor, level: float, power: float = POWER,
           most_items: int | None = None, most_runs: int = MOST_NOISE_RUNS) -> Needed:
    """The fewest noise runs that show this rise with at most `most_items` items (None: any
    number), and the fewest items they need; the permutation must also be able to reach the
    level at all ((k + 1)^-n <= level)."""
    from kveval.judge.power import smallest_size

    if floor.mean <= TINY and floor.item_sd <= 0:  # a quiet floor: any rise shows
        return Needed(1, _reach(1, level))
    if rise <= 0:
        return Needed(None, None)
    largest = most_items or MOST_ITEMS
    for runs in range(1, most_runs + 1):
        def short(n: int, k: int = runs) -> bool:
            return joint_power(rise, floor, n, k, level) < power

        items = smallest_size(short, _reach(runs, level), largest)
        if items is not None and items <= largest:
            return Needed(runs, items)
    return Needed(None, None)


def _reach(runs: int, level: float) -> int:
    """The fewest items whose exact permutation can reach the level: (k + 1)^-n <= level."""
    return max(math.ceil(math.log(1 / level) / math.log(runs + 1)), 1)


@dataclass(frozen=True)
class RestartsFor:
    """What k forced restarts can show of a relative rise of the forced KL, before any is
    made: with fewer than three the restarts' spread is assumed (ASSUMED_KL_SPREAD) and only
    `assumed_rise` (a share of the floor) shows; from three, the rise shows wherever the
    restarts' mean KL spread by at most `widest_spread` (a log-sd; None: not even none)."""

    runs: int
    assumed_rise: float | None
    widest_spread: float | None


def restarts_for(rise: float, runs: int, level: float, power: float = POWER) -> RestartsFor:
    """A relative rise (0.1: 10% over the floor) at k restarts with many items (the run-by-run
    part decides: a suite's items make the item-by-item part's share small)."""
    if runs < 3:
        found = _bisect(lambda r: run_power(r, 1.0, None, runs, level) >= power, 0.0, 1000.0)
        return RestartsFor(runs, found, None)
    if run_power(rise, 1.0, 0.0, runs, level) < power:
        return RestartsFor(runs, None, None)
    widest = _bisect(lambda s: run_power(rise, 1.0, s, runs, level) < power, 0.0, 10.0)
    return RestartsFor(runs, None, widest)


def _bisect(above: Callable[[float], bool], low: float, high: float) -> float | None:
    """The boundary in (low, high] where `above` turns true; None when it never does."""
    if not above(high):
        return None
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (low, mid) if above(mid) else (mid, high)
    return high
