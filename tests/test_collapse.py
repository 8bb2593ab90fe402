"""Collapse (truncated, empty, runaway, repetitive answers), reasoning answers, the noise
floor's statistics, and the sentences that must not confuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kveval.formats.records import ItemRecord
from kveval.judge.collapse import collapse_of, repetition
from kveval.show.words import points
from tests.clirun import kveval
from tests.test_cli_verdicts import fingerprint, header, write


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
    code, out, _ = kveval(capsys, *args)
    assert code == 1, out
    assert ("gsm8k empty: b has 8 of 100 answers empty; the baseline had 0; their spread "
            "not measured") in out
    assert "more than the floor shown at alpha 0.05" in out
    assert "overlap + empty" in out and "gate: REGRESSION in gsm8k (empty)" in out
    data = json.loads(kveval(capsys, *args + ["--json"])[1])
    task = data["tasks"][0]
    assert task["failed"] == ["empty"] and task["status"] == "regression"
    assert set(task["drift"]["collapse"]) >= {"truncated", "empty", "length_ratio", "repetition"}
    assert task["drift"]["collapse"]["empty"] == 8 and task["collapse"]["empty"] == 8
    assert task["collapse"]["empty_test"]["shown"] is True
    assert task["collapse"]["truncated_test"]["shown"] is False
    truncated = next(c for c in task["checks"] if c["kind"] == "truncated")
    assert not truncated["testable"]  # nothing cut in any run: it could not show anything


def test_gate_judges_collapse_against_the_noise_floor(collapsing, tmp_path, capsys):
    noisy = write(tmp_path / "m.jsonl", header("m"),
                  [answer(i, "" if i % 10 == 0 else f"The answer is {i}.") for i in range(100)])
    code, out, _ = kveval(capsys, "gate", "--baseline", collapsing["a"], "--candidate",
                           collapsing["b"], "--noise", noisy)
    assert code == 0, out  # the noise run is as empty as the candidate
    code, _, _ = kveval(capsys, "gate", "--baseline", collapsing["a"], "--candidate",
                        collapsing["b"], "--noise", collapsing["n"])
    assert code == 1


def test_compare_and_score_report_collapse_per_task(collapsing, capsys):
    code, out, _ = kveval(capsys, "compare", collapsing["a"], collapsing["b"], "--show", "1")
    assert code == 0
    assert "truncated" in out and "8 (8.0%)" in out and "word 4-grams" in out
    assert "(empty)" in out  # --show prints an empty answer as (empty), not a blank column
    data = json.loads(kveval(capsys, "compare", collapsing["a"], collapsing["b"], "--json")[1])
    collapse = data["tasks"][0]["collapse"]
    assert (collapse["empty"], collapse["truncated"]) == (8, 0)
    assert collapse["length_ratio"] == pytest.approx(
        sum(len(f"The answer is {i}.") for i in range(8, 100))
        / sum(len(f"The answer is {i}.") for i in range(100)))
    data = json.loads(kveval(capsys, "score", collapsing["b"], "--baseline", collapsing["a"],
                             "--json")[1])
    assert data["tasks"][0]["collapse"]["empty"] == 8
    assert data["tasks"][0]["collapse"]["length_ratio"] < 1


def test_null_answers_cut_by_a_reasoning_budget_are_truncated_not_identical(tmp_path, capsys):
    base = [answer(i, None, "length", correct=False, reasoning=f"think {i}") for i in range(20)]
    cand = [answer(i, None, "length", correct=False, reasoning=f"think {i}" + ("!" if i < 5
                                                                              else ""))
            for i in range(20)]
    a = write(tmp_path / "a.jsonl", header("a"), base)
    b = write(tmp_path / "b.jsonl", header("b", fingerprint=fingerprint("fp8")), cand)
    data = json.loads(kveval(capsys, "compare", a, b, "--json")[1])
    task = data["tasks"][0]
    assert task["candidate"]["identical"] == 0  # null answers never count as identical
    assert task["collapse"]["truncated"] == 20 and task["collapse"]["empty"] == 0
    assert task["reasoning"]["changed"] == 5 and task["reasoning"]["pairs"] == 20
    code, out, _ = kveval(capsys, "compare", a, b)
    assert "reasoning (compared apart from the answer): b changed 5 of 20" in out


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
    code, out, _ = kveval(capsys, "gate", "--baseline", a, "--candidate", b)
    assert code == 0
    assert "gsm8k: b changed 20 of 200 answers ( 10.0%); no noise run to compare with" \
        not in out
    assert "flexible" not in out
    code, out, _ = kveval(capsys, "score", b, "--baseline", a)
    assert "flexible" not in out


def test_compare_prints_the_adjusted_p_of_the_gate_for_each_drift_check(tmp_path, capsys):
    def run(label: str, seed: int, own: dict[str, int]) -> str:
        items = []
        for task in ("t1", "t2"):
            chosen = {(seed * 37 + 11 * i) % 300 for i in range(own[task])}
            items += [ItemRecord(task=task, item_id=f"{task}{i}", prompt_sha256=f"{task}{i}",
                                 request={}, status="ok",
                                 output=f"{task} {i}" + (f" {seed}" if i in chosen else ""))
                      for i in range(300)]
        return write(tmp_path / f"{label}.jsonl", header(label), items)

    a = run("a", 0, {"t1": 12, "t2": 12})
    noise = [run(f"n{k}", k, {"t1": c, "t2": c}) for k, c in ((1, 10), (2, 15), (3, 12))]
    cand = run("c", 5, {"t1": 40, "t2": 30})
    floor = [x for n in noise for x in ("--noise", n)]
    compared = json.loads(kveval(capsys, "compare", a, cand, *floor, "--json")[1])
    gated = json.loads(kveval(capsys, "gate", "--baseline", a, "--candidate", cand, *floor,
                              "--json")[1])
    assert compared["checks"] == gated["checks"]
    tests = [t["drift_test"] for t in compared["tasks"]]
    assert all(t["spread_measured"] and len(t["pool"]) == 3 for t in tests)
    drift = [c for c in compared["checks"] if c["kind"] == "drift"]
    assert [c["adjusted_p"] for c in drift] == [t["adjusted_p"] for t in tests]
    assert all(c["adjusted_p"] >= c["p_value"] for c in drift)


def test_collapse_against_the_spread_of_several_noise_runs(tmp_path, capsys):
    def run(label: str, empties: int, offset: int) -> str:
        items = [answer(i, "" if (i + offset) % 200 < empties else f"The answer is {i}.")
                 for i in range(200)]
        return write(tmp_path / f"{label}.jsonl", header(label), items)

    a = run("a", 6, 0)
    floor = [x for label, k in (("n1", 8), ("n2", 10)) for x in ("--noise", run(label, k, 50))]
    like = run("like", 9, 100)
    worse = run("worse", 60, 150)
    code, out, _ = kveval(capsys, "gate", "--baseline", a, "--candidate", like, *floor)
    assert code == 0, out
    code, out, _ = kveval(capsys, "gate", "--baseline", a, "--candidate", worse, *floor)
    assert code == 1 and "gate: REGRESSION in gsm8k (empty)" in out, out
