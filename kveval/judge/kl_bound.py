"""A lower bound of the full-vocabulary KL(baseline || other) from what a position records.

What is known. Each side records its top-K outcomes (token texts) with their exact
probabilities: the baseline's set A (probabilities p_a), the other's set B (q_b). Every
outcome a side did not list has at most that side's smallest listed probability (its K-th):
p_x <= p_K for x not in A, q_x <= q_K for x not in B. Where both records give the baseline's
token t a probability (its `logprobs` entry: a teacher-forced pass holds it on both sides, a
free-running one while the tokens agree; or a listed value), both p_t and q_t are exact too.
The argument assumes what a top-K of token ids gives: each listed value is its outcome's
probability and nothing unlisted is more probable than the last listed (run/logprobs.py
`outcomes` sums two ids of one text; a text whose ids straddle the list's edge, which
bench/topk_capture.py counts, is the exception).

The bound. Let S be the outcomes exact on both sides (A and B's shared tokens, and t). Two
coarse-grainings of the vocabulary are judged, and the larger is reported:

1. The baseline's side: each outcome of S, each outcome a of U = A - S, and one outcome R for
   the rest. Every mass is exact but the other's q_a (a in U): each lies in [0, q_K], their
   sum X is at most 1 - q(S) and fixes q(R) = 1 - q(S) - X. p(R) = 1 - p(S) - p(U) is exact.
2. The other's side, the mirror: S, each outcome b of W = B - S with p_b in [0, p_K] unknown
   and q_b exact, and the rest R' with p(R') = 1 - p(S) - sum p_b and q(R') exact.

By the data-processing inequality the KL of a coarse-graining is at most the full KL. The true
values of the unknowns lie in the box, so the least coarse-grained KL over the box is at most
the true pair's coarse-grained KL, hence at most the full KL, whatever the unknowns are. The
least is exact, not searched: the KL is convex in the unknowns, and its KKT point in the box
is a water-filling, x_a = min(q_K, lam * p_a) with lam * p(R) = q(R) (for 1), and
p_b = min(p_K, mu * q_b) with mu * q(R') = p(R') (for 2); `_level` finds lam and mu. Each
floor below (TINY on the second argument of a KL term) only lowers a term, so keeps the bound.

Where A = B the two reduce to one: the shared tokens plus "any other token", exact on both
sides (the bound this one replaces, and never falls below: 1 refines its partition). Where
the sets are disjoint the bound does not vanish: the baseline's listed mass must sit on
tokens the other gives at most q_K each (and the other's on tokens the baseline gives at
most p_K). It is 0 only where both coarse-grainings can agree, and never above the true KL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.special import rel_entr

TINY = 1e-12  # the least probability a KL term's second argument is taken as


def _level(weights: Sequence[float], cap: float, mass: float, rest: float) -> float:
    """The lam >= 0 where lam * rest + sum(min(cap, lam * w)) first reaches mass (the least
    lam putting every weight at its cap where it never does)."""
    ws = sorted((w for w in weights if w > 0), reverse=True)
    capped = 0.0
    for j in range(len(ws) + 1):
        free = rest + sum(ws[j:])
        if free <= 0:
            return cap / ws[-1] if ws else 0.0
        lam = max(mass - capped, 0.0) / free
        if j == len(ws) or lam * ws[j] <= cap:
            return lam
        capped += cap
    raise AssertionError("unreachable")  # pragma: no cover


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    return float(rel_entr(p, np.maximum(q, TINY)).sum())


def _baseline_side(p_u: np.ndarray, q_cap: float, p_rest: float, q_free: float) -> float:
    """Coarse-graining 1 beyond S: the least over q_a in [0, q_cap] of the KL of U and R,
    with q(R) = q_free - sum(q_a)."""
    lam = _level(p_u.tolist(), q_cap, q_free, p_rest)
    x = np.minimum(q_cap, lam * p_u)
    return _kl(p_u, x) + _kl(np.array([p_rest]), np.array([q_free - x.sum()]))


def _other_side(q_w: np.ndarray, p_cap: float, q_rest: float, p_free: float) -> float:
    """Coarse-graining 2 beyond S: the least over p_b in [0, p_cap] of the KL of W and R',
    with p(R') = p_free - sum(p_b)."""
    mu = _level(q_w.tolist(), p_cap, p_free, q_rest)
    y = np.minimum(p_cap, mu * q_w)
    return _kl(y, q_w) + _kl(np.array([max(p_free - y.sum(), 0.0)]), np.array([q_rest]))


def kl_topk(p: Mapping[str, float], q: Mapping[str, float],
            token: tuple[str, float, float] | None = None) -> float:
    """A lower bound of KL(p || q) from each side's top-K {token: probability}; token:
    (text, p_t, q_t), the baseline token's exact probability on both sides, where known."""
    p_cap, q_cap = min(p.values(), default=1.0), min(q.values(), default=1.0)
    both = {t: (p[t], q[t]) for t in p if t in q}
    if token is not None:
        both[token[0]] = token[1:]
    p_s = np.array([a for a, _ in both.values()])
    q_s = np.array([b for _, b in both.values()])
    p_u = np.array([v for t, v in p.items() if t not in both])
    q_w = np.array([v for t, v in q.items() if t not in both])
    p_free, q_free = max(1.0 - p_s.sum(), 0.0), max(1.0 - q_s.sum(), 0.0)
    side = max(_baseline_side(p_u, q_cap, max(p_free - p_u.sum(), 0.0), q_free),
               _other_side(q_w, p_cap, max(q_free - q_w.sum(), 0.0), p_free))
    return max(_kl(p_s, q_s) + side, 0.0)
