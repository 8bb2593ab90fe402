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

from kveval.judge.checks import Check, adjust, holm, not_run, weigh
from kveval.judge.floor import (
    accuracy_test,
    changed_test,
    exact_p,
    logit_share,
    logit_spread_p,
    own_count_test,
    poisson_binomial_sf,
    run_effects,
)
from kveval.judge.spread import PRIORS, moderated, within_item_variance
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


def test_the_spread_is_the_pools_own_beyond_counting_moderated_by_the_prior():
    """Logit scale; the counting variance is known (item by item), so only the runs' spread
    beyond it is moderated, and Student's t takes Satterthwaite's degrees of freedom."""
    from scipy.stats import t

    pool, n, counting = [10.0, 20.0, 30.0], 500, 5.0
    ys = [logit_share(q, n) for q in pool]
    mean = sum(ys) / 3
    own = sum((y - mean) ** 2 for y in ys) / 2
    floor = counting * (1 / 20.5 + 1 / 480.5) ** 2
    prior = PRIORS["count"]
    between = (prior.df * prior.spread ** 2 + 2 * max(own - floor, 0)) / (prior.df + 2)
    df = (prior.df + 2) * ((between + floor) / between) ** 2
    expected = t.sf((logit_share(50, n) - mean) / math.sqrt((between + floor) * (1 + 1 / 3)),
                    df=df)
    p, spread, _ = logit_spread_p(50, pool, n, counting)
    assert spread.measured and spread.df == prior.df + 2
    assert p == pytest.approx(expected, rel=1e-9)


def test_a_pool_that_varies_by_counting_alone_is_not_judged_on_two_degrees_of_freedom():
    """Counts 12, 14, 13 of 500 vary by counting alone: 40 is far beyond them, and with the
    counting variance known the p-value is far smaller than on the pool's two degrees of
    freedom would allow."""
    from scipy.stats import t

    p, spread, gap = logit_spread_p(40, [12.0, 14.0, 13.0], 500, 13.0)
    assert p < 0.005
    assert p < t.sf(gap / math.sqrt(spread.variance + spread.extra), df=2) / 10


def test_one_pool_run_leaves_the_spread_to_the_prior_and_says_so():
    p, spread, _ = logit_spread_p(40, [20.0], 500, 4.0)
    assert not spread.measured and spread.df == PRIORS["count"].df
    assert 0 < p < 1


def test_a_pool_of_equal_counts_is_not_certainty():
    """12, 12 and 12 answers cut short: the pool's own variance is 0, but the counting
    variance its items show is not, and neither is the prior: 20 cut is no proof."""
    spread = moderated([1.0, 1.0, 1.0], 0.0, 0.0, floor=0.04)
    assert spread.variance == pytest.approx(0.04)
    pool = np.zeros((3, 500), bool)
    for r in range(3):
        pool[r, r * 20:r * 20 + 12] = True  # each run cuts its own 12
    cand = np.zeros(500, bool)
    cand[300:320] = True
    assert own_count_test(cand, pool).spread_p > 0.01


def test_the_counting_floor_is_the_unbiased_within_item_variance():
    flags = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [1, 0, 1, 0]], dtype=bool)
    # items flagged by 3, 1, 1 and 0 of 3 runs: t (M - t) / (M (M - 1)) = 0, 1/3, 1/3, 0
    assert within_item_variance(flags) == pytest.approx(2 / 3)
    assert within_item_variance(flags[:1]) == 0.0


def test_sixty_cut_against_four_eight_and_sixteen_is_shown():
    """A candidate that cuts 60 of 500 against a setup whose runs cut 4, 8 and 16: 3.75
    times the most the setup itself did (the issue's example; it used to pass)."""
    pool = np.zeros((3, 500), bool)
    for r, count in enumerate((4, 8, 16)):
        pool[r, 100 * r:100 * r + count] = True
    cand = np.zeros(500, bool)
    cand[400:460] = True
    test = own_count_test(cand, pool)
    assert test.p_value < 0.02, test  # shown as the only check, and as GSM8K's in a family
    assert own_count_test(cand, pool[:2]).p_value < 0.02  # one noise run: shown too
    assert own_count_test(cand, pool[:1]).p_value < 0.05  # none: shown as the only check


def test_a_restart_among_restarts_is_not_a_regression():
    """The issue's example: 425 of 500 right, noise runs 409, 428 and 417, the candidate
    another restart at 410; swapped, a noise run as the candidate: neither is shown."""
    rng = np.random.default_rng(0)
    right = [425, 409, 428, 417, 410]
    wrong = np.zeros((5, 500), bool)
    fragile = rng.permutation(500)[:120]
    for r, k in enumerate(right):
        wrong[r, rng.choice(fragile, 500 - k - 40, replace=False)] = True
        wrong[r, :40] = True  # always wrong
    for order in ([0, 1, 2, 3, 4], [0, 4, 2, 3, 1]):
        test = accuracy_test(wrong[order], changed=30.0, harm=0.5)
        assert test.spread_p > 0.05, test


def test_a_wrong_count_far_beyond_a_quiet_pool_is_shown_and_a_copy_never_is():
    wrong = np.zeros((4, 500), bool)
    wrong[:, :60] = True
    wrong[1, 60:64] = True  # a noise run changed four answers for the worse
    cand = wrong[0].copy()
    cand[100:130] = True  # thirty right answers lost
    shown = accuracy_test(np.vstack([wrong[:3], cand]), changed=2.0, harm=1.0)
    assert shown.p_value < 1e-3, shown
    copy = accuracy_test(np.vstack([wrong[:3], wrong[0]]), changed=2.0, harm=1.0)
    assert copy.p_value == 1.0


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
    assert test.p_value < 1e-3, test  # shown at drift's level in a family of 40
    cut = np.array([i < 28 for i in range(500)])
    assert own_count_test(cut, np.zeros((1 + noise_runs, 500), bool)).p_value < 1e-3


@given(st.integers(1, 3), st.integers(0, 12), st.integers(0, 40), st.integers(0, 99))
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


@given(st.lists(st.floats(0, 40), min_size=2, max_size=6), st.floats(0, 100))
@FAST
def test_a_pool_run_at_the_pool_mean_never_raises_the_spread_p(pool, candidate):
    """One more run whose figure is the pool's mean (its logit-scale mean) can only sharpen
    the spread part: the same spread over more runs, more degrees of freedom."""
    n = 200
    ys = [logit_share(q, n) for q in pool]
    mean = sum(ys) / len(ys)
    at_mean = (n + 1) / (1 + math.exp(-mean)) - 0.5
    before, _, _ = logit_spread_p(candidate, pool, n, 1.0)
    after, _, _ = logit_spread_p(candidate, [*pool, at_mean], n, 1.0)
    assert after <= before + 1e-9


# ---------------------------------------------------------------- the family


def test_holm_adjusts_step_down():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5]
    assert holm([]) == []


def test_checks_that_cannot_reach_their_level_do_not_dilute_the_others():
    checks = [Check("gsm8k", "accuracy", 0.01, 1e-9),
              Check("gsm8k", "truncated", 1.0, 1.0),  # nothing was cut in any run
              Check("needle", "length", 0.25, 0.25, label="1k"),  # two flips at most
              Check("prompts", "drift", 0.02, 1e-6)]
    adjusted = adjust(checks, 0.05)
    assert [c.testable for c in adjusted] == [True, False, False, True]
    assert [c.adjusted_p for c in adjusted] == pytest.approx([0.02, 1.0, 1.0, 0.02])
    assert [c.alarmed for c in adjusted] == [True, False, False, True]
    assert not adjust(checks, 0.01)[0].alarmed  # the level is declared, not fixed


def test_tarone_is_iterated_until_every_check_left_can_reach_its_level():
    """Two checks whose data give at best 0.02 could reach alpha / 2.5 only: with all four
    in, alpha / 4 is beyond them, so they leave; the family is then Tarone's 2.5 (not 2:
    at alpha / 2 they would be back), and the two left are tested against it."""
    checks = [Check("a", "accuracy", 0.001, 1e-6), Check("b", "accuracy", 0.02, 0.02),
              Check("c", "accuracy", 0.4, 0.02), Check("d", "accuracy", 0.01, 1e-6)]
    adjusted = adjust(checks, 0.05)
    assert [c.testable for c in adjusted] == [True, False, False, True]
    assert [c.adjusted_p for c in adjusted] == pytest.approx([0.0025, 1.0, 1.0, 0.015])


def test_a_check_that_cannot_be_run_keeps_its_share_and_the_family_its_shape():
    """The same accuracy p with and without a noise run: the drift check that needs one
    holds its weight either way, so GSM8K's adjusted p does not move."""
    accuracy = weigh("gsm8k", "accuracy", 0.012, 1e-9)
    without = adjust([accuracy, not_run("prompts", "drift", "needs a noise run")])
    with_noise = adjust([accuracy, weigh("prompts", "drift", 0.8, 1e-6)])
    assert without[0].adjusted_p == pytest.approx(with_noise[0].adjusted_p)
    assert not without[1].run and without[1].adjusted_p == 1.0


def test_each_check_is_tested_at_its_step_of_holm_and_its_level_agrees():
    checks = adjust([weigh("a", "accuracy", 0.001, 1e-9), weigh("a", "truncated", 0.03, 1e-9),
                     weigh("b", "accuracy", 0.004, 1e-9)])
    for c in checks:
        assert (c.p_value < c.level) == c.alarmed, c
