"""The drift bench's within-items reference (bench/drift_reference.py) is the exact
permutation distribution it claims: against brute force over every assignment of the
candidate to one of the runs, item by item."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from drift_reference import disagreements, excess, within_items_p  # noqa: E402


def brute_force_p(codes: np.ndarray) -> float:
    """The share of the M ** n per-item assignments whose disagreements reach the
    candidate's own."""
    d = disagreements(codes)
    own = int(d[-1].sum())
    runs = range(codes.shape[0])
    hits = [sum(int(d[r, i]) for i, r in enumerate(pick)) >= own
            for pick in itertools.product(runs, repeat=codes.shape[1])]
    return float(np.mean(hits))


@given(st.integers(3, 4), st.integers(1, 5), st.integers(0, 99))
@settings(max_examples=40, deadline=None)
def test_the_within_items_p_is_the_exact_permutation_tail(runs, items, seed):
    codes = np.random.default_rng(seed).integers(0, 3, (runs, items))
    codes[-1, 0] = 7  # the candidate's own answer somewhere: never a copy of a run
    assert abs(within_items_p(codes) - brute_force_p(codes)) < 1e-12


def test_a_copy_of_a_pool_run_never_fails_and_a_stable_change_weighs_most():
    pool = np.zeros((3, 10), int)
    pool[1, :2] = [1, 2]  # a restart that moved two items
    assert within_items_p(np.vstack([pool, pool[1]])) == 1.0
    stable = np.vstack([pool, np.r_[np.zeros(9, int), 5]])  # moves an item no run moved
    fragile = np.vstack([pool, np.r_[5, np.zeros(9, int)]])  # moves the item a run moved
    calm = excess(np.vstack([pool, pool[0]]))
    # moving an item every other run answers alike adds (M - 1)(M - 2) / M = 1.5; moving
    # the one a restart already moved (to a third answer) adds 1
    assert (excess(stable) - calm, excess(fragile) - calm) == (1.5, 1.0)
