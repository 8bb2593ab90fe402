"""lm-eval logs of the wrong shape: one line and exit 2 naming the file, never an
AttributeError, TypeError or RecursionError, and never a missing answer read as an empty one."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.clirun import kveval

V13 = Path(__file__).parent / "fixtures" / "lmeval" / "0.4.13" / "completions-a"


def copied(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    shutil.copytree(V13, folder)
    return folder


def edit_results(folder: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    (results,) = folder.rglob("results_*.json")
    data = json.loads(results.read_text())
    change(data)
    results.write_text(json.dumps(data))
    return folder


def edit_samples(folder: Path, change: Callable[[list[dict[str, Any]]], None]) -> Path:
    (samples,) = folder.rglob("samples_*.jsonl")
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    change(rows)
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def gate(capsys: Any, tmp_path: Path, candidate: Path) -> tuple[int, str, str]:
    return kveval(capsys, "gate", "--baseline", str(copied(tmp_path, "base")),
                  "--candidate", str(candidate))


RESULTS = {
    '"configs": [1, 2]': (lambda d: d.update(configs=[1, 2]), "`configs` is list"),
    '"config": [1]': (lambda d: d.update(config=[1]), "`config` is list"),
    "filter_list: 5": (lambda d: d["configs"]["gsm8k"].update(filter_list=5),
                       "configs.gsm8k.filter_list is int"),
    "a config that is a number": (lambda d: d["configs"].update(gsm8k=3), "`gsm8k` is int"),
    '"n-shot": "five"': (lambda d: d.update({"n-shot": "five"}), "`n-shot` is str"),
    "seed=[1]": (lambda d: d["config"]["model_args"].update(seed=[1]), "expected a number"),
    "a date past 9999": (lambda d: d.update(date=1e300), "unexpected lm-eval results"),
}


@pytest.mark.parametrize("case", list(RESULTS))
def test_results_of_the_wrong_shape_are_one_line(capsys: Any, tmp_path: Path,
                                                 case: str) -> None:
    change, message = RESULTS[case]
    code, out, err = gate(capsys, tmp_path, edit_results(copied(tmp_path, "c"), change))
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err
    assert "results_" in err and message in err, err


def test_deeply_nested_results_and_samples_are_one_line(capsys: Any, tmp_path: Path) -> None:
    folder = copied(tmp_path, "c")
    (results,) = folder.rglob("results_*.json")
    results.write_text('{"configs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, _, err = gate(capsys, tmp_path, folder)
    assert code == 2 and "nested deeper than the cap of 64 levels" in err
    folder = copied(tmp_path, "d")
    (samples,) = folder.rglob("samples_*.jsonl")
    samples.write_text('{"doc_id": 0, "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    code, _, err = kveval(capsys, "score", str(samples))
    assert code == 2 and ".jsonl:1: nested deeper than the cap" in err


def test_samples_without_resps_are_an_error_not_empty_answers(capsys: Any,
                                                               tmp_path: Path) -> None:
    def drop(rows: list[dict[str, Any]]) -> None:
        for row in rows:
            row.pop("resps")

    code, out, err = gate(capsys, tmp_path, edit_samples(copied(tmp_path, "c"), drop))
    assert code == 2 and "REGRESSION" not in out
    assert "sample 1 (doc_id 0) holds no response (`resps`)" in err


@pytest.mark.parametrize("empty", [[], [[]], [[None]], None])
def test_resps_that_hold_no_response_are_an_error_not_empty_answers(
        capsys: Any, tmp_path: Path, empty: Any) -> None:
    """Read as empty answers, they were a REGRESSION (exit 1) of the collapse check."""
    def blank(rows: list[dict[str, Any]]) -> None:
        for row in rows:
            row["resps"] = empty

    code, out, err = gate(capsys, tmp_path, edit_samples(copied(tmp_path, "c"), blank))
    assert code == 2 and "REGRESSION" not in out and err.count("\n") == 1, out + err
    assert "sample 1 (doc_id 0) holds no response (`resps`)" in err


def test_an_empty_string_response_is_an_empty_answer(capsys: Any, tmp_path: Path) -> None:
    """`[[""]]` is a response: the model answered nothing, and the run is judged."""
    def blank(rows: list[dict[str, Any]]) -> None:
        for row in rows:
            row["resps"] = [[""]]

    code, out, err = gate(capsys, tmp_path, edit_samples(copied(tmp_path, "c"), blank))
    assert code == 1 and "REGRESSION" in out, out + err


def test_a_second_line_with_another_response_is_an_error_naming_it(capsys: Any,
                                                                    tmp_path: Path) -> None:
    def again(rows: list[dict[str, Any]]) -> None:
        extra = copy.deepcopy(rows[3])
        extra["resps"] = [["another answer entirely"]]
        rows.append(extra)

    code, out, err = gate(capsys, tmp_path, edit_samples(copied(tmp_path, "c"), again))
    assert code == 2 and "sample 41: doc_id 3 appears again with another response" in err


def test_a_line_repeated_exactly_is_read_once(capsys: Any, tmp_path: Path) -> None:
    """A log concatenated twice (a rerun of one rank) holds the same answers: no change."""
    code, out, err = gate(capsys, tmp_path, edit_samples(copied(tmp_path, "c"),
                                                         lambda rows: rows.extend(rows[:5])))
    assert code == 0, err
