"""`kveval run --task needle|evidence` end to end, then `kveval score` with its grid."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fake_server import Behaviour, FakeServer
from test_run_cli import kveval, last_line

from kveval.formats.reader import read_run


def find_needle(body: dict[str, Any]) -> str:
    """Answers the needle right, except at depth 0 where it corrupts the last digit."""
    text = body["messages"][-1]["content"]
    found = re.findall(r"is (\d{7})\.", text)
    if not found:
        return "I do not know."
    value = found[0]
    start = text.find(value)
    return value[:-1] + str((int(value[-1]) + 1) % 10) if start < len(text) * 0.1 else value


@pytest.fixture
def server() -> Any:
    behaviour = Behaviour(answer=find_needle, models=[{"id": "m", "max_model_len": 3000}],
                          tokenize=lambda text: len(text) // 4)
    with FakeServer(behaviour) as fake:
        yield fake


def test_needle_grid_skips_lengths_above_the_context_and_scores_by_cell(
        capsys: Any, server: FakeServer, tmp_path: Path) -> None:
    out = tmp_path / "n.jsonl"
    code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "needle",
                          "--lengths", "1k,2k,4k", "--depths", "0,50,100", "--trials", "2",
                          "-o", str(out))
    assert code == 0, err
    assert "skipped lengths 4096" in err
    run = read_run(out)
    assert len(run.items) == 2 * 3 * 2
    assert {i.meta["target_tokens"] for i in run.items} == {1024, 2048}
    assert "tokens counted by" in (run.header.tasks[0]["data_source"] or "")
    for item in run.items:
        assert abs(item.meta["measured_tokens"] - item.meta["target_tokens"]) <= 0.02 * 2048
    code, text, _ = kveval(capsys, "score", str(out))
    assert code == 0
    assert "8/12" in text
    code, data, _ = kveval(capsys, "score", str(out), "--json")
    grid = json.loads(data)["tasks"][0]["extras"][0]
    cells = {(row["length"], c["depth"]): c["accuracy"] for row in grid["table"]
             for c in row["cells"]}
    assert cells[(1024, 0)] == 0.0 and cells[(1024, 50)] == 1.0 and cells[(2048, 100)] == 1.0


def test_evidence_run_reports_error_classes(capsys: Any, server: FakeServer,
                                            tmp_path: Path) -> None:
    out = tmp_path / "e.jsonl"
    code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "evidence",
                          "--lengths", "1k", "--depths", "50", "--trials", "2", "-o", str(out))
    assert code == 0, err
    classes = {i.meta.get("evidence_class") for i in read_run(out).items}
    assert classes <= {"exact", "wrong_record", "corrupted", "no_answer"} and classes
    code, text, _ = kveval(capsys, "score", str(out))
    assert code == 0 and "wrong_record" in text


def test_bad_lengths_is_one_line_and_exit_2(capsys: Any, server: FakeServer,
                                           tmp_path: Path) -> None:
    code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "needle",
                          "--lengths", "4x", "-o", str(tmp_path / "n.jsonl"))
    assert code == 2 and "4x" in last_line(err)
