"""Length curves: AUC on known curves, the paired bootstrap and its recovery test, the paired
test per length and across lengths, effective length two ways."""

from __future__ import annotations

import math
from typing import Any

import pytest
from scipy.stats import binomtest

from kveval.formats.records import ItemRecord
from kveval.judge import curves, lengthstats
from kveval.judge.curves import CurveOptions, length_curve, task_curves


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
    assert all(p.p_value == 1.0 and p.min_p == 1.0 for p in curve.versus.paired)


def test_recovery_of_a_known_loss_and_its_interval() -> None:
    base = {n: [1.0] * 20 for n in (1024, 2048, 4096)}
    cand = {1024: [1.0] * 20, 2048: [1.0] * 15 + [0.0] * 5, 4096: [1.0] * 10 + [0.0] * 10}
    strict = length_curve("copy", run(cand), run(base), options=CurveOptions(minimum=0.95))
    loose = length_curve("copy", run(cand), run(base), options=CurveOptions(minimum=0.5))
    assert strict is not None and strict.versus is not None
    assert loose is not None and loose.versus is not None
    r = strict.versus.recovery
    expected = lengthstats.auc([1024, 2048, 4096], [1.0, 0.75, 0.5])
    assert r.value == pytest.approx(expected)
    assert r.low is not None and r.high is not None
    assert r.low < expected < r.high < 1.0
    # p of "the recovery is at least R": no bootstrap round reaches 95%, every one reaches 50%
    assert r.p_below == pytest.approx(1 / 2001)
    assert loose.versus.recovery.p_below == 1.0


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
    curve = length_curve("copy", run({1024: [0.5]}), run({1024: [0.0]}),
                         options=CurveOptions(minimum=0.9))
    assert curve is not None and curve.versus is not None
    assert curve.versus.recovery.p_below is None and not curve.versus.recovery_judgeable


# ---------------------------------------------------------------- paired tests per length


@pytest.mark.parametrize("lost, gained", [(7, 1), (3, 3), (0, 4), (8, 0), (1, 0)])
def test_a_length_of_right_or_wrong_answers_is_tested_by_exact_mcnemar(lost, gained) -> None:
    base = [1.0] * lost + [0.0] * gained + [1.0, 0.0]
    cand = [0.0] * lost + [1.0] * gained + [1.0, 0.0]
    found = lengthstats.paired_scores(32768, base, cand)
    expected = binomtest(lost, lost + gained, 0.5, alternative="greater").pvalue \
        if lost + gained else 1.0
    assert (found.lost, found.gained, found.binary) == (lost, gained, True)
    assert found.p_value == pytest.approx(expected)
    assert found.min_p == pytest.approx(0.5 ** (lost + gained))


def test_graded_scores_are_tested_by_a_permutation_within_items() -> None:
    from scipy.stats import permutation_test

    base = [0.9, 0.8, 0.95, 0.7, 0.85, 0.9]
    cand = [0.5, 0.8, 0.6, 0.72, 0.4, 0.3]
    found = lengthstats.paired_scores(4096, base, cand)
    expected = permutation_test((base, cand), lambda x, y: sum(x) / 6 - sum(y) / 6,
                                permutation_type="samples", alternative="greater").pvalue
    assert not found.binary and found.p_value == pytest.approx(expected)
    assert found.min_p == pytest.approx(1 / 32)  # 5 items differ: 2^5 arrangements


def test_the_longest_length_counts_in_full() -> None:
    """A needle whose 32k score drops from 0.81 to 0.24 recovers 94% of its AUC (the
    trapezoid gives the longest length little weight), yet its own test shows the loss."""
    lengths = [1024, 2048, 4096, 8192, 16384, 32768]
    base = {n: [1.0] * 21 for n in lengths[:-1]} | {32768: [1.0] * 17 + [0.0] * 4}
    cand = {n: [1.0] * 21 for n in lengths[:-1]} | {32768: [1.0] * 5 + [0.0] * 16}
    curve = length_curve("needle", run(cand, "needle"), run(base, "needle"))
    assert curve is not None and curve.versus is not None
    assert curve.versus.recovery.value is not None and curve.versus.recovery.value > 0.9
    longest = curve.versus.paired[-1]
    assert (longest.length, longest.lost, longest.gained) == (32768, 12, 0)
    assert longest.p_value < 0.001


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
    looser = length_curve("copy", run(scores), options=CurveOptions(fraction=0.8))
    assert looser is not None and looser.effective_length == 8192
    zero = length_curve("copy", run({1024: [0.0], 2048: [0.0]}))
    assert zero is not None and zero.effective_length is None


def test_effective_length_by_an_absolute_score_with_its_interval() -> None:
    """RULER's rule: the longest length up to which every length scores at least the score."""
    scores = {1024: [1.0] * 10, 2048: [0.9] * 10, 4096: [0.8] * 10, 8192: [0.9] * 10}
    curve = length_curve("copy", run(scores), options=CurveOptions(score=0.85))
    assert curve is not None and curve.absolute.length == 2048
    assert (curve.absolute.low, curve.absolute.high) == (2048, 2048)  # no spread: no doubt
    noisy = {1024: [1.0, 0.8] * 5, 2048: [1.0, 0.7] * 5, 4096: [1.0, 0.6] * 5}
    wide = length_curve("copy", run(noisy), options=CurveOptions(score=0.84))
    assert wide is not None and wide.absolute.length == 2048
    assert wide.absolute.low == 1024
    assert wide.absolute.high == 4096


def test_only_long_context_tasks_get_curves() -> None:
    items = run({1024: [1.0]}) + [ItemRecord(task="gsm8k", item_id="g/1", prompt_sha256="x",
                                             request={}, status="ok", correct=True)]
    assert set(task_curves(items)) == {"copy"}
    assert curves.item_score(record(1024, 0, correct=None)) is None
    assert math.isclose(curves.item_score(record(1024, 0, score=0.25, correct=False)) or 0, 0.25)
