"""The exact law of a net count drawn by exchange (judge/exchange.py), checked against every
draw of small pools."""

from __future__ import annotations

from itertools import combinations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kveval.judge.exchange import least_shown, net_pmf, shifted_tail


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from([-1, 0, 1]), min_size=1, max_size=11), st.data())
def test_the_law_is_every_draw_counted(pool, data):
    n = data.draw(st.integers(1, len(pool)))
    pmf = net_pmf(n, pool.count(1), pool.count(-1), len(pool))
    sums = [sum(c) for c in combinations(pool, n)]
    for s in range(-n, n + 1):
        assert abs(pmf[s + n] - sums.count(s) / len(sums)) < 1e-9
    observed = data.draw(st.integers(-n, n))
    exact = sum(x >= observed for x in sums) / len(sums)
    assert abs(shifted_tail(pmf, n, observed, 0.0) - exact) < 1e-9


def test_a_shift_widens_the_tail_and_the_bar_agrees_with_it():
    pmf = net_pmf(30, 20, 5, 60)
    assert shifted_tail(pmf, 30, 18, 2.0) > shifted_tail(pmf, 30, 18, 0.0)
    bar = least_shown(pmf, 30, 2.0, 0.01)
    assert bar is not None
    assert shifted_tail(pmf, 30, bar, 2.0) < 0.01 <= shifted_tail(pmf, 30, bar - 1, 2.0)


def test_every_answer_a_loss_leaves_nothing_to_see():
    pmf = net_pmf(7, 35, 0, 35)
    assert np.isclose(pmf.sum(), 1.0) and pmf[14] == 1.0
    assert shifted_tail(pmf, 7, 7, 0.0) == 1.0
