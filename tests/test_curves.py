"""Length curves: AUC on known curves, the paired bootstrap, the sign test, effective length."""

from __future__ import annotations

import math
from typing import Any

import pytest
from scipy.stats import binomtest

from kveval.formats.records import ItemRecord
from kveval.judge import curves, lengthstats
from kveval.judge.curves import length_curve, recovery_failed, task_curves


def record(length: int, index: int, *, score: float | None = None, correct: bool | None = None,
           status: str = "ok", task: str = "copy") -> ItemRecord:
    meta: dict[str, Any] = {"target_tokens": length, "depth": 50}
    if score is not None:
        meta["score"] = score
    return ItemRecord(task=task, item_id=f"{task}/L{length}/{index}",
                      prompt_sha256=f"{length}-{index}", request={}, status=status,
                      correct=correct, meta=meta)


def run(scores: dict[int, list[float]], task: str = "copy") -> list[ItemRecord]:
    return [record(n, i, score=s, task=task) for n, values in scores.items()
            for i, s in enumerate(values)]


# ---------------------------------------------------------------- AUC


def test_auc_of_a_flat_curve_is_its_level() -> None:
    assert lengthstats.auc([1024, 4096, 32768], [1.0, 1.0, 1.0]) == pytest.approx(1.0)
    assert lengthstats.auc([1024, 4096, 32768], [0.5, 0.5, 0.5]) == pytest.approx(0.5)
    assert lengthstats.auc([2048], [0.7]) == 0.7
    assert lengthstats.auc([], []) is None


def test_auc_is_the_trapezoid_over_log_length() -> None:
    # buckets 1k, 2k, 8k: log2 steps 1 and 2; means 1, 0.5, 0
    value = lengthstats.auc([1024, 2048, 8192], [1.0, 0.5, 0.0])
    assert value == pytest.approx((1 * (1 + 0.5) / 2 + 2 * (0.5 + 0) / 2) / 3)
    # a straight line over log-length has the mean of its ends
    assert lengthstats.auc([1024, 2048, 4096, 8192], [1.0, 0.8, 0.6, 0.4]) == pytest.approx(0.7)


# ---------------------------------------------------------------- bootstrap


def test_identical_runs_recover_exactly() -> None:
    scores = {1024: [1.0, 0.9, 0.8, 1.0], 4096: [0.7, 0.4, 0.9, 0.5]}
    curve = length_curve("copy", run(scores), run(scores))
    assert curve is not None and curve.versus is not None
    assert curve.versus.recovery == lengthstats.Recovery(1.0, 1.0, 1.0)
    assert curve.versus.sign.p is None and curve.versus.sign.ties == 2


def test_recovery_of_a_known_loss_and_its_interval() -> None:
    base = {n: [1.0] * 20 for n in (1024, 2048, 4096)}
    cand = {1024: [1.0] * 20, 2048: [1.0] * 15 + [0.0] * 5, 4096: [1.0] * 10 + [0.0] * 10}
    curve = length_curve("copy", run(cand), run(base))
    assert curve is not None and curve.versus is not None
    r = curve.versus.recovery
    expected = lengthstats.auc([1024, 2048, 4096], [1.0, 0.75, 0.5])
    assert r.value == pytest.approx(expected)
    assert r.low is not None and r.high is not None
    assert r.low < expected < r.high < 1.0
    assert recovery_failed(curve, 0.95) is True and recovery_failed(curve, 0.5) is False


def test_bootstrap_is_seeded_and_pairs_items() -> None:
    cand = [[0.9, 0.1, 0.8, 0.6], [0.2, 0.5, 0.3, 0.9]]
    base = [[1.0, 0.2, 0.9, 0.7], [0.4, 0.6, 0.3, 1.0]]
    first = lengthstats.bootstrap_recovery(cand, base, [1024, 4096])
    assert first == lengthstats.bootstrap_recovery(cand, base, [1024, 4096])
    assert first != lengthstats.bootstrap_recovery(cand, base, [1024, 4096], seed=1)
    # pairing: a candidate that tracks the baseline item by item has a narrow interval
    tracking = [[0.95 * b for b in bucket] for bucket in base]
    tight = lengthstats.bootstrap_recovery(tracking, base, [1024, 4096])
    assert tight.low == pytest.approx(0.95) and tight.high == pytest.approx(0.95)


def test_no_baseline_score_cannot_be_recovered() -> None:
    r = lengthstats.bootstrap_recovery([[0.5]], [[0.0]], [1024])
    assert r == lengthstats.Recovery(None, None, None)
    curve = length_curve("copy", run({1024: [0.5]}), run({1024: [0.0]}))
    assert curve is not None and recovery_failed(curve, 0.9) is None


# ---------------------------------------------------------------- sign test


@pytest.mark.parametrize("lower, higher", [(7, 1), (3, 3), (0, 4), (8, 0), (1, 0)])
def test_sign_test_matches_scipy(lower: int, higher: int) -> None:
    found = lengthstats.sign_test([-0.1] * lower + [0.2] * higher + [0.0])
    expected = binomtest(lower, lower + higher, 0.5, alternative="greater").pvalue
    assert (found.lower, found.buckets, found.ties) == (lower, lower + higher, 1)
    assert found.p == pytest.approx(expected)


def test_lower_in_7_of_8_buckets() -> None:
    lengths = [1024 * 2 ** k for k in range(8)]
    base = {n: [0.9, 0.8] for n in lengths}
    cand = {n: [0.85, 0.8] for n in lengths[:7]} | {lengths[7]: [0.95, 0.8]}
    curve = length_curve("copy", run(cand), run(base))
    assert curve is not None and curve.versus is not None
    sign = curve.versus.sign
    assert (sign.lower, sign.buckets) == (7, 8) and sign.p == pytest.approx(9 / 256)


# ---------------------------------------------------------------- buckets, effective length


def test_buckets_use_wilson_for_right_or_wrong_and_t_for_graded_scores() -> None:
    items = [record(1024, i, correct=i < 8, task="needle") for i in range(10)] + \
        [record(1024, 99, status="error", task="needle")]
    curve = length_curve("needle", items)
    assert curve is not None
    b = curve.buckets[0]
    ci = binomtest(8, 10).proportion_ci(method="wilson")
    assert (b.n, b.mean) == (10, 0.8) and (b.low, b.high) == pytest.approx((ci.low, ci.high))
    graded = length_curve("copy", run({1024: [0.9, 0.95, 1.0, 0.85]}))
    assert graded is not None
    g = graded.buckets[0]
    assert g.low is not None and g.high is not None
    assert g.low < 0.925 < g.high <= 1.0


def test_effective_length_follows_the_threshold() -> None:
    scores = {1024: [1.0], 2048: [0.95], 4096: [0.85], 8192: [0.95]}
    curve = length_curve("copy", run(scores))
    assert curve is not None
    assert curve.threshold == pytest.approx(0.9) and curve.effective_length == 2048
    looser = length_curve("copy", run(scores), fraction=0.8)
    assert looser is not None and looser.effective_length == 8192
    zero = length_curve("copy", run({1024: [0.0], 2048: [0.0]}))
    assert zero is not None and zero.effective_length is None


def test_only_long_context_tasks_get_curves() -> None:
    items = run({1024: [1.0]}) + [ItemRecord(task="gsm8k", item_id="g/1", prompt_sha256="x",
                                             request={}, status="ok", correct=True)]
    assert set(task_curves(items)) == {"copy"}
    assert curves.item_score(record(1024, 0, correct=None)) is None
    assert math.isclose(curves.item_score(record(1024, 0, score=0.25, correct=False)) or 0, 0.25)
