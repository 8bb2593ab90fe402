"""The numbers behind length curves, as pure functions of scores (no kveval imports).

Interval of a mean score (Wilson for 0/1 scores, else Student's t clipped to 0..1), the AUC
over log2(length) normalized by its span, effective length against a threshold, the sign
test across buckets (scipy's exact binomial test) and the AUC recovery's paired,
bucket-stratified bootstrap (numpy, seeded).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

BOOTSTRAP_ROUNDS = 2000
BOOTSTRAP_SEED = 0


@dataclass(frozen=True)
class Recovery:
    value: float | None  # candidate AUC / baseline AUC on the paired items
    low: float | None
    high: float | None


@dataclass(frozen=True)
class SignTest:
    lower: int  # buckets where the candidate's paired mean is below the baseline's
    higher: int
    ties: int
    p: float | None  # one-sided exact binomial; None without an untied bucket

    @property
    def buckets(self) -> int:
        return self.lower + self.higher


def interval(values: Sequence[float]) -> tuple[float | None, float | None]:
    """95% interval of a mean score: Wilson for 0/1 scores, else Student's t in 0..1."""
    import numpy as np
    from scipy import stats

    n = len(values)
    if n == 0:
        return None, None
    if all(v in (0.0, 1.0) for v in values):
        ci = stats.binomtest(int(sum(values)), n).proportion_ci(method="wilson")
        return float(ci.low), float(ci.high)
    if n == 1:
        return None, None
    data = np.asarray(values, dtype=float)
    sem = float(stats.sem(data))
    if sem == 0.0:
        return float(data.mean()), float(data.mean())
    low, high = stats.t.interval(0.95, n - 1, loc=float(data.mean()), scale=sem)
    return max(0.0, float(low)), min(1.0, float(high))


def auc_weights(lengths: Sequence[int]) -> list[float]:
    """Weights w with AUC = sum(w * means): trapezoids over log2(length), normalized."""
    import numpy as np

    if len(lengths) == 1:
        return [1.0]
    x = np.log2(np.asarray(lengths, dtype=float))
    weights = np.trapezoid(np.eye(len(lengths)), x, axis=0) / (x[-1] - x[0])
    return [float(w) for w in weights]


def auc(lengths: Sequence[int], means: Sequence[float]) -> float | None:
    """The normalized area under the curve over log-length; None without buckets."""
    if not lengths:
        return None
    return sum(w * m for w, m in zip(auc_weights(lengths), means, strict=True))


def effective_length(lengths: Sequence[int], means: Sequence[float], fraction: float,
                     ) -> tuple[float | None, int | None]:
    """(threshold, the longest length up to which every mean stays at or above it); the
    threshold is `fraction` of the shortest length's mean."""
    if not means or not means[0]:
        return None, None
    threshold = fraction * means[0]
    longest = None
    for length, mean in zip(lengths, means, strict=True):
        if mean < threshold - 1e-12:
            break
        longest = length
    return threshold, longest


def sign_test(differences: Sequence[float | None]) -> SignTest:
    from scipy.stats import binomtest

    known = [d for d in differences if d is not None]
    lower = sum(d < 0 for d in known)
    higher = sum(d > 0 for d in known)
    n = lower + higher
    p = float(binomtest(lower, n, 0.5, alternative="greater").pvalue) if n else None
    return SignTest(lower, higher, len(known) - n, p)


def bootstrap_recovery(candidate: Sequence[Sequence[float]], baseline: Sequence[Sequence[float]],
                       lengths: Sequence[int], rounds: int = BOOTSTRAP_ROUNDS,
                       seed: int = BOOTSTRAP_SEED) -> Recovery:
    """AUC recovery on paired scores per bucket, with a paired, bucket-stratified bootstrap
    percentile 95% interval (the same resampled items in both runs)."""
    import numpy as np

    base_auc = auc(lengths, [float(np.mean(b)) for b in baseline])
    cand_auc = auc(lengths, [float(np.mean(c)) for c in candidate])
    if base_auc is None or cand_auc is None or base_auc == 0:
        return Recovery(None, None, None)
    rng = np.random.default_rng(seed)
    totals = np.zeros((2, rounds))
    for weight, cand, base in zip(auc_weights(lengths), candidate, baseline, strict=True):
        picks = rng.integers(0, len(cand), size=(rounds, len(cand)))
        totals[0] += weight * np.asarray(cand)[picks].mean(axis=1)
        totals[1] += weight * np.asarray(base)[picks].mean(axis=1)
    usable = totals[1] > 0
    ratios = totals[0][usable] / totals[1][usable]
    if ratios.size == 0:
        return Recovery(cand_auc / base_auc, None, None)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return Recovery(cand_auc / base_auc, float(low), float(high))
