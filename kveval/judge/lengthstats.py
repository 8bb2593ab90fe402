"""The numbers behind length curves, as pure functions of scores.

Interval of a mean score (Wilson for 0/1 scores, else Student's t clipped to 0..1), the AUC
over log2(length) normalized by its span, effective length against a threshold, the paired
test of one bucket or of every bucket together (exact McNemar for 0/1 scores, a
permutation within items for graded ones) and the AUC recovery's paired, bucket-stratified
bootstrap (numpy, seeded) with the one-sided p-value of "the recovery is at least R": the
share of bootstrap recoveries at or above R, (1 + count) / (1 + rounds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

BOOTSTRAP_ROUNDS = 2000
BOOTSTRAP_SEED = 0


MIN_PER_LENGTH = 5  # paired items per length a recovery interval needs


@dataclass(frozen=True)
class Recovery:
    value: float | None  # candidate AUC / baseline AUC on the paired items
    low: float | None
    high: float | None
    minimum: float | None = None  # the R tested (gate --min-recovery)
    p_below: float | None = None  # one-sided p of "recovery >= minimum"
    rounds: int = BOOTSTRAP_ROUNDS


@dataclass(frozen=True)
class PairedScores:
    """A one-sided paired test of "the candidate scores lower": exact McNemar for 0/1
    scores, a permutation within items (judge/permute.py) for graded ones."""

    length: int | None  # the bucket; None for the test across every length
    pairs: int
    baseline_mean: float | None
    mean: float | None  # the candidate's
    lost: int  # pairs where the candidate scores lower
    gained: int
    p_value: float
    min_p: float
    binary: bool = True  # every score 0 or 1

    @property
    def difference(self) -> float | None:
        if self.mean is None or self.baseline_mean is None:
            return None
        return self.mean - self.baseline_mean


def paired_scores(length: int | None, baseline: Sequence[float],
                  candidate: Sequence[float]) -> PairedScores:
    """The test on one bucket's (or every bucket's) paired scores."""
    from kveval.judge.permute import exchange_p
    from kveval.judge.stats import mcnemar_greater

    lost = sum(b > c for b, c in zip(baseline, candidate, strict=True))
    gained = sum(c > b for b, c in zip(baseline, candidate, strict=True))
    binary = all(v in (0.0, 1.0) for v in (*baseline, *candidate))
    if binary:
        p, smallest = mcnemar_greater(lost, gained), 0.5 ** (lost + gained)
    else:
        p, smallest = exchange_p(baseline, [candidate])
    return PairedScores(length, len(baseline), _mean(baseline), _mean(candidate), lost,
                        gained, p, smallest, binary)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


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


def effective_absolute(lengths: Sequence[int], means: Sequence[float],
                       score: float) -> int | None:
    """RULER's effective length: the longest length up to which every mean is at least the
    absolute score (None when the shortest is below it)."""
    longest = None
    for length, mean in zip(lengths, means, strict=True):
        if mean < score - 1e-12:
            break
        longest = length
    return longest


def effective_interval(groups: Sequence[Sequence[float]], lengths: Sequence[int],
                       fraction: float | None, score: float | None,
                       rounds: int = BOOTSTRAP_ROUNDS, seed: int = BOOTSTRAP_SEED,
                       ) -> tuple[int | None, int | None]:
    """A bootstrap 95% interval of the effective length (relative to the shortest length's
    score when `fraction` is given, else absolute at `score`): items resampled within each
    length; None stands for "no length" and sorts below every length."""
    import numpy as np

    if not groups or any(len(g) == 0 for g in groups):
        return None, None
    rng = np.random.default_rng(seed)
    means = np.array([np.asarray(g, dtype=float)[rng.integers(0, len(g), size=(rounds, len(g)))]
                      .mean(axis=1) for g in groups])  # lengths x rounds
    bar = fraction * means[0] if fraction is not None else np.full(rounds, score or 0.0)
    below = means < bar - 1e-12
    reached = np.where(below.any(axis=0), below.argmax(axis=0), len(lengths)) - 1
    low, high = np.percentile(reached, [2.5, 97.5], method="nearest")
    return _length_at(lengths, int(low)), _length_at(lengths, int(high))


def _length_at(lengths: Sequence[int], index: int) -> int | None:
    return None if index < 0 else int(lengths[index])


def bootstrap_recovery(candidate: Sequence[Sequence[float]], baseline: Sequence[Sequence[float]],
                       lengths: Sequence[int], minimum: float | None = None,
                       rounds: int = BOOTSTRAP_ROUNDS, seed: int = BOOTSTRAP_SEED) -> Recovery:
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
    p = None if minimum is None else float((1 + np.sum(ratios >= minimum - 1e-12))
                                          / (1 + ratios.size))
    return Recovery(cand_auc / base_auc, float(low), float(high), minimum, p, int(ratios.size))
