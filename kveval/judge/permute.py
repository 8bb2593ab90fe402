"""A permutation test within items: is one run's mean value larger than the others', beyond
what exchanging the runs item by item gives?

Under the null hypothesis the runs are exchangeable on each item (the candidate is one more
run of the baseline's setup), so each item's values are shuffled among the runs on their own.
scipy's `permutation_test` (permutation_type "samples") does the work: exactly while the
permutations number at most RESAMPLES, else by RESAMPLES random ones (seeded). Past
LARGE_ITEMS items the permutation distribution of the sum is taken as normal with its exact
mean (0) and variance, which at that size matches it well and costs one pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

RESAMPLES = 9_999
SEED = 0
LARGE_ITEMS = 200


def _statistic(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
    first = samples[0].mean(axis=axis)
    rest = np.mean([s.mean(axis=axis) for s in samples[1:]], axis=0)
    return first - rest


def _smallest(values: np.ndarray) -> float:
    """The smallest p-value an exact test could give: every varying item's largest value in
    the first run."""
    varying = int(np.sum(values.max(axis=0) > values.min(axis=0)))
    return (1 / values.shape[0]) ** varying


def _normal(values: np.ndarray) -> float:
    from scipy.stats import norm

    k = values.shape[0] - 1
    sums = values.sum(axis=0)
    observed = float(np.sum(values[0] - (sums - values[0]) / k))
    variance = float(np.sum(((k + 1) / k) ** 2 * values.var(axis=0)))
    return 1.0 if variance == 0 else float(norm.sf(observed / math.sqrt(variance)))


def exchange_p(first: Sequence[float], others: Sequence[Sequence[float]]) -> tuple[float, float]:
    """(one-sided p, smallest attainable p) of "the first run's mean is larger than the other
    runs' mean", the runs holding values of the same items in the same order."""
    values = np.array([first, *others], dtype=float)
    if values.shape[1] == 0 or not np.any(values.max(axis=0) > values.min(axis=0)):
        return 1.0, 1.0
    smallest = _smallest(values)
    if values.shape[1] == 1:  # one item: the first run's rank among the runs
        column = values[:, 0]
        return float(np.mean(column >= column[0])), smallest
    if values.shape[1] > LARGE_ITEMS:
        return _normal(values), smallest
    from scipy.stats import permutation_test

    result = permutation_test(tuple(values), _statistic, permutation_type="samples",
                              alternative="greater", n_resamples=RESAMPLES, vectorized=True,
                              rng=np.random.default_rng(SEED))
    exact = math.factorial(values.shape[0]) ** values.shape[1] <= RESAMPLES
    return float(result.pvalue), smallest if exact else max(smallest, 1 / (RESAMPLES + 1))
