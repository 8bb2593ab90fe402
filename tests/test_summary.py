"""The run summary's closed-form Wilson interval agrees with scipy's."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from kveval.formats.records import ItemRecord
from kveval.judge.stats import wilson
from kveval.run.summary import render_run_summary, wilson_closed_form
from tests.clirun import kveval
from tests.report_fixtures import write
from tests.test_cli_verdicts import gsm8k_items, header


def test_closed_form_wilson_matches_scipy_to_1e9() -> None:
    rng = random.Random(3)
    cases = [(0, 1), (1, 1), (0, 500), (500, 500), (459, 500), (1, 1319)]
    sizes = [rng.randint(1, 5000) for _ in range(200)]
    cases += [(rng.randint(0, n), n) for n in sizes]
    for k, n in cases:
        low, high = wilson_closed_form(k, n)
        reference = wilson(k, n)
        assert low == pytest.approx(reference.low, abs=1e-9)
        assert high == pytest.approx(reference.high, abs=1e-9)


def test_summary_counts_errors_apart_and_prints_published_format() -> None:
    items = [ItemRecord(task="gsm8k", item_id=str(i), prompt_sha256="x", request={}, status="ok",
                        correct=i < 459, correct_strict=i < 400) for i in range(500)]
    items.append(ItemRecord(task="gsm8k", item_id="e", prompt_sha256="x", request={},
                            status="error", error="HTTP 503"))
    text = render_run_summary(items, sent=501, wall_s=1.0, path="r.jsonl")
    assert "459/500  91.8%  89.1 to 93.9" in text
    assert "gsm8k                501       1" in text
    assert "strict `#### N`: 400/500" in text


def test_summary_lists_tasks_in_suite_order_whatever_order_answers_came_in() -> None:
    items = [ItemRecord(task=task, item_id=f"{task}{i}", prompt_sha256="x", request={},
                        status="ok", output="a") for i in range(3)
             for task in ("prompts", "needle", "gsm8k")]
    text = render_run_summary(items, sent=9, wall_s=1.0, path="r.jsonl",
                              order=["gsm8k", "unbuilt", "needle", "prompts"])
    rows = [line.split()[0] for line in text.splitlines()[1:-1]]
    assert rows == ["gsm8k", "needle", "prompts"]


def test_a_forced_run_prints_no_accuracy_of_its_own() -> None:
    """A teacher-forced pass holds the baseline's answers: their scores are the baseline's."""
    items = [ItemRecord(task="gsm8k", item_id=str(i), prompt_sha256="x", request={},
                        status="ok", correct=i < 12, correct_strict=i < 12) for i in range(30)]
    text = render_run_summary(items, sent=30, wall_s=1.0, path="q4-forced.jsonl",
                              forced_from="baseline")
    assert "12/30" not in text and "40.0%" not in text and "accuracy" not in text.splitlines()[0]
    assert "30 of baseline's answers, forced" in text
    assert "no accuracy of this server" in text


def test_score_of_a_forced_run_says_whose_answers_it_holds(capsys: Any, tmp_path: Path) -> None:
    forced = {"baseline": "base", "method": "forced_decoding"}
    run = write(tmp_path / "tf.jsonl", header("q4-forced", teacher_force=forced),
                gsm8k_items(30, wrong=set(range(12, 30))))
    code, out, err = kveval(capsys, "score", run)
    assert code == 0, err
    assert "12/30" not in out and "40.0%" not in out
    assert "teacher-forced pass: its 30 answers are base's, forced" in out
