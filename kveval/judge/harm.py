"""What a changed answer costs: the net share of departures from an item's usual answer that
turn a right answer wrong, from the runs of the baseline's setup.

Where a strict majority of the runs agree on an item's answer, that answer is the usual one
and every other run's answer a departure; a departure's cost is the usual answer's score
less its own (1: right to wrong, -1: wrong to right, 0: no change in score). On an accurate
model departures cost more than they give back (an answer cut short is always wrong); on a
model whose changed answers are right as often as before they cost nothing. The estimate,
with two standard errors on top (a bound, not a guess), scales how far a restart's accuracy
can move with how many answers it changes (judge/floor.py accuracy_test). Without a majority
to tell the usual answer (two runs), the share of changed answers whose score changed at all
bounds it.
"""

from __future__ import annotations

import math

import numpy as np

MARGIN_SE = 2.0  # standard errors added to the estimate


def usual_answer(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per item, the code a strict majority of the runs hold (-1: none), and which run
    holds it first."""
    runs = codes.shape[0]
    usual = np.full(codes.shape[1], -1)
    holder = np.zeros(codes.shape[1], dtype=int)
    for r in range(runs):
        agree = (codes == codes[r]).sum(axis=0)
        found = (usual < 0) & (2 * agree > runs)
        usual[found], holder[found] = codes[r, found], r
    return usual, holder


def departure_cost(codes: np.ndarray, wrong: np.ndarray) -> float:
    """The bound on a departure's net cost in (0, 1]; `codes` and `wrong` are runs x items
    of the runs it is read from."""
    runs = codes.shape[0]
    if runs < 3:
        changed = codes[0] != codes[-1]
        flipped = changed & (wrong[0] != wrong[-1])
        return bounded_cost(float(flipped.sum()), int(changed.sum()), 1.0)
    usual, holder = usual_answer(codes)
    known = usual >= 0
    usual_wrong = wrong[holder, np.arange(codes.shape[1])]
    away = known[None, :] & (codes != usual[None, :])
    cost = (wrong.astype(int) - usual_wrong.astype(int)[None, :])[away]
    return bounded_cost(float(cost.sum()), int(away.sum()), float(np.mean(cost ** 2)) if cost.size
                       else 1.0)


def bounded_cost(total: float, count: int, second_moment: float = 1.0) -> float:
    """The net cost `total` / `count` with MARGIN_SE standard errors on top, in [0.05, 1]
    (1 where nothing changed)."""
    if count == 0:
        return 1.0
    mean = total / count
    se = math.sqrt(max(second_moment - mean * mean, 0.05) / count)
    return min(1.0, max(mean + MARGIN_SE * se, 0.05))
