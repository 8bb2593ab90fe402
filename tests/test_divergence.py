"""The top-K KL estimator, per-item divergence and the Wilcoxon test against the noise run."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import entropy

from kveval.formats.records import ItemRecord
from kveval.judge.divergence import item_divergence, per_item, summarize
from kveval.judge.kl_bound import kl_topk
from kveval.judge.kl_test import kl_test, task_divergences

VOCAB = [f"t{i}" for i in range(8)]


WIDE = [f"w{i}" for i in range(50)]


def top(probs: np.ndarray, k: int, vocab: list[str] = VOCAB) -> dict[str, float]:
    order = np.argsort(-probs)[:k]
    return {vocab[i]: float(probs[i]) for i in order}


def coarse_kl(p: np.ndarray, q: np.ndarray, k: int) -> float:
    """Direct computation: the tokens in both top-k sets, then everything else as one."""
    shared = sorted(set(np.argsort(-p)[:k]) & set(np.argsort(-q)[:k]))
    rest = [i for i in range(len(p)) if i not in shared]
    pp = [p[i] for i in shared] + [p[rest].sum()]
    qq = [q[i] for i in shared] + [q[rest].sum()]
    return sum(a * math.log(a / b) for a, b in zip(pp, qq, strict=True) if a > 0)


def test_identical_distributions_have_zero_kl() -> None:
    p = np.array([0.5, 0.2, 0.1, 0.1, 0.05, 0.03, 0.01, 0.01])
    assert kl_topk(top(p, 3), top(p, 3)) == pytest.approx(0.0, abs=1e-12)


def test_full_vocabulary_tops_give_the_exact_kl() -> None:
    p = np.array([0.5, 0.2, 0.1, 0.1, 0.05, 0.03, 0.01, 0.01])
    q = np.array([0.4, 0.25, 0.15, 0.05, 0.05, 0.05, 0.03, 0.02])
    assert kl_topk(top(p, 8), top(q, 8)) == pytest.approx(entropy(p, q), rel=1e-9)


def test_estimator_is_at_least_the_shared_tokens_coarse_graining_and_bounds_the_true_kl() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        p = rng.dirichlet(np.full(8, 0.5))
        q = rng.dirichlet(np.full(8, 0.5))
        k = int(rng.integers(1, 8))
        estimate = kl_topk(top(p, k), top(q, k))
        assert coarse_kl(p, q, k) - 1e-12 <= estimate <= entropy(p, q) + 1e-12


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 10),
       alpha=st.sampled_from([0.05, 0.3, 1.0]), forced=st.booleans())
def test_bound_never_exceeds_the_full_kl_and_is_positive_on_disjoint_tops(
        seed: int, k: int, alpha: float, forced: bool) -> None:
    """Full distributions over 50 tokens, each side's top-k recorded (and, forced, the
    baseline's greedy token on both sides): never above the true KL; above 0 where the two
    top-k sets are disjoint."""
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.full(50, alpha)), rng.dirichlet(np.full(50, alpha))
    if rng.random() < 0.5:  # a candidate near the baseline, as a cache type makes one
        q = 0.9 * p + 0.1 * q
    t = int(np.argmax(p))
    token = (WIDE[t], float(p[t]), float(q[t])) if forced else None
    bound = kl_topk(top(p, k, WIDE), top(q, k, WIDE), token)
    assert bound <= entropy(p, q) * (1 + 1e-9) + 1e-12
    if not set(top(p, k, WIDE)) & set(top(q, k, WIDE)):
        assert bound > 0


def test_disjoint_top_sets_give_a_large_bound() -> None:
    """The issue's case: a broken cache whose top-5 shares nothing with the baseline's."""
    base = {" It": 0.40, " The": 0.25, " A": 0.15, " ": 0.08, " To": 0.05}
    broken = {":": 0.20, "\n": 0.15, " the": 0.10, " he": 0.08, " how": 0.06}
    bound = kl_topk(base, broken)
    # every baseline token has at most 0.06 under the broken cache, every broken one at most
    # 0.05 under the baseline: the listed masses cannot be matched
    assert bound > 1.0
    assert kl_topk(base, broken, (" It", 0.40, 1e-4)) > bound  # forcing knows q(" It")


def test_a_known_perturbation_is_measured() -> None:
    # top-2 both {a, b}; baseline a=0.6 b=0.3 rest 0.1; other a=0.5 b=0.4 rest 0.1
    expected = 0.6 * math.log(0.6 / 0.5) + 0.3 * math.log(0.3 / 0.4)
    got = kl_topk({"a": 0.6, "b": 0.3}, {"a": 0.5, "b": 0.4})
    assert got == pytest.approx(expected, rel=1e-9)


def lp(tokens: list[str], tops: list[list[tuple[str, float]]]) -> dict:
    return {"k": len(tops[0]), "tokens": tokens,
            "logprobs": [dict(t)[tok] for tok, t in zip(tokens, tops, strict=True)],
            "top_tokens": [[a for a, _ in t] for t in tops],
            "top_logprobs": [[b for _, b in t] for t in tops]}


SURE = [("x", math.log(0.9)), ("y", math.log(0.05))]
TIE = [("x", math.log(0.5)), ("y", math.log(0.45))]
TIE_FLIPPED = [("y", math.log(0.5)), ("x", math.log(0.45))]


def test_positions_run_up_to_and_including_the_first_difference() -> None:
    base = lp(["x", "x", "x", "x"], [SURE, SURE, TIE, SURE])
    other = lp(["x", "x", "y", "y"], [SURE, SURE, TIE_FLIPPED, SURE])
    item = item_divergence(("t", "1"), base, other)
    assert item is not None
    assert len(item.positions) == 3
    assert [p.top1_same for p in item.positions] == [True, True, False]
    assert item.flip_margin == pytest.approx(math.log(0.5) - math.log(0.45))
    assert item.positions[2].dlogp == pytest.approx(abs(math.log(0.5) - math.log(0.45)))


def test_summary_over_positions() -> None:
    same = item_divergence(("t", "a"), lp(["x"] * 3, [SURE] * 3), lp(["x"] * 3, [SURE] * 3))
    flip = item_divergence(("t", "b"), lp(["x", "x"], [SURE, TIE]),
                           lp(["x", "y"], [SURE, TIE_FLIPPED]))
    assert same is not None and flip is not None
    d = summarize([same, flip])
    assert d.items == 2 and d.positions == 5 and d.flips == 1
    assert d.top1_agreement == pytest.approx(4 / 5)
    assert d.kl_mean is not None and d.kl_mean > 0
    assert d.kl_p99 is not None and d.kl_p99 > d.kl_mean


def record(item_id: str, logprobs: dict | None) -> ItemRecord:
    return ItemRecord(task="t", item_id=item_id, prompt_sha256="s", request={}, status="ok",
                      output="x", logprobs=logprobs)


def test_a_candidate_that_moves_every_item_is_above_the_floor_exactly() -> None:
    """Each of 12 items is the candidate's largest KL: under exchange within items that has
    probability 2^-12 (exact, one noise run)."""
    base = [record(str(i), lp(["x"] * 4, [SURE] * 4)) for i in range(12)]
    moved = lp(["x"] * 4, [[("x", math.log(0.8)), ("y", math.log(0.1))]] * 4)
    cand = per_item([(b, record(b.item_id, moved)) for b in base])
    noise = per_item([(b, b) for b in base])
    test = kl_test(cand, noise)
    assert test.items == 12 and test.noise_kl == 0 and test.noise_runs == 1
    assert test.p_value == pytest.approx(0.5 ** 12) and test.min_p == pytest.approx(0.5 ** 12)
    assert kl_test(cand, noise, shift=1.0).p_value == 1.0  # the excess is far below 1 nat
    assert kl_test(noise, noise).p_value == 1.0


def test_every_noise_run_is_its_own_draw_never_averaged_into_one_floor() -> None:
    """A noise run that moved as far as the candidate puts the candidate within the floor,
    however calm the other noise run is."""
    base = [record(str(i), lp(["x"] * 4, [SURE] * 4)) for i in range(12)]
    moved = lp(["x"] * 4, [[("x", math.log(0.8)), ("y", math.log(0.1))]] * 4)
    cand = per_item([(b, record(b.item_id, moved)) for b in base])
    still = per_item([(b, b) for b in base])
    test = kl_test(cand, still, cand)
    assert test.items == 12 and test.noise_kl == pytest.approx(test.candidate_kl / 2)
    assert test.p_value > 0.3 and test.noise_runs == 2
    assert kl_test(cand, still, still).p_value < 0.001  # two calm noise runs: far above
    assert kl_test(cand, still, cand[:5]).items == 5  # the items every noise run compared


def test_items_without_log_probabilities_are_left_out() -> None:
    class Pair:
        def __init__(self, a: ItemRecord, b: ItemRecord) -> None:
            self.base, self.other, self.key = a, b, a.key

    with_lp = record("1", lp(["x"], [SURE]))
    tasks = task_divergences([Pair(with_lp, with_lp), Pair(record("2", None), with_lp)])
    assert len(tasks) == 1 and tasks[0].candidate.items == 1 and tasks[0].test is None
    assert task_divergences([Pair(record("2", None), record("2", None))]) == []
