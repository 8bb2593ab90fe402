"""The noise floor with its own spread: is the candidate's count of changed (or collapsed)
answers beyond what restarts of the baseline's setup produce?

With two or more noise runs, each gives a count x_i of answers (out of n paired items) that
differ from the baseline's. Given the baseline, a candidate that is just another restart gives
a count exchangeable with them. On the logit scale, y = log((x + 1/2) / (n - x + 1/2)), the
candidate's y_c is tested against a one-sided normal prediction interval for one future
observation (Hahn & Meeker 1991, "Statistical Intervals", section 4.7; also Meeker, Hahn &
Escobar 2017, 2nd ed., section 4.7):

    T = (y_c - mean(y)) / (s * sqrt(1 + 1/k)),   p = P(t_{k-1} >= T)

with k noise runs and s their standard deviation. s covers both the binomial noise of each
count and the run-to-run spread of the change rate. With few runs s can come out near zero by
chance (or exactly zero when every count is 0), so s^2 is floored at the binomial variance of
the logit, mean(1 / (x + 1/2) + 1 / (n - x + 1/2)): the interval is never narrower than the
counts' own sampling noise. alpha is one-sided 0.05; across tasks the p-values are
Holm-adjusted (Holm 1979, Scand. J. Statist. 6, 65-70). bench/gate_simulation.py measures the
A/A false alarms and the power of this test.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

ALPHA = 0.05  # one-sided


@dataclass(frozen=True)
class SpreadTest:
    """A candidate count against the counts of k >= 2 noise runs, on n items."""

    items: int
    candidate: int  # the candidate's count (e.g. answers changed from the baseline's)
    noise: tuple[int, ...]  # each noise run's count on the same items
    limit: float  # the one-sided 95% prediction limit for a count, in answers
    p_value: float  # one-sided, before any adjustment across tasks
    adjusted_p: float  # Holm-adjusted across tasks (equal to p_value until adjusted)

    @property
    def exceeds(self) -> bool:
        return self.adjusted_p < ALPHA


def _logit(x: int, n: int) -> float:
    return math.log((x + 0.5) / (n - x + 0.5))


def _binomial_variance(x: int, n: int) -> float:
    return 1 / (x + 0.5) + 1 / (n - x + 0.5)


def _from_logit(y: float, n: int) -> float:
    """The count whose logit is y (the inverse of `_logit`)."""
    odds = math.exp(y)
    return (odds * (n + 0.5) - 0.5) / (1 + odds) if odds < 1e300 else float(n)


def _sampling_floor(noise: Sequence[int], between: Sequence[int], n: int) -> float:
    """The least variance a count's logit can have from sampling alone. Given the baseline, a
    noise run's count is the baseline's own departures (fixed) plus the run's new ones, about
    half of what two noise runs change against each other: a Poisson count of mean m moves
    the logit by about sqrt(m) / (x (1 - x / n)). Without counts between noise runs, the
    binomial variance of the whole count (larger, so conservative)."""
    mean = statistics.fmean(noise)
    if not between:
        return statistics.fmean(_binomial_variance(x, n) for x in noise)
    fresh = statistics.fmean(between) / 2
    return (fresh + 0.5) / ((mean + 0.5) * (1 - mean / (n + 1))) ** 2


def spread_test(candidate: int, noise: Sequence[int], n: int,
                between: Sequence[int] = ()) -> SpreadTest:
    """Test the candidate count against a prediction interval from the noise runs' counts
    (`between`: the noise runs' counts against each other, for the sampling floor)."""
    if len(noise) < 2:
        raise ValueError("the spread of the noise floor needs at least two noise runs")
    from scipy.stats import t as student

    ys = [_logit(x, n) for x in noise]
    k = len(ys)
    floor = _sampling_floor(noise, between, n)
    scale = math.sqrt(max(statistics.variance(ys), floor) * (1 + 1 / k))
    statistic = (_logit(candidate, n) - statistics.fmean(ys)) / scale
    p_value = float(student.sf(statistic, df=k - 1))
    limit = _from_logit(statistics.fmean(ys) + float(student.ppf(1 - ALPHA, df=k - 1)) * scale, n)
    return SpreadTest(n, candidate, tuple(noise), min(float(n), limit), p_value, p_value)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given (scipy has no Holm)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [1.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
