"""The noise floor as a pool, and the family of checks: exact parts against brute force and
scipy, and the properties the gate promises (a copy of the baseline never fails; a noise run
that behaves like the others never hides a change)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kveval.judge.checks import Check, adjust, holm
from kveval.judge.floor import (
    ASSUMED_SPREAD,
    changed_test,
    counting_variance,
    exact_p,
    logit_share,
    own_count_test,
    poisson_binomial_sf,
    run_effects,
    spread_p,
)
from kveval.judge.stats import mcnemar_greater

FAST = settings(max_examples=60, deadline=None)


# ---------------------------------------------------------------- the exact part


def brute_force_sf(x: int, probabilities: list[float]) -> float:
    total = 0.0
    for flags in itertools.product((0, 1), repeat=len(probabilities)):
        if sum(flags) >= x:
            total += math.prod(p if f else 1 - p for f, p in zip(flags, probabilities, strict=True))
    return total


@given(st.lists(st.integers(0, 3), min_size=1, max_size=3), st.integers(2, 4),
       st.integers(0, 3), st.integers(0, 10))
@FAST
def test_poisson_binomial_tail_matches_brute_force(counts, m, sure, x):
    counts = counts[: m - 1]
    probabilities = [j / m for j, n in enumerate(counts, start=1) for _ in range(n)]
    expected = brute_force_sf(x - sure, probabilities) if x > sure else 1.0
    assert poisson_binomial_sf(x, counts, m, sure) == pytest.approx(expected, abs=1e-12)


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=60))
@FAST
def test_against_one_other_run_the_exact_part_is_one_sided_mcnemar(flags):
    cand = np.array([c for c, _ in flags])
    other = np.array([[o for _, o in flags]])
    p, smallest = exact_p(cand, other)
    only_c = sum(c and not o for c, o in flags)
    only_o = sum(o and not c for c, o in flags)
    assert p == pytest.approx(mcnemar_greater(only_c, only_o))
    assert smallest == pytest.approx(0.5 ** (only_c + only_o) if only_c + only_o else 1.0)


def test_run_effects_recover_each_runs_own_departures():
    def among(*own: int) -> np.ndarray:
        return np.array([[a + b if i != j else 0 for j, b in enumerate(own)]
                         for i, a in enumerate(own)])

    assert run_effects(among(10, 20, 30)) == pytest.approx([10, 20, 30])
    assert run_effects(among(5, 9, 12, 20)) == pytest.approx([5, 9, 12, 20])


# ---------------------------------------------------------------- the spread part


def test_measured_spread_is_the_prediction_interval_on_the_logit_scale():
    from scipy.stats import t

    pool, n = [10.0, 20.0, 30.0], 500
    ys = [logit_share(q, n) for q in pool]
    mean = sum(ys) / 3
    variance = sum((y - mean) ** 2 for y in ys) / 2
    expected = t.sf((logit_share(50, n) - mean) / math.sqrt(variance * (1 + 1 / 3)), df=2)
    p, measured = spread_p(50, pool, n)
    assert measured and p == pytest.approx(expected, rel=1e-9)


def test_assumed_spread_with_one_or_two_pool_runs():
    from scipy.stats import norm

    n, pool = 500, [20.0, 24.0]
    counting = counting_variance(22.0, n)
    gap = logit_share(40, n) - (logit_share(20, n) + logit_share(24, n)) / 2
    expected = norm.sf(gap / math.sqrt((ASSUMED_SPREAD ** 2 + counting) * 1.5))
    assert spread_p(40, pool, n) == (pytest.approx(expected), False)


def test_counting_variance_is_zero_at_a_rate_of_zero_and_binomial_above():
    assert counting_variance(0, 50) == 0.0
    assert counting_variance(100, 400) == pytest.approx(1 / 100 + 1 / 300, rel=0.05)


# ---------------------------------------------------------------- properties


def runs_departing(n: int, own: list[int], seed: int = 0) -> list[list[object]]:
    """Answers of runs each departing from the usual answer on its own `own[r]` items."""
    rng = np.random.default_rng(seed)
    runs = []
    for r, count in enumerate(own):
        chosen = set(rng.choice(n, size=count, replace=False).tolist()) if count else set()
        runs.append([f"{i} run {r}" if i in chosen else f"{i}" for i in range(n)])
    return runs


@given(st.integers(20, 120), st.lists(st.integers(0, 15), min_size=2, max_size=5),
       st.integers(0, 99))
@FAST
def test_a_copy_of_the_baseline_never_fails(n, own, seed):
    answers = runs_departing(n, own, seed)
    copy = changed_test([*answers, answers[0]])  # the candidate is the baseline, byte for byte
    assert copy.p_value == 1.0
    flags = np.array([[a != f"{i}" for i, a in enumerate(run)] for run in answers])
    assert own_count_test(flags[0], flags).p_value == 1.0


@pytest.mark.parametrize("noise_runs", [1, 2, 3])
def test_twenty_five_changed_of_fifty_is_shown_with_one_two_and_three_noise_runs(noise_runs):
    same = [f"reply {i}" for i in range(50)]
    cand = [f"reply {i}" + (" changed" if i < 25 else "") for i in range(50)]
    test = changed_test([same] * (1 + noise_runs) + [cand])
    assert test.p_value < 1e-4, test
    cut = np.array([i < 28 for i in range(500)])
    assert own_count_test(cut, np.zeros((1 + noise_runs, 500), bool)).p_value < 1e-4


@given(st.integers(2, 3), st.integers(0, 12), st.integers(0, 40), st.integers(0, 99))
@FAST
def test_a_noise_run_that_behaves_like_the_others_never_hides_a_change(k, each, extra, seed):
    """Every run of the pool departs on `each` items of its own; the candidate on `each +
    extra`. Once the spread is measured (two noise runs or more), one more such noise run never
    raises the p-value of the changes or of the counts. (From one noise run to two the spread
    stops being assumed and starts being measured, which can cost power: the README says so.)"""
    n = 200
    before = runs_departing(n, [each] * (k + 1) + [each + extra], seed)
    added = runs_departing(n, [0] * (k + 2) + [each], seed + 1)[-1]  # departs on its own
    added = [a.replace(f"run {k + 2}", "run new") for a in added]
    after = [*before[:-1], added, before[-1]]
    flags = [np.array([[a != f"{i}" for i, a in enumerate(r)] for r in runs])
             for runs in (before, after)]
    for was, now in ((changed_test(before), changed_test(after)),
                     (own_count_test(flags[0][-1], flags[0][:-1]),
                      own_count_test(flags[1][-1], flags[1][:-1]))):
        if was.p_value < SHOWN:  # a change shown in a family of 40 checks stays shown
            assert now.p_value < SHOWN, (was, now)


SHOWN = 0.05 / 40


@given(st.lists(st.floats(0, 40), min_size=3, max_size=6), st.floats(0, 100))
@FAST
def test_a_pool_run_at_the_pool_mean_never_raises_the_spread_p(pool, candidate):
    """Once measured, one more run whose figure is the pool's mean (its logit-scale mean) can
    only sharpen the spread part: the same spread over more runs, more degrees of freedom."""
    n = 200
    ys = [logit_share(q, n) for q in pool]
    mean = sum(ys) / len(ys)
    at_mean = (n + 1) / (1 + math.exp(-mean)) - 0.5
    before, _ = spread_p(candidate, pool, n)
    after, _ = spread_p(candidate, [*pool, at_mean], n)
    assert after <= before + 1e-9


# ---------------------------------------------------------------- the family


def test_holm_adjusts_step_down():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5]
    assert holm([]) == []


def test_checks_that_cannot_reach_the_level_do_not_dilute_the_others():
    checks = [Check("gsm8k", "accuracy", 0.01, 1e-9),
              Check("gsm8k", "truncated", 1.0, 1.0),  # nothing was cut in any run
              Check("needle", "length", 0.25, 0.25, label="1k"),  # two flips at most
              Check("prompts", "drift", 0.02, 1e-6)]
    adjusted = adjust(checks, 0.05)
    assert [c.testable for c in adjusted] == [True, False, False, True]
    assert [c.adjusted_p for c in adjusted] == pytest.approx([0.02, 1.0, 1.0, 0.02])
    assert [c.alarmed for c in adjusted] == [True, False, False, True]
    assert not adjust(checks, 0.01)[0].alarmed  # the level is declared, not fixed
