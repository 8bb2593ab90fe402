"""The cases of bench/hostile/inputs.py on lm-eval logs: results and samples files of the
wrong shape, samples without a response or with two, and `model_args` holding a secret.
Each copies tests/fixtures/lmeval's 0.4.13 log and edits the copy."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit import ROOT, Outcome, first_failing, judged, kveval, leaks, read, unsaid_regression

LMEVAL = ROOT / "tests" / "fixtures" / "lmeval" / "0.4.13"
LMEVAL_KEY = "sk-lmeval-secret-2222"



def lmeval_copy(folder: Path, name: str, source: str = "completions-a") -> Path:
    shutil.copytree(LMEVAL / source, folder / name)
    return folder / name


def edit_results(path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    (results,) = path.rglob("results_*.json")
    data = json.loads(results.read_text())
    change(data)
    results.write_text(json.dumps(data))
    return path


def edit_samples(path: Path, change: Callable[[list[dict[str, Any]]], None]) -> Path:
    (samples,) = path.rglob("samples_*.jsonl")
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    change(rows)
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def lmeval_gate(tree: Path, folder: Path, cand: Path) -> Outcome:
    base = lmeval_copy(folder, "base")
    r = kveval(tree, folder, "gate", "--baseline", str(base), "--candidate", str(cand))
    return judged(r, (2,), "REGRESSION said" if "REGRESSION" in r.out else None)


def lmeval_results(change: Callable[[dict[str, Any]], None]) -> Callable[[Path, Path], Outcome]:
    def case(tree: Path, folder: Path) -> Outcome:
        return lmeval_gate(tree, folder, edit_results(lmeval_copy(folder, "c"), change))
    return case


def lmeval_samples(change: Callable[[list[dict[str, Any]]], None]
                   ) -> Callable[[Path, Path], Outcome]:
    def case(tree: Path, folder: Path) -> Outcome:
        return lmeval_gate(tree, folder, edit_samples(lmeval_copy(folder, "c"), change))
    return case


def deep_lmeval(tree: Path, folder: Path) -> Outcome:
    cand = lmeval_copy(folder, "c")
    (results,) = cand.rglob("results_*.json")
    results.write_text('{"configs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return lmeval_gate(tree, folder, cand)


def drop_resps(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        row.pop("resps", None)


def empty_resps(tree: Path, folder: Path) -> Outcome:
    """Samples whose `resps` hold no response: an empty list at some level, or null."""
    outcomes = []
    for i, (name, value) in enumerate((("[]", []), ("[[]]", [[]]), ("[[null]]", [[None]]))):
        def change(rows: list[dict[str, Any]], value: Any = value) -> None:
            for row in rows:
                row["resps"] = value
        (folder / f"v{i}").mkdir()
        outcomes.append((f"resps {name}", lmeval_samples(change)(tree, folder / f"v{i}")))
    return first_failing(outcomes)


def answer_again(rows: list[dict[str, Any]]) -> None:
    rows.append({**rows[3], "resps": [["another answer entirely"]],
                 "filtered_resps": ["another answer entirely"]})


def with_api_key(data: dict[str, Any]) -> None:
    data["config"]["model_args"] = {**data["config"]["model_args"], "api_key": LMEVAL_KEY}


def lmeval_secret(tree: Path, folder: Path) -> Outcome:
    """An lm-eval log whose model_args hold an api_key: the setup diff, --json, the page."""
    a = str(lmeval_copy(folder, "a"))
    b = str(edit_results(lmeval_copy(folder, "b", "completions-b"), with_api_key))
    page = folder / "page.html"
    runs = {"compare": ("compare", a, b), "compare --json": ("compare", a, b, "--json"),
            "report": ("report", "--baseline", a, "--candidate", b, "-o", str(page))}
    outcomes = []
    for name, args in runs.items():
        r = kveval(tree, folder, *args)
        places = {"stdout": r.out, "stderr": r.err, "the page": read(page)}
        outcomes.append((name, judged(r, (0, 1), unsaid_regression(r),
                                      leaks({"the api_key": LMEVAL_KEY}, places))))
    return first_failing(outcomes)


def with_model_args(**args: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["config"]["model_args"] = {**data["config"]["model_args"], **args}
    return change


def lmeval_named(secret: str, **args: Any) -> Callable[[Path, Path], Outcome]:
    """model_args holding a secret under a name other than api_key or *_token: the setup
    diff of gate, gate --markdown and the page."""
    def case(tree: Path, folder: Path) -> Outcome:
        a = str(lmeval_copy(folder, "a"))
        b = str(edit_results(lmeval_copy(folder, "b", "completions-b"), with_model_args(**args)))
        page = folder / "page.html"
        runs = {"gate": ("gate", "--baseline", a, "--candidate", b),
                "gate --markdown": ("gate", "--baseline", a, "--candidate", b, "--markdown"),
                "report": ("report", "--baseline", a, "--candidate", b, "-o", str(page))}
        outcomes = []
        for name, argv in runs.items():
            r = kveval(tree, folder, *argv)
            places = {"stdout": r.out, "stderr": r.err, "the page": read(page)}
            outcomes.append((name, judged(r, (0, 1), unsaid_regression(r),
                                          leaks({"the secret": secret}, places))))
        return first_failing(outcomes)
    return case
