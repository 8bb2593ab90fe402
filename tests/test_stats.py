"""Statistics against published figures, against scipy, and at the edges."""

from __future__ import annotations

import math
import random

import pytest
from scipy.optimize import minimize_scalar
from scipy.stats import binom, binomtest, norm

from kveval.judge.stats import (
    Interval,
    PairedTable,
    largest_loss,
    mcnemar_exact,
    paired_difference_ci,
    paired_table,
    wilson,
)

Z = float(norm.ppf(0.975))


def one_decimal(interval: Interval) -> tuple[float, float]:
    return round(100 * interval.low, 1), round(100 * interval.high, 1)


# ---------------------------------------------------------------- Wilson


@pytest.mark.parametrize(
    ("correct", "expected"),
    [(459, (89.1, 93.9)), (453, (87.7, 92.9)), (454, (87.9, 93.0))],
)
def test_wilson_matches_the_published_qwen3_8b_gsm8k_table(correct, expected):
    assert one_decimal(wilson(correct, 500)) == expected


def closed_form_wilson(k: int, n: int) -> tuple[float, float]:
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return centre - half, centre + half


def test_wilson_agrees_with_scipy_and_the_closed_form_on_random_inputs():
    rng = random.Random(20240611)
    for _ in range(300):
        n = rng.randint(1, 5000)
        k = rng.randint(0, n)
        ours = wilson(k, n)
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert ours.low == pytest.approx(ci.low, abs=1e-9)
        assert ours.high == pytest.approx(ci.high, abs=1e-9)
        low, high = closed_form_wilson(k, n)
        assert ours.low == pytest.approx(max(0.0, low), abs=1e-9)
        assert ours.high == pytest.approx(min(1.0, high), abs=1e-9)


def test_wilson_other_confidence_levels_follow_scipy():
    ci = binomtest(30, 40).proportion_ci(confidence_level=0.9, method="wilson")
    ours = wilson(30, 40, 0.9)
    assert (ours.low, ours.high) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_wilson_edges():
    n = 500
    none_right = wilson(0, n)
    assert none_right.low == 0.0
    assert none_right.high == pytest.approx(Z * Z / (n + Z * Z), abs=1e-9)
    all_right = wilson(n, n)
    assert all_right.high == 1.0
    assert all_right.low == pytest.approx(n / (n + Z * Z), abs=1e-9)
    assert wilson(0, 0) == Interval(0.0, 1.0)


@pytest.mark.parametrize(("k", "n"), [(-1, 5), (6, 5), (0, -1)])
def test_wilson_rejects_impossible_counts(k, n):
    with pytest.raises(ValueError):
        wilson(k, n)


def test_interval_overlap():
    assert Interval(0.1, 0.3).overlaps(Interval(0.3, 0.5))
    assert Interval(0.3, 0.5).overlaps(Interval(0.1, 0.3))
    assert not Interval(0.1, 0.2).overlaps(Interval(0.21, 0.5))


# ---------------------------------------------------------------- McNemar


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (0, 5, 2 / 32),  # every discordant pair one way: 2 * (1/2)^5
        (10, 2, 2 * (1 + 12 + 66) / 4096),  # 2 * P(X <= 2), X ~ Binomial(12, 1/2)
        (3, 7, 2 * (1 + 10 + 45 + 120) / 1024),
        (5, 5, 1.0),
        (0, 1, 1.0),
    ],
)
def test_mcnemar_on_known_tables(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p, abs=1e-12)
    assert mcnemar_exact(c, b) == pytest.approx(p, abs=1e-12)


def test_mcnemar_all_pairs_concordant_is_no_evidence():
    assert mcnemar_exact(0, 0) == 1.0


def test_mcnemar_agrees_with_scipy_on_random_inputs():
    rng = random.Random(7)
    for _ in range(200):
        b, c = rng.randint(0, 300), rng.randint(0, 300)
        if b + c == 0:
            continue
        expected = binomtest(b, b + c, 0.5).pvalue
        assert mcnemar_exact(b, c) == pytest.approx(expected, abs=1e-9)
        doubled_tail = min(1.0, 2 * binom.cdf(min(b, c), b + c, 0.5))
        assert mcnemar_exact(b, c) == pytest.approx(doubled_tail, abs=1e-9)


# ---------------------------------------------------------------- paired table


def test_paired_table_counts_cells():
    base = [True, True, False, False, True]
    cand = [True, False, True, False, True]
    table = paired_table(base, cand)
    assert table == PairedTable(both=2, lost=1, gained=1, neither=1)
    assert (table.n, table.baseline_correct, table.candidate_correct) == (5, 3, 3)
    assert table.discordant == 2
    assert table.difference == 0.0


def test_paired_table_needs_equal_lengths():
    with pytest.raises(ValueError):
        paired_table([True], [True, False])


def test_paired_table_rejects_negative_counts():
    with pytest.raises(ValueError):
        PairedTable(both=-1, lost=0, gained=0, neither=0)


# ---------------------------------------------------------------- paired difference (Tango)


def restricted_mle_numeric(t: PairedTable, d: float) -> float:
    """P(lost pair) maximising the multinomial likelihood under candidate - baseline = d."""
    def negative_log_likelihood(p_lost: float) -> float:
        p_gained, p_same = p_lost + d, 1 - 2 * p_lost - d
        terms = [(t.lost, p_lost), (t.gained, p_gained), (t.both + t.neither, p_same)]
        return -sum(k * math.log(p) for k, p in terms if k)
    low, high = max(0.0, -d) + 1e-13, (1 - d) / 2 - 1e-13
    return float(minimize_scalar(negative_log_likelihood, bounds=(low, high),
                                 method="bounded", options={"xatol": 1e-13}).x)


def score_at(t: PairedTable, d: float) -> float:
    p_lost = restricted_mle_numeric(t, d)
    return (t.gained - t.lost - t.n * d) / math.sqrt(t.n * (2 * p_lost + d * (1 - d)))


@pytest.mark.parametrize(
    "table",
    [PairedTable(36, 2, 12, 0), PairedTable(1, 7, 1, 12), PairedTable(59, 16, 6, 80),
     PairedTable(1150, 30, 28, 111), PairedTable(420, 25, 9, 46)],
)
def test_tango_limits_are_where_the_score_statistic_reaches_z(table):
    """Checked with the restricted MLE found numerically, not by the closed-form root."""
    ci = paired_difference_ci(table)
    assert ci.low < table.difference < ci.high
    assert score_at(table, ci.low) == pytest.approx(Z, abs=1e-4)
    assert score_at(table, ci.high) == pytest.approx(-Z, abs=1e-4)


def test_tango_excludes_zero_exactly_when_the_mcnemar_statistic_exceeds_z():
    rng = random.Random(3)
    for _ in range(200):
        lost, gained = rng.randint(0, 60), rng.randint(0, 60)
        if lost + gained == 0 or abs(abs(gained - lost) / math.sqrt(lost + gained) - Z) < 1e-6:
            continue
        table = PairedTable(both=rng.randint(0, 900), lost=lost, gained=gained,
                            neither=rng.randint(0, 100))
        ci = paired_difference_ci(table)
        excludes_zero = ci.low > 0 or ci.high < 0
        assert excludes_zero == (abs(gained - lost) / math.sqrt(lost + gained) > Z)


def test_tango_all_pairs_concordant_is_not_a_point():
    n = 1319
    ci = paired_difference_ci(PairedTable(both=1200, lost=0, gained=0, neither=119))
    bound = Z * Z / (n + Z * Z)
    assert ci.low == pytest.approx(-bound, abs=1e-9)
    assert ci.high == pytest.approx(bound, abs=1e-9)


def test_tango_edges():
    assert paired_difference_ci(PairedTable(0, 0, 0, 0)) == Interval(-1.0, 1.0)
    all_lost = paired_difference_ci(PairedTable(both=0, lost=10, gained=0, neither=0))
    assert all_lost.low == -1.0 and -1 < all_lost.high < 0
    all_gained = paired_difference_ci(PairedTable(both=0, lost=0, gained=10, neither=0))
    assert all_gained.high == 1.0 and 0 < all_gained.low < 1
    everything_right = paired_difference_ci(PairedTable(both=500, lost=0, gained=0, neither=0))
    assert everything_right.low < 0 < everything_right.high


def test_tango_lower_limit_falls_as_losses_grow():
    lows = [paired_difference_ci(PairedTable(400, lost, 10, 50)).low for lost in range(0, 40, 5)]
    assert lows == sorted(lows, reverse=True)


def test_largest_loss():
    assert largest_loss(Interval(-0.031, 0.01)) == pytest.approx(0.031)
    assert largest_loss(Interval(0.002, 0.05)) == 0.0
