"""The noise floor with its own spread: does the candidate depart from the baseline's answers
(or collapse) more than reruns of the baseline's setup do?

Each run r of a setup departs from the setup's usual answers on q_r items, and q_r itself
varies from restart to restart (batches, cache state). Two runs a and b then differ on about
c_ab = q_a + q_b items. The baseline and k >= 2 noise runs are m = k + 1 runs of one setup
whose m (m - 1) / 2 pairwise counts give each run's own q by least squares (the additive
model of a complete round-robin design: q_a = (S_a - T / (m - 1)) / (m - 2), with S_a the sum
of a's counts and T the sum of all). The candidate's own q_c is the mean of c_rc - q_r over
the m runs. On the scale y = log(q + 1), q_c is tested against a one-sided normal prediction
interval for one more run (Hahn & Meeker 1991, "Statistical Intervals", section 4.7):

    T = (y_c - mean(y)) / (s * sqrt(1 + 1/m)),   p = P(t_{m-1} >= T)

with s the standard deviation of the m runs' y, which holds both the counting noise and the
run-to-run spread; s^2 is never taken below 1 / (mean(q) + 1), the variance of a Poisson
count's log, so that runs that all agree (s = 0) do not fail any change at all. A count each
run has on its own (answers cut short or empty) is tested the same way, the baseline and the
noise runs being the m runs. alpha is one-sided 0.05; across tasks the p-values are
Holm-adjusted (Holm 1979, Scand. J. Statist. 6, 65-70). bench/gate_simulation.py
(--spread-only) measures the A/A false alarms and the power.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

ALPHA = 0.05  # one-sided


@dataclass(frozen=True)
class SpreadTest:
    """A candidate against m >= 3 runs of the baseline's setup (the baseline and its noise
    runs), on the same items."""

    items: int
    candidate: int  # the candidate's count against the baseline (changed answers, collapsed)
    noise: tuple[int, ...]  # each noise run's count against the baseline, or its own count
    limit: float  # the one-sided 95% prediction limit for the candidate's count
    p_value: float  # one-sided, before any adjustment across tasks
    adjusted_p: float  # Holm-adjusted across tasks (equal to p_value until adjusted)

    @property
    def exceeds(self) -> bool:
        return self.adjusted_p < ALPHA


def _predict(candidate: float, runs: Sequence[float]) -> tuple[float, float]:
    """(one-sided p, prediction limit) of the candidate's own count among the runs' counts."""
    from scipy.stats import t as student

    ys = [math.log(max(q, 0.0) + 1) for q in runs]
    m, mean = len(ys), statistics.fmean(ys)
    floor = 1 / (max(statistics.fmean(runs), 0.0) + 1)
    scale = math.sqrt(max(statistics.variance(ys), floor) * (1 + 1 / m))
    y_c = math.log(max(candidate, 0.0) + 1)
    p_value = float(student.sf((y_c - mean) / scale, df=m - 1))
    limit = math.exp(mean + float(student.ppf(1 - ALPHA, df=m - 1)) * scale) - 1
    return p_value, limit


def run_effects(among: Sequence[Sequence[int]]) -> list[float]:
    """Each run's own count from the pairwise counts of m >= 3 runs (a symmetric matrix;
    the diagonal is ignored), by least squares on c_ab = q_a + q_b."""
    m = len(among)
    sums = [sum(row[b] for b in range(m) if b != a) for a, row in enumerate(among)]
    total = sum(sums) / 2
    return [(s - total / (m - 1)) / (m - 2) for s in sums]


def spread_test(to_candidate: Sequence[int], among: Sequence[Sequence[int]],
                n: int) -> SpreadTest:
    """The candidate's changed answers against the spread of the baseline's setup.

    `among`: the pairwise counts of changed answers of the m runs of the baseline's setup,
    the baseline first; `to_candidate`: the candidate's count against each of them, in the
    same order."""
    m = len(among)
    if m < 3 or len(to_candidate) != m:
        raise ValueError("the spread of the noise floor needs two noise runs or more")
    own = run_effects(among)
    candidate = statistics.fmean(c - q for c, q in zip(to_candidate, own, strict=True))
    p_value, limit = _predict(candidate, own)
    noise = tuple(among[0][b] for b in range(1, m))
    return SpreadTest(n, to_candidate[0], noise, min(float(n), own[0] + limit), p_value,
                      p_value)


def count_test(candidate: int, runs: Sequence[int], n: int) -> SpreadTest:
    """A count each run has on its own (e.g. answers cut short or empty) against the same
    count in m >= 3 runs of the baseline's setup, the baseline first."""
    if len(runs) < 3:
        raise ValueError("the spread of the noise floor needs two noise runs or more")
    p_value, limit = _predict(candidate, runs)
    return SpreadTest(n, candidate, tuple(runs[1:]), min(float(n), limit), p_value, p_value)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given (scipy has no Holm)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [1.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
