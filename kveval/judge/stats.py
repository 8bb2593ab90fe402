"""Pure statistics on counts: Wilson intervals, the exact McNemar test, a paired difference CI.

Every function takes integers and returns floats. scipy does the work wherever it has the
method (the Wilson score interval and the exact binomial test behind McNemar); the paired
difference interval, which scipy lacks, is Tango's score interval: a short formula whose
roots scipy finds. scipy is imported inside the functions so that importing this module is
free.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache, partial

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """A closed interval [low, high], as a fraction (0.918, not 91.8)."""

    low: float
    high: float

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high


@dataclass(frozen=True)
class PairedTable:
    """The 2x2 table of one item set judged twice, baseline first, candidate second."""

    both: int  # right in both runs
    lost: int  # right in the baseline, wrong in the candidate
    gained: int  # wrong in the baseline, right in the candidate
    neither: int  # wrong in both runs

    def __post_init__(self) -> None:
        _check_counts(self.both, self.lost, self.gained, self.neither)

    @property
    def n(self) -> int:
        return self.both + self.lost + self.gained + self.neither

    @property
    def baseline_correct(self) -> int:
        return self.both + self.lost

    @property
    def candidate_correct(self) -> int:
        return self.both + self.gained

    @property
    def discordant(self) -> int:
        return self.lost + self.gained

    @property
    def difference(self) -> float:
        """Candidate accuracy minus baseline accuracy (0 when there are no items)."""
        return (self.gained - self.lost) / self.n if self.n else 0.0


def _check_counts(*counts: int) -> None:
    if any(c < 0 for c in counts):
        raise ValueError(f"counts must not be negative: {counts}")


@lru_cache(maxsize=1 << 16)  # pure in its integer arguments; scipy's call costs ~1 ms
def wilson(k: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """Wilson score interval for k successes in n trials (scipy's `proportion_ci`).

    n = 0 carries no information and gives [0, 1].
    """
    _check_counts(k, n)
    if k > n:
        raise ValueError(f"k = {k} exceeds n = {n}")
    if n == 0:
        return Interval(0.0, 1.0)
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return Interval(float(ci.low), float(ci.high))


@lru_cache(maxsize=1 << 16)
def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for b and c discordant pairs.

    Under no difference each discordant pair falls either way with probability 1/2, so
    this is scipy's exact binomial test of b successes in b + c trials at p = 1/2.
    No discordant pairs (all pairs concordant) gives p = 1.
    """
    _check_counts(b, c)
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest

    return min(1.0, float(binomtest(b, b + c, 0.5).pvalue))


@lru_cache(maxsize=1 << 16)
def mcnemar_greater(b: int, c: int) -> float:
    """One-sided exact McNemar p-value: are b discordant pairs more than c, beyond chance?"""
    _check_counts(b, c)
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(b, b + c, 0.5, alternative="greater").pvalue)


def paired_table(baseline: Sequence[bool], candidate: Sequence[bool]) -> PairedTable:
    """Cross-tabulate per-item correctness of the same items in two runs."""
    cells = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    for base, cand in zip(baseline, candidate, strict=True):
        cells[(bool(base), bool(cand))] += 1
    return PairedTable(
        both=cells[(True, True)],
        lost=cells[(True, False)],
        gained=cells[(False, True)],
        neither=cells[(False, False)],
    )


def _tango_score(table: PairedTable, delta: float) -> float:
    """Tango's score statistic for the hypothesis "candidate minus baseline = delta"."""
    n, gained, lost = table.n, table.gained, table.lost
    a = 2 * n
    b = -gained - lost + (2 * n - gained + lost) * delta
    c = -lost * delta * (1 - delta)
    p_lost = (math.sqrt(max(0.0, b * b - 4 * a * c)) - b) / (2 * a)  # restricted MLE
    excess = gained - lost - n * delta
    variance = n * (2 * p_lost + delta * (1 - delta))
    if variance <= 0:
        return 0.0 if excess == 0 else math.copysign(math.inf, excess)
    return excess / math.sqrt(variance)


@lru_cache(maxsize=1 << 16)
def paired_difference_ci(table: PairedTable, confidence: float = CONFIDENCE) -> Interval:
    """Interval for candidate minus baseline accuracy on the same items.

    Tango's asymptotic score interval (Tango 1998, Stat. Med. 17, 891-908; recommended in
    Fagerland, Lydersen & Laake 2014, Stat. Med. 33, 2850-2875). With N pairs, `gained`
    (baseline wrong, candidate right) and `lost` (baseline right, candidate wrong), the
    score statistic for a difference d is

        T(d) = (gained - lost - N d) / sqrt(N (2 p + d (1 - d)))

    where p is the maximum-likelihood probability of a lost pair under d, the root of
    2N p^2 + B p + C = 0 with B = -gained - lost + (2N - gained + lost) d and
    C = -lost d (1 - d). The interval is every d with |T(d)| <= z; T decreases in d, so
    each limit is one root, found with scipy's brentq. At d = 0, T is the McNemar statistic
    (gained - lost) / sqrt(gained + lost). Unlike the Wald interval it does not collapse to a
    point when no pair is discordant; in bench/gate_simulation.py its one-sided error at
    the margin stays near the nominal 2.5% (2.0 to 2.8%), below Newcombe's square-and-add
    interval when few answers flip. N = 0 gives [-1, 1].
    """
    n = table.n
    if n == 0:
        return Interval(-1.0, 1.0)
    from scipy.optimize import brentq
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + confidence / 2))
    estimate, edge = table.difference, 1 - 1e-12
    score = partial(_tango_score, table)
    low, high = -1.0, 1.0
    if estimate > -edge and score(-edge) > z:
        low = float(brentq(lambda d: score(d) - z, -edge, estimate, xtol=1e-12))
    if estimate < edge and score(edge) < -z:
        high = float(brentq(lambda d: score(d) + z, estimate, edge, xtol=1e-12))
    return Interval(low, high)


def largest_loss(difference: Interval) -> float:
    """The largest loss (a positive fraction) that an interval for candidate minus baseline
    cannot rule out; 0 when the interval rules out any loss."""
    return max(0.0, -difference.low)
