"""Collapse (truncated, empty, runaway, repetitive answers), reasoning answers, the noise
floor's statistics, and the sentences that must not confuse."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kveval.formats.records import ItemRecord
from kveval.judge.collapse import collapse_of, repetition
from kveval.judge.floor import holm, spread_test
from kveval.show.words import points
from tests.test_cli_verdicts import fingerprint, header, kveval, write


def answer(i: int, output: str | None, finish: str = "stop", correct: bool | None = True,
           reasoning: str | None = None, task: str = "gsm8k") -> ItemRecord:
    return ItemRecord(task=task, item_id=f"{task}/{i}", prompt_sha256=f"s{i}", request={},
                      status="ok", output=output, finish_reason=finish, correct=correct,
                      reasoning=reasoning)


def plain(n: int, task: str = "gsm8k") -> list[ItemRecord]:
    return [answer(i, f"The answer is {i}.", task=task) for i in range(n)]


# ---------------------------------------------------------------- figures


def test_repetition_is_the_share_of_repeated_4grams():
    assert repetition("one two three four five six") == 0.0
    # 8 words, 5 four-grams, of which "a b c d" appears twice: 1 - 4/5
    assert repetition("a b c d a b c d") == pytest.approx(0.2)
    assert repetition("? ? ? ? ? ? ? ? ? ? ? ?") == pytest.approx(1 - 1 / 9)
    assert repetition("one two three") == 0.0 and repetition("") == 0.0


def test_collapse_counts_truncated_empty_and_null_answers():
    items = [answer(0, "fine"), answer(1, ""), answer(2, "   "), answer(3, "cut", "length"),
             answer(4, None, "length")]
    c = collapse_of(items)
    assert (c.answers, c.truncated, c.empty, c.collapsed) == (5, 2, 2, 4)


# ---------------------------------------------------------------- gate and compare


@pytest.fixture
def collapsing(tmp_path: Path) -> dict[str, str]:
    base = plain(100)
    # the candidate: 8 empty answers, all on items it still scores right (accuracy unchanged)
    cand = [answer(i, "" if i < 8 else f"The answer is {i}.") for i in range(100)]
    return {"a": write(tmp_path / "a.jsonl", header("a"), base),
            "b": write(tmp_path / "b.jsonl", header("b", fingerprint=fingerprint("fp8")), cand),
            "n": write(tmp_path / "n.jsonl", header("n"), base)}


def test_gate_fails_a_collapsing_candidate_without_noise(collapsing, capsys):
    args = ["gate", "--baseline", collapsing["a"], "--candidate", collapsing["b"]]
    code, out, _ = kveval(args, capsys)
    assert code == 1, out
    assert "gsm8k collapse: b has 8 of 100 answers truncated or empty, the baseline's (a) 0" in out
    assert "COLLAPSE" in out and "gate: REGRESSION in gsm8k" in out
    data = json.loads(kveval(args + ["--json"], capsys)[1])
    task = data["tasks"][0]
    assert task["collapsed"] and task["status"] == "regression"
    assert set(task["drift"]["collapse"]) >= {"truncated", "empty", "length_ratio", "repetition"}
    assert task["drift"]["collapse"]["empty"] == 8 and task["collapse"]["empty"] == 8


def test_gate_judges_collapse_against_the_noise_floor(collapsing, tmp_path, capsys):
    noisy = write(tmp_path / "m.jsonl", header("m"),
                  [answer(i, "" if i % 10 == 0 else f"The answer is {i}.") for i in range(100)])
    code, out, _ = kveval(["gate", "--baseline", collapsing["a"], "--candidate",
                           collapsing["b"], "--noise", noisy], capsys)
    assert code == 0, out  # the noise run is as empty as the candidate
    code, _, _ = kveval(["gate", "--baseline", collapsing["a"], "--candidate", collapsing["b"],
                         "--noise", collapsing["n"]], capsys)
    assert code == 1


def test_compare_and_score_report_collapse_per_task(collapsing, capsys):
    code, out, _ = kveval(["compare", collapsing["a"], collapsing["b"], "--show", "1"], capsys)
    assert code == 0
    assert "truncated" in out and "8 (8.0%)" in out and "word 4-grams" in out
    assert "(empty)" in out  # --show prints an empty answer as (empty), not a blank column
    data = json.loads(kveval(["compare", collapsing["a"], collapsing["b"], "--json"], capsys)[1])
    collapse = data["tasks"][0]["collapse"]
    assert (collapse["empty"], collapse["truncated"]) == (8, 0)
    assert collapse["length_ratio"] == pytest.approx(
        sum(len(f"The answer is {i}.") for i in range(8, 100))
        / sum(len(f"The answer is {i}.") for i in range(100)))
    data = json.loads(kveval(["score", collapsing["b"], "--baseline", collapsing["a"], "--json"],
                             capsys)[1])
    assert data["tasks"][0]["collapse"]["empty"] == 8
    assert data["tasks"][0]["collapse"]["length_ratio"] < 1


def test_null_answers_cut_by_a_reasoning_budget_are_truncated_not_identical(tmp_path, capsys):
    base = [answer(i, None, "length", correct=False, reasoning=f"think {i}") for i in range(20)]
    cand = [answer(i, None, "length", correct=False, reasoning=f"think {i}" + ("!" if i < 5
                                                                              else ""))
            for i in range(20)]
    a = write(tmp_path / "a.jsonl", header("a"), base)
    b = write(tmp_path / "b.jsonl", header("b", fingerprint=fingerprint("fp8")), cand)
    data = json.loads(kveval(["compare", a, b, "--json"], capsys)[1])
    task = data["tasks"][0]
    assert task["candidate"]["identical"] == 0  # null answers never count as identical
    assert task["collapse"]["truncated"] == 20 and task["collapse"]["empty"] == 0
    assert task["reasoning"]["changed"] == 5 and task["reasoning"]["pairs"] == 20
    code, out, _ = kveval(["compare", a, b], capsys)
    assert "reasoning (compared apart from the answer): b changed 5 of 20" in out


# ---------------------------------------------------------------- statistics


def test_spread_test_passes_a_count_like_the_noise_and_fails_a_far_one():
    assert not spread_test(26, [20, 28, 24], 300, [30, 35, 33]).exceeds
    far = spread_test(150, [20, 28, 24], 300, [30, 35, 33])
    assert far.exceeds and far.p_value < 0.01 and 28 < far.limit < 150
    # every noise run changed nothing: one changed answer is not evidence
    assert not spread_test(1, [0, 0, 0], 168, [0, 0, 0]).exceeds
    with pytest.raises(ValueError):
        spread_test(3, [1], 100)


def test_spread_test_matches_the_prediction_interval_formula():
    from scipy.stats import t

    noise, n = [40, 60, 50], 500
    ys = [math.log((x + 0.5) / (n - x + 0.5)) for x in noise]
    mean = sum(ys) / 3
    sd = math.sqrt(sum((y - mean) ** 2 for y in ys) / 2)
    y_c = math.log(100.5 / 400.5)
    expected = t.sf((y_c - mean) / (sd * math.sqrt(1 + 1 / 3)), df=2)
    assert spread_test(100, noise, n, [10, 10, 10]).p_value == pytest.approx(expected, rel=1e-9)


def test_holm_adjusts_step_down():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5]
    assert holm([]) == []


# ---------------------------------------------------------------- say it plainly


def test_points_beside_a_margin_never_round_onto_it():
    assert points(0.0296, 3.0) == "2.96"
    assert points(0.03004, 3.0) == "3.004"
    assert points(0.025, 3.0) == "2.5"
    assert points(0.0296) == "3.0"


def test_gsm8k_drift_is_labelled_information_and_needle_rows_say_no_metric(tmp_path, capsys):
    items = plain(200) + [answer(i, f"needle {i}", task="needle") for i in range(200)]
    changed = [answer(i, f"The answer is {i}!") if i < 20 else item
               for i, item in enumerate(items)]
    a = write(tmp_path / "a.jsonl", header("a"), items)
    b = write(tmp_path / "b.jsonl", header("b", fingerprint=fingerprint("fp8")), changed)
    code, out, _ = kveval(["gate", "--baseline", a, "--candidate", b], capsys)
    assert code == 0
    assert "gsm8k: drift, not judged: gsm8k is judged by accuracy; b changed 20 of 200" in out
    assert "flexible" not in out
    code, out, _ = kveval(["score", b, "--baseline", a], capsys)
    assert "flexible" not in out


def test_compare_holm_adjusts_the_spread_tests_across_tasks(tmp_path, capsys):
    def run(label: str, changed: dict[str, int]) -> str:
        items = [ItemRecord(task=task, item_id=f"{task}{i}", prompt_sha256=f"{task}{i}",
                            request={}, status="ok",
                            output=f"{task} {i}" + ("!" if i < changed.get(task, 0) else ""))
                 for task in ("t1", "t2") for i in range(300)]
        return write(tmp_path / f"{label}.jsonl", header(label), items)

    a = run("a", {})
    noise = [run(f"n{k}", {"t1": c, "t2": c}) for k, c in enumerate((20, 28, 24))]
    cand = run("c", {"t1": 60, "t2": 40})
    args = ["compare", a, cand, *(x for n in noise for x in ("--noise", n)), "--json"]
    tests = [t["spread_test"] for t in json.loads(kveval(args, capsys)[1])["tasks"]]
    low, high = sorted(t["p_value"] for t in tests)
    assert sorted(t["adjusted_p"] for t in tests) == pytest.approx([2 * low, max(2 * low, high)])
