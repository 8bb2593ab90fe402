"""Pairing, drift figures and the noise-floor test, on in-memory runs."""

from __future__ import annotations

import pytest

from kveval.errors import IncomparableError, UsageError
from kveval.formats.records import ItemRecord
from kveval.judge.compare import (
    ANSWERS_TASK,
    Pair,
    Side,
    check_same_format,
    compare_sides,
    drift,
    pair_sides,
    prefix_ratio,
    shared_prefix_length,
    side_from_answers,
)


def item(item_id: str, output: str | None = "answer", task: str = "gsm8k", status: str = "ok",
         sha: str | None = None) -> ItemRecord:
    return ItemRecord(task=task, item_id=item_id, prompt_sha256=sha or f"sha-{item_id}",
                      request={}, status=status, output=output)


def side(label: str, items: list[ItemRecord]) -> Side:
    return Side(label=label, path=f"{label}.jsonl", items=tuple(items))


def texts(label: str, outputs: list[str], task: str = "gsm8k") -> Side:
    return side(label, [item(str(i), text, task) for i, text in enumerate(outputs)])


@pytest.mark.parametrize(
    ("a", "b", "ratio"),
    [("abc", "abd", 2 / 3), ("abc", "abcdef", 0.5), ("same", "same", 1.0), ("", "", 1.0),
     ("x", "", 0.0), ("héllo wörld", "héllo world", 7 / 11)],
)
def test_prefix_ratio_is_common_prefix_over_the_longer_text(a, b, ratio):
    assert prefix_ratio(a, b) == pytest.approx(ratio)
    assert prefix_ratio(b, a) == pytest.approx(ratio)


def test_shared_prefix_length_counts_characters():
    assert shared_prefix_length("The answer is 42", "The answer is 43") == 15


def test_pair_properties():
    pair = Pair.of(item("1", "The answer is 42"), item("1", "The answer is 43"))
    assert not pair.identical
    assert pair.first_difference == 15
    same = Pair.of(item("1", "x"), item("1", "x"))
    assert same.identical and same.first_difference is None
    missing = Pair.of(item("1", None), item("1", ""))  # no answer text is never identical
    assert not missing.identical and missing.prefix_ratio == 0.0
    both_null = Pair.of(item("1", None), item("1", None))
    assert not both_null.identical


def test_pairing_by_task_and_item_id_in_any_order():
    base = side("a", [item("1"), item("2"), item("3"), item("4", status="error")])
    other = side("b", [item("4"), item("2"), item("1"), item("9")])
    pairing = pair_sides(base, other)
    assert [p.key for p in pairing.pairs] == [("gsm8k", "1"), ("gsm8k", "2")]
    assert (pairing.only_base, pairing.only_other, pairing.with_errors) == (1, 1, 1)


def test_same_item_id_in_another_task_is_not_a_pair():
    pairing = pair_sides(side("a", [item("1", task="gsm8k")]), side("b", [item("1", task="x")]))
    assert pairing.pairs == ()


def test_different_prompts_make_runs_incomparable():
    base = side("a", [item("1", sha="aaa"), item("2")])
    other = side("b", [item("1", sha="bbb"), item("2")])
    with pytest.raises(IncomparableError, match="prompt"):
        pair_sides(base, other)


def test_drift_figures():
    base = texts("a", ["The answer is 42", "same", "abcdefgh", "abcd"])
    cand = texts("b", ["The answer is 43", "same", "abcdxxxx", "abcd"])
    result = drift(pair_sides(base, cand).pairs)
    assert (result.pairs, result.identical, result.changed) == (4, 2, 2)
    assert result.mean_prefix_ratio == pytest.approx((15 / 16 + 1 + 0.5 + 1) / 4)
    assert result.median_first_difference == pytest.approx((15 + 4) / 2)


def test_drift_without_changes_has_no_first_difference():
    base = texts("a", ["x", "y"])
    result = drift(pair_sides(base, texts("b", ["x", "y"])).pairs)
    assert result.identical == 2 and result.median_first_difference is None
    assert drift([]).mean_prefix_ratio is None


def runs_with_changes(n: int, cand_changed: set[int], noise_changed: set[int]):
    base = texts("a", [f"answer {i}" for i in range(n)])
    cand = texts("b", [f"answer {i}" + ("!" if i in cand_changed else "") for i in range(n)])
    noise = texts("n", [f"answer {i}" + ("?" if i in noise_changed else "") for i in range(n)])
    return base, cand, noise


def changed(base: Side, cand: Side, noise: Side):
    test = compare_sides(base, cand, noise).tasks[0].changed
    assert test is not None
    return test


def test_one_noise_run_tests_changes_item_by_item_as_exact_mcnemar():
    from kveval.judge.stats import mcnemar_greater

    base, cand, noise = runs_with_changes(500, set(range(37)), set(range(30, 42)))
    test = changed(base, cand, noise)
    assert (test.items, test.candidate, test.pool) == (500, 37, (12,))
    assert test.exact_p == pytest.approx(mcnemar_greater(30, 5))  # 30 only in b, 5 only in n
    assert test.p_value == max(test.exact_p, test.spread_p) < 0.05  # shown as the only check
    assert test.spread is not None and test.spread.runs == 2  # the baseline's and n's shares


def test_changes_like_the_noise_runs_are_within_the_floor():
    base, cand, noise = runs_with_changes(500, set(range(12)), set(range(100, 110)))
    assert changed(base, cand, noise).p_value > 0.3


def test_less_drift_than_the_noise_run_is_never_a_regression():
    base, cand, noise = runs_with_changes(500, set(), set(range(40)))
    assert changed(base, cand, noise).p_value == 1.0


def test_no_change_anywhere_cannot_show_anything():
    base, cand, noise = runs_with_changes(50, set(), set())
    test = changed(base, cand, noise)
    assert test.p_value == 1.0 and test.min_p == 1.0


def test_compare_sides_by_task_with_noise_and_most_diverged():
    base = side("a", [item("1", "abcdef"), item("2", "abcdef"), item("p", "hello", task="chat")])
    cand = side("b", [item("1", "abcxxx"), item("2", "xbcdef"), item("p", "hello", task="chat")])
    noise = side("n", [item("1", "abcdef"), item("2", "abcdef"), item("p", "hello", task="chat")])
    result = compare_sides(base, cand, show=1, noises=[noise])
    assert [t.task for t in result.tasks] == ["gsm8k", "chat"]
    gsm8k = result.tasks[0]
    assert gsm8k.candidate.changed == 2
    assert gsm8k.noise is not None and gsm8k.noise.changed == 0
    assert gsm8k.changed is not None and gsm8k.changed.candidate == 2
    assert [p.key[1] for p in gsm8k.diverged] == ["2"]
    assert result.tasks[1].diverged == ()


def test_compare_without_noise_has_no_test():
    result = compare_sides(texts("a", ["x"]), texts("b", ["y"]))
    assert result.tasks[0].noise is None and result.tasks[0].changed is None


def test_compare_needs_paired_items():
    with pytest.raises(IncomparableError, match="no paired items"):
        compare_sides(texts("a", ["x"], task="t1"), texts("b", ["x"], task="t2"))
    with pytest.raises(IncomparableError, match="no paired items"):
        compare_sides(texts("a", ["x"]), texts("b", ["x"]), texts("n", ["x"], task="t2"))


def test_errors_are_left_out_of_pairs():
    base = side("a", [item("1", status="error", output=None), item("2")])
    other = side("b", [item("1"), item("2")])
    result = compare_sides(base, other)
    assert result.pairing.with_errors == 1
    assert result.tasks[0].candidate.pairs == 1
    assert base.errors == 1


def test_answer_arrays_pair_by_position():
    a = side_from_answers("results/outputs_bf16a.json", ["one", "two", "three"])
    b = side_from_answers("results/outputs_fp8.json", ["one", "too", "three", "four"])
    assert a.label == "outputs_bf16a" and a.is_answer_array
    assert [i.item_id for i in a.items] == ["0", "1", "2"]
    result = compare_sides(a, b)
    assert result.tasks[0].task == ANSWERS_TASK
    assert result.tasks[0].candidate.identical == 2
    assert result.pairing.only_other == 1


def test_arrays_do_not_mix_with_run_files():
    array = side_from_answers("a.json", ["x"])
    run = texts("b", ["x"])
    with pytest.raises(UsageError, match="JSON array"):
        check_same_format([array, run])
    check_same_format([array, side_from_answers("c.json", ["y"])])
