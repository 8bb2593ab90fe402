"""The long-context grid: accuracy per length, length x depth, change vs baseline, classes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kveval.formats.records import ItemRecord
from kveval.judge import grid


def record(length: int, depth: int, trial: int, correct: bool | None, status: str = "ok",
           task: str = "needle", prompt: str = "p", **meta: Any) -> ItemRecord:
    return ItemRecord(
        task=task, item_id=f"{task}/L{length}/D{depth}/T{trial}", prompt_sha256=prompt,
        request={}, status=status, correct=correct if status == "ok" else None,
        meta={"target_tokens": length, "measured_tokens": length - 10, "depth": depth,
              "trial": trial, "variant": "single", **meta},
    )


def run(pattern: dict[tuple[int, int], list[bool]], task: str = "needle") -> list[ItemRecord]:
    return [record(length, depth, trial, ok, task=task)
            for (length, depth), oks in pattern.items() for trial, ok in enumerate(oks)]


CANDIDATE = {
    (1024, 0): [True, True], (1024, 100): [True, True],
    (4096, 0): [True, False], (4096, 100): [False, False],
}
BASELINE = {
    (1024, 0): [True, True], (1024, 100): [True, True],
    (4096, 0): [True, True], (4096, 100): [True, False],
}


def test_none_for_tasks_without_a_grid() -> None:
    plain = ItemRecord(task="gsm8k", item_id="gsm8k/test/0001", prompt_sha256="x", request={},
                       status="ok", correct=True)
    assert grid.section("gsm8k", [plain]) is None
    assert grid.section("needle", [plain]) is None


def test_accuracy_per_length_with_wilson_interval() -> None:
    section = grid.section("needle", run(CANDIDATE))
    assert section is not None
    assert section["lengths"] == [1024, 4096] and section["depths"] == [0, 100]
    short, long_ = section["per_length"]
    assert (short["n"], short["correct"], short["accuracy"]) == (4, 4, 1.0)
    assert (long_["n"], long_["correct"], long_["accuracy"]) == (4, 1, 0.25)
    assert long_["measured_tokens"] == 4086
    # Wilson 95% for 1/4: [0.0456, 0.6994]
    assert long_["ci"] == pytest.approx([0.04558, 0.69936], abs=1e-4)
    assert short["ci"][1] == pytest.approx(1.0)


def test_length_by_depth_table() -> None:
    section = grid.section("needle", run(CANDIDATE))
    assert section is not None
    cells = {(row["length"], c["depth"]): c["accuracy"] for row in section["table"]
             for c in row["cells"]}
    assert cells == {(1024, 0): 1.0, (1024, 100): 1.0, (4096, 0): 0.5, (4096, 100): 0.0}


def test_error_items_are_counted_apart_not_scored() -> None:
    items = run(CANDIDATE) + [record(4096, 0, 5, None, status="error")]
    section = grid.section("needle", items)
    assert section is not None
    long_ = section["per_length"][1]
    assert (long_["n"], long_["correct"], long_["errors"]) == (4, 1, 1)
    assert section["errors"] == 1
    assert "1 of 9 items failed" in grid.render_text(section)


def test_only_the_named_task() -> None:
    items = run(CANDIDATE) + run({(1024, 0): [False] * 5}, task="needle-multikey")
    section = grid.section("needle", items)
    assert section is not None and section["items"] == 8


def test_change_against_a_baseline_on_paired_items() -> None:
    section = grid.section("needle", run(CANDIDATE), run(BASELINE))
    assert section is not None
    base = section["baseline"]
    assert base["pairs"] == 8 and base["unpaired"] == 0 and base["incomparable"] == 0
    short, long_ = base["per_length"]
    assert short["change_points"] == 0.0
    assert long_["baseline_accuracy"] == 0.75 and long_["accuracy"] == 0.25
    assert long_["change_points"] == pytest.approx(-50.0)
    assert (long_["lost"], long_["gained"]) == (2, 0)
    cells = {(row["length"], c["depth"]): c["change_points"] for row in base["table"]
             for c in row["cells"]}
    assert cells[(4096, 0)] == pytest.approx(-50.0) and cells[(4096, 100)] == pytest.approx(-50.0)
    assert cells[(1024, 0)] == 0.0


def test_pairs_need_the_same_prompt() -> None:
    baseline = run(BASELINE)
    changed = [record(1024, 0, 0, True, prompt="other")] + baseline[1:]
    extra = run(CANDIDATE) + [record(8192, 0, 0, True)]
    section = grid.section("needle", extra, changed)
    assert section is not None
    base = section["baseline"]
    assert (base["pairs"], base["unpaired"], base["incomparable"]) == (7, 1, 1)
    assert "1 items without a partner, 1 with a different prompt" in grid.render_text(section)


def test_evidence_classes_per_length() -> None:
    classes = ["exact", "wrong_record", "corrupted", "corrupted", "no_answer", "exact"]
    distances = [0, 1, 1, 2, None, 0]
    items = [record(1024 if i < 3 else 4096, 0, i, kind == "exact", task="evidence",
                    evidence_class=kind, edit_distance=d)
             for i, (kind, d) in enumerate(zip(classes, distances, strict=True))]
    section = grid.section("evidence", items)
    assert section is not None
    found = section["classes"]
    assert found["field"] == "evidence_class"
    assert found["order"] == ["exact", "wrong_record", "corrupted", "no_answer"]
    short, long_ = found["per_length"]
    assert short["counts"] == {"exact": 1, "wrong_record": 1, "corrupted": 1, "no_answer": 0}
    assert long_["counts"] == {"exact": 1, "wrong_record": 0, "corrupted": 1, "no_answer": 1}
    assert short["corrupted_edit_distance"] == 1.0 and long_["corrupted_edit_distance"] == 2.0
    text = grid.render_text(section)
    assert "evidence: answers by class" in text and "wrong_record" in text


def test_json_ready() -> None:
    section = grid.section("needle", run(CANDIDATE), run(BASELINE))
    assert json.loads(json.dumps(section)) == section


def test_render_text() -> None:
    section = grid.section("needle", run(CANDIDATE), run(BASELINE))
    assert section is not None
    text = grid.render_text(section)
    assert "needle: accuracy by context length (Wilson 95%)" in text
    assert "needle: accuracy % by length x depth" in text
    assert "needle: change in points by length x depth" in text
    lines = text.splitlines()
    row = next(line for line in lines if line.strip().startswith("4k") and "25.0" in line)
    assert "[4.6, 69.9]" in row
    grid_row = [line.split() for line in lines if line.strip().startswith("4k")]
    assert ["4k", "50", "0"] in grid_row and ["4k", "-50", "-50"] in grid_row


def test_render_markdown() -> None:
    section = grid.section("evidence", [record(2048, 50, 0, True, task="evidence",
                                               evidence_class="exact", edit_distance=0)])
    assert section is not None
    markdown = grid.render_markdown(section)
    assert "| length | 50% |" in markdown and "| 2k | 100 |" in markdown
    assert "|---|---:|" in markdown


def test_length_labels() -> None:
    assert [grid.length_label(n) for n in (1024, 1536, 131072, 3000)] == \
        ["1k", "1.5k", "128k", "3000"]


def test_wilson_edges() -> None:
    assert grid.wilson(0, 0) is None
    ci = grid.wilson(0, 10)
    assert ci is not None
    low, high = ci
    assert low == pytest.approx(0.0, abs=1e-12) and high == pytest.approx(0.2775, abs=1e-3)
