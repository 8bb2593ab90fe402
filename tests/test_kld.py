"""The llama-perplexity KL table, checked against figures computed another way: scipy's
standard error, llama.cpp's own percentile and median rules written out, and a hand-made case."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from kveval.judge.divergence import position_values
from kveval.judge.kld import PositionValues, kld_table


def llama_percentile(values: list[float], fraction: float) -> float:
    """tools/perplexity/perplexity.cpp's lambda, line for line."""
    values = sorted(values)
    if fraction <= 0:
        return values[0]
    if fraction >= 1:
        return values[-1]
    p = fraction * (len(values) - 1)
    ip = int(p)
    p -= ip
    return (1 - p) * values[ip] + p * values[min(ip + 1, len(values) - 1)]


def llama_median(values: list[float]) -> float:
    values = sorted(values)
    n = len(values)
    return 0.5 * (values[n // 2] + values[n // 2 - 1]) if n % 2 == 0 else values[n // 2]


probabilities = st.floats(0.0, 1.0, allow_nan=False)
positions = st.lists(st.tuples(st.floats(0.0, 5.0, allow_nan=False), st.booleans(),
                               probabilities, probabilities), min_size=12, max_size=200)


@settings(max_examples=150, deadline=None)
@given(positions)
def test_the_table_matches_llama_cpp_rules(rows: list[tuple[float, bool, float, float]]) -> None:
    table = kld_table([PositionValues(*row) for row in rows])
    kl = [r[0] for r in rows]
    dp = [r[3] - r[2] for r in rows]
    n = len(rows)
    assert table.positions == n and table.dp_unknown == 0
    assert table.kl_mean.value == pytest.approx(np.mean(kl), abs=1e-12)
    if np.ptp(kl) > 1e-9:  # a constant sample: both say 0
        assert table.kl_mean.se == pytest.approx(stats.sem(kl), rel=1e-6, abs=1e-12)
    assert table.kl["median"] == pytest.approx(llama_median(kl), abs=1e-12)
    for name, q in (("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999)):
        assert table.kl[name] == pytest.approx(llama_percentile(kl, q), abs=1e-12)
    assert table.kl["max"] == max(kl)
    same = sum(r[1] for r in rows) / n
    assert table.same_top.value == pytest.approx(same)
    assert table.same_top.se == pytest.approx(math.sqrt(same * (1 - same) / (n - 1)))
    assert table.dp_mean is not None and table.dp_rms is not None
    assert table.dp_rms.value == pytest.approx(math.sqrt(np.mean(np.square(dp))), abs=1e-12)
    assert table.dp["p1"] == pytest.approx(llama_percentile(dp, 0.01), abs=1e-12)
    assert table.dp["min"] == min(dp) and table.dp["max"] == max(dp)


def test_a_hand_made_case() -> None:
    """Twelve positions: KL 0.0 .. 1.1, top token the same on 9, Δp of +0.1 on half and
    -0.1 on the other half."""
    rows = [PositionValues(i / 10, i % 4 != 3, 0.5, 0.6 if i % 2 else 0.4) for i in range(12)]
    table = kld_table(rows)
    assert table.kl_mean.value == pytest.approx(0.55)
    # sample sd of 0, 0.1, ..., 1.1 is sqrt(0.13), so the standard error is sqrt(0.13 / 12)
    assert table.kl_mean.se == pytest.approx(math.sqrt(0.13 / 12))
    assert table.kl["median"] == pytest.approx(0.55)
    assert table.kl["p90"] == pytest.approx(0.99)  # 0.9 * 11 = 9.9: 0.9 + 0.9 * 0.1
    assert table.same_top.value == pytest.approx(0.75)
    assert table.same_top.se == pytest.approx(math.sqrt(0.75 * 0.25 / 11))
    assert table.dp_mean is not None and table.dp_mean.value == pytest.approx(0.0, abs=1e-12)
    assert table.dp_rms is not None and table.dp_rms.value == pytest.approx(0.1)
    assert table.dp_rms.se == pytest.approx(0.0, abs=1e-12)  # every Δp² is 0.01


def test_few_positions_have_no_error_bars_as_in_llama_cpp() -> None:
    table = kld_table([PositionValues(0.1 * i, True, 0.5, 0.4) for i in range(10)])
    assert table.kl_mean.se == 0.0


def test_unknown_probabilities_are_counted_apart_and_nothing_is_an_error() -> None:
    table = kld_table([PositionValues(0.1, True, 0.5, None), PositionValues(0.2, False, 0.5, 0.7)])
    assert table.dp_positions == 1 and table.dp_unknown == 1
    assert table.dp_mean is not None and table.dp_mean.value == pytest.approx(0.2)
    assert kld_table([PositionValues(0.1, True, None, None)]).dp_mean is None
    with pytest.raises(ValueError):
        kld_table([])


def test_positions_from_two_runs() -> None:
    base = {"tokens": ["a", "b"], "logprobs": [math.log(0.6), math.log(0.5)],
            "top_tokens": [["a", "c"], ["b", "d"]],
            "top_logprobs": [[math.log(0.6), math.log(0.3)], [math.log(0.5), math.log(0.4)]]}
    other = {"tokens": ["a", "b"], "logprobs": [math.log(0.5), None],
             "top_tokens": [["a", "c"], ["d", "e"]],
             "top_logprobs": [[math.log(0.5), math.log(0.4)], [math.log(0.7), math.log(0.2)]]}
    first, second = position_values(base, other)
    p, q = np.array([0.6, 0.3, 0.1]), np.array([0.5, 0.4, 0.1])
    assert first.kl == pytest.approx(float(np.sum(p * np.log(p / q))))
    assert first.same_top and first.p_base == pytest.approx(0.6)
    assert first.p_other == pytest.approx(0.5)
    assert not second.same_top and second.p_other is None  # "b" is not in the other top-K
