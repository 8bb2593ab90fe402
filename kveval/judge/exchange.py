"""The exact law of a net count drawn by exchange: n answers drawn without replacement from
a pool of `total` holding `losses` that count +1 and `gains` that count -1 (the rest 0), the
law of their sum (a multivariate hypergeometric, summed), and its upper tail averaged over a
normal shift of the drawn answers' rate (judge/novel.py: restarts whose cost rates differ).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

NODES = 24  # Gauss-Hermite nodes for the shift: exact for a polynomial tail to degree 47


@lru_cache(maxsize=1)
def _nodes() -> tuple[np.ndarray, np.ndarray]:
    from numpy.polynomial.hermite_e import hermegauss

    x, w = hermegauss(NODES)
    return x, w / w.sum()


def net_pmf(n: int, losses: int, gains: int, total: int) -> np.ndarray:
    """P(sum = s) at index s + n, s = -n .. n: losses drawn less gains drawn."""
    from scipy.stats import hypergeom

    drawn_l = np.arange(min(n, losses) + 1)
    drawn_g = np.arange(min(n, gains) + 1)
    first = hypergeom.pmf(drawn_l, total, losses, n)
    ell, g = np.meshgrid(drawn_l, drawn_g, indexing="ij")
    rest = total - losses
    if rest:
        second = np.nan_to_num(hypergeom.pmf(g, rest, gains, n - ell))
    else:  # every answer is a loss: the draw takes no gain
        second = (g == 0).astype(float)
    joint = first[:, None] * second
    return np.bincount((ell - g).ravel() + n, weights=joint.ravel(), minlength=2 * n + 1)


def shifted_tail(pmf: np.ndarray, n: int, observed: float, shift_sd: float) -> float:
    """P(sum + shift >= observed), the shift normal with sd `shift_sd` (in the sum's unit):
    the exchange's tail averaged over the shift."""
    tail = np.cumsum(pmf[::-1])[::-1]  # tail[i] = P(sum >= i - n)
    x, w = _nodes()
    bars = np.ceil(observed - x * shift_sd - 1e-9).astype(np.int64) + n
    at = np.where(bars <= 0, 1.0, np.where(bars > 2 * n, 0.0, tail[np.clip(bars, 0, 2 * n)]))
    return float(min(1.0, (w * at).sum()))


def smallest_reaching(pmf: np.ndarray, n: int, shift_sd: float, level: float) -> int | None:
    """The smallest net count whose shifted tail is below `level`; None if none is."""
    low, high = -n, n + 1 + int(np.ceil(8 * shift_sd))
    if shifted_tail(pmf, n, high, shift_sd) >= level:
        return None
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if shifted_tail(pmf, n, mid, shift_sd) < level else (mid + 1, high)
    return low
