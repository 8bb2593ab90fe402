"""The noise floor as a pool: is a candidate's count (changed answers, answers cut short,
empty answers) more than the baseline's setup itself produces?

The baseline and every noise run are draws of one setup (the pool); the candidate is tested
against the pool, never against one noise run. Two parts, and the p-value is the larger:

- Exact, for a setup whose runs share one rate (no spread between restarts): under the null
  hypothesis the candidate is exchangeable with the runs it is compared with, item by item.
  Conditional on how many of those runs flag each item, the candidate's flag on an item with
  t of M runs flagging it is Bernoulli(t / M), independently across items, so its count is a
  Poisson-binomial whose upper tail is the p-value (a permutation test within items; with one
  other run it is the exact one-sided McNemar test). Items may differ in how often they flip.
- Spread, for restarts that differ in their rate (batches, cache state): the candidate's
  per-run figure on the logit scale, logit((y + 1/2) / (n + 1)), against the pool's as one
  more draw. With three or more pool runs, their sample standard deviation s and Student's t
  with m - 1 degrees of freedom give a one-sided prediction p-value (Hahn & Meeker,
  "Statistical Intervals", 2nd ed., section 4.7): T = (y_c - mean) / (s sqrt(1 + 1/m)). With
  one or two pool runs the spread cannot be measured; it is taken as ASSUMED_SPREAD (log-sd
  0.25 of the rate, the largest at which bench/gate_calibration.py keeps one noise run's false
  alarms under 5%) plus each figure's counting variance, with a normal reference.

Exchangeable sets: for an own count (truncated, empty) the candidate and every pool run; for
changed answers the candidate and the noise runs, each against the baseline, while the spread
part uses each run's own share of the pairwise changes (the additive model of a round-robin,
c_ab = q_a + q_b, solved by least squares over the pool and the candidate). A candidate whose
figure is no higher than a pool run's own is within the floor (p = 1): the setup itself did
as much, so a copy of the baseline never fails.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

ASSUMED_SPREAD = 0.25  # log-sd of the rate between restarts when the pool cannot measure it


@dataclass(frozen=True)
class CountTest:
    """A candidate's count against the pool of runs of the baseline's setup."""

    items: int
    candidate: int  # the candidate's count (against the baseline for changed answers)
    pool: tuple[int, ...]  # the same count of each pool run (noise runs only for changes)
    exact_p: float  # the permutation test within items (no spread between runs)
    spread_p: float  # the prediction test with the pool's spread (measured or assumed)
    min_p: float  # the smallest p-value the exact test could give with these item totals
    spread_measured: bool  # three or more pool runs: the spread is measured, not assumed
    figures: tuple[float, ...] = ()  # the pool runs' figures the spread part compares with
    exchanged: int = 2  # the candidate and the runs it is exchanged with, item by item

    @property
    def p_value(self) -> float:
        return max(self.exact_p, self.spread_p)


def _convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The pmf of a sum from two pmfs: direct for small ones, numpy's FFT for large ones."""
    if a.size * b.size <= 1 << 16:
        return np.convolve(a, b)
    size = a.size + b.size - 1
    return np.fft.irfft(np.fft.rfft(a, size) * np.fft.rfft(b, size), size)


def poisson_binomial_sf(x: int, counts: Sequence[int], m: int, sure: int = 0) -> float:
    """P(X >= x) for X = sure + sum_j Binomial(counts[j - 1], j / m), j = 1 .. m - 1: the
    probabilities take m - 1 values, so the pmf is a few binomials convolved (scipy's
    poisson_binom is quadratic in the items)."""
    from scipy.stats import binom

    need = x - sure
    if need <= 0:
        return 1.0
    pmf = np.ones(1)
    for j, n in enumerate(counts, start=1):
        if n:
            pmf = _convolve(pmf, binom.pmf(np.arange(n + 1), n, j / m))
    pmf = np.clip(pmf, 0.0, None)
    return float(min(1.0, pmf[need:].sum())) if need < pmf.size else 0.0


def exact_p(candidate: np.ndarray, others: np.ndarray) -> tuple[float, float]:
    """(p, smallest attainable p) of the candidate's flags against the other runs' flags
    (runs x items), conditional on each item's number of flags."""
    m = others.shape[0] + 1
    totals = others.sum(axis=0) + candidate
    per_level = np.bincount(totals, minlength=m + 1)
    sure = int(per_level[m])
    counts = [int(c) for c in per_level[1:m]]
    attainable = sure + sum(counts)
    x = int(candidate.sum())
    smallest = math.prod((j / m) ** c for j, c in enumerate(counts, start=1))
    return poisson_binomial_sf(x, counts, m, sure), (smallest if attainable else 1.0)


def logit_share(y: float, n: int) -> float:
    return math.log((y + 0.5) / (n - y + 0.5))


def counting_variance(mean: float, n: int) -> float:
    """The variance of logit_share(X, n) for X ~ Binomial(n, mean / n): what a run's figure
    varies by from counting alone at the pool's rate (0 at a rate of 0)."""
    from scipy.stats import binom

    p = min(max(mean / n, 0.0), 1.0) if n else 0.0
    low, high = (int(binom.ppf(1e-9, n, p)), int(binom.isf(1e-9, n, p))) if 0 < p < 1 \
        else (round(p * n), round(p * n))
    support = np.arange(low, high + 1)
    weights = binom.pmf(support, n, p) if 0 < p < 1 else np.ones(1)
    values = np.log((support + 0.5) / (n - support + 0.5))
    centre = float(np.sum(weights * values) / weights.sum())
    return float(np.sum(weights * (values - centre) ** 2) / weights.sum())


def prediction_p(candidate: float, pool: Sequence[float], floor: float) -> tuple[float, bool]:
    """(one-sided p, whether the spread was measured) of one more run's figure among the
    pool's, all on a scale where the spread between restarts is additive; `floor`: the
    variance one run's figure has from sampling alone.

    Measured (three or more pool runs): Student's t with m - 1 degrees of freedom on the
    pool's own variance, exact for normal figures whatever the restarts' spread; a pool whose
    figures are all equal (at small counts, often) leaves it to the exact part. Assumed (one or
    two pool runs): a normal reference with ASSUMED_SPREAD on top of the sampling variance."""
    from scipy.stats import norm, t

    ys = np.asarray(pool, dtype=float)
    m, gap = len(ys), candidate - float(ys.mean())
    if m >= 3:
        variance = float(ys.var(ddof=1)) * (1 + 1 / m)
        if variance == 0:
            return 0.0, True
        return float(t.sf(gap / math.sqrt(variance), df=m - 1)), True
    variance = (ASSUMED_SPREAD ** 2 + floor) * (1 + 1 / m)
    return float(norm.sf(gap / math.sqrt(variance))), False


def spread_p(candidate: float, pool: Sequence[float], n: int) -> tuple[float, bool]:
    """(one-sided p, whether the spread was measured) of one more run's count of n items, on
    the logit scale with the counting variance at the pool's rate as the floor."""
    clipped = [min(max(q, 0.0), float(n)) for q in pool]
    cand = min(max(candidate, 0.0), float(n))
    if cand <= max(clipped) + 1e-9:
        return 1.0, len(pool) >= 3
    return prediction_p(logit_share(cand, n), [logit_share(q, n) for q in clipped],
                        counting_variance(float(np.mean(clipped)), n))


def own_count_test(candidate: np.ndarray, pool: np.ndarray) -> CountTest:
    """A count each run has on its own (answers cut short, empty answers): the candidate's
    flags (items) against the pool's (runs x items, the baseline first)."""
    p, smallest = exact_p(candidate, pool)
    counts = tuple(int(c) for c in pool.sum(axis=1))
    x = int(candidate.sum())
    spread, measured = spread_p(x, counts, candidate.size)
    return CountTest(candidate.size, x, counts, p, spread, smallest, measured,
                     tuple(map(float, counts)), pool.shape[0] + 1)


def run_effects(among: np.ndarray) -> np.ndarray:
    """Each run's own share q_a of the pairwise counts c_ab = q_a + q_b of M >= 3 runs (a
    symmetric matrix, the diagonal ignored), by least squares."""
    m = among.shape[0]
    sums = among.sum(axis=1) - np.diag(among)
    return (sums - sums.sum() / 2 / (m - 1)) / (m - 2)


def changed_test(answers: Sequence[Sequence[object]]) -> CountTest:
    """Changed answers: `answers` holds the baseline's, each noise run's and last the
    candidate's answers to the same items; an answer None (no text) differs from every
    other. The candidate's changes from the baseline against the noise runs'."""
    coded = _codes(answers)
    differs = coded[1:] != coded[0]
    p, smallest = exact_p(differs[-1], differs[:-1])
    runs = coded.shape[0]
    among = np.array([[int((coded[a] != coded[b]).sum()) for b in range(runs)]
                      for a in range(runs)])
    own = run_effects(among)
    spread, measured = spread_p(float(own[-1]), [float(q) for q in own[:-1]], coded.shape[1])
    counts = tuple(int(c) for c in differs[:-1].sum(axis=1))
    return CountTest(coded.shape[1], int(differs[-1].sum()), counts, p, spread, smallest,
                     measured, tuple(float(q) for q in own[:-1]), differs.shape[0])


def _codes(answers: Sequence[Sequence[object]]) -> np.ndarray:
    """Runs x items of integer codes: equal codes for equal answers of an item; None gets a
    code of its own in every run."""
    ids: dict[object, int] = {}
    rows = []
    for r, run in enumerate(answers):
        rows.append([-(r + 1) if a is None else ids.setdefault(a, len(ids)) for a in run])
    return np.array(rows, dtype=np.int64).reshape(len(answers), -1)
