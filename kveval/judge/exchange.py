"""The exact law of a net count drawn by exchange: n answers drawn without replacement from
a pool of `total` holding `losses` that count +1 and `gains` that count -1 (the rest 0), the
law of their sum (a multivariate hypergeometric, summed), and its upper tail with a normal
shift of the drawn answers' rate added (judge/novel.py: restarts whose cost rates differ).
"""

from __future__ import annotations

import numpy as np

from kveval.judge.power import smallest_size


def _log_choose(n: np.ndarray | int, k: np.ndarray) -> np.ndarray:
    from scipy.special import gammaln

    return gammaln(np.asarray(n) + 1) - gammaln(k + 1) - gammaln(np.asarray(n) - k + 1)


def _hypergeom(drawn: np.ndarray, total: int, marked: np.ndarray | int,
               n: np.ndarray | int) -> np.ndarray:
    """P(drawn of the n taken are marked), `marked` of `total` marked; 0 where impossible."""
    drawn, marked, n = np.broadcast_arrays(drawn, marked, n)
    possible = (drawn <= marked) & (n - drawn <= total - marked) & (drawn <= n) & (drawn >= 0)
    log = (_log_choose(marked, np.where(possible, drawn, 0))
           + _log_choose(total - marked, np.where(possible, n - drawn, 0))
           - _log_choose(total, np.where(possible, n, 0)))
    return np.where(possible, np.exp(log), 0.0)


def net_pmf(n: int, losses: int, gains: int, total: int) -> np.ndarray:
    """P(sum = s) at index s + n, s = -n .. n: losses drawn less gains drawn."""
    if not 0 <= n <= total or losses < 0 or gains < 0 or losses + gains > total:
        raise ValueError(f"no draw of {n} from {total} holding {losses} + {gains}")
    drawn_l = np.arange(min(n, losses) + 1)
    drawn_g = np.arange(min(n, gains) + 1)
    first = _hypergeom(drawn_l, total, losses, n)
    ell, g = np.meshgrid(drawn_l, drawn_g, indexing="ij")
    joint = first[:, None] * _hypergeom(g, total - losses, gains, n - ell)
    return np.bincount((ell - g).ravel() + n, weights=joint.ravel(), minlength=2 * n + 1)


def shifted_tail(pmf: np.ndarray, n: int, observed: float, shift_sd: float) -> float:
    """P(sum + shift >= observed), the shift normal with sd `shift_sd` (in the sum's unit),
    summed exactly over the sum's law."""
    sums = np.arange(-n, n + 1)
    if shift_sd <= 0:
        return float(min(1.0, pmf[sums >= observed - 1e-9].sum()))
    from scipy.stats import norm

    return float(min(1.0, (pmf * norm.sf((observed - sums) / shift_sd)).sum()))


def least_shown(pmf: np.ndarray, n: int, shift_sd: float, level: float) -> int | None:
    """The smallest net count whose shifted tail is below `level`; None if none is."""
    offset = n + 1  # net counts from -n, as the sizes from 1 smallest_size searches
    found = smallest_size(lambda k: shifted_tail(pmf, n, k - offset, shift_sd) >= level, 1,
                          2 * n + 2 + int(np.ceil(8 * shift_sd)))
    return None if found is None else found - offset
