"""`kveval compare`, `score` and `gate` as a user (or a CI job) sees them: output and exit codes."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from kveval.cli.cli import cli
from kveval.formats.records import ItemRecord, RunHeader
from kveval.judge.verdict import DEFAULT_MARGIN
from tests.clirun import kveval
from tests.report_fixtures import write

TASKS = [
    {"name": "gsm8k", "adapter": "gsm8k", "api": "completions", "max_tokens": 256, "stop": [],
     "temperature": 0.0, "limit": None, "params": {}},
    {"name": "prompts", "adapter": "prompts", "api": "chat", "max_tokens": 128, "stop": [],
     "temperature": 0.0, "limit": None, "params": {}},
]


def fingerprint(cache_dtype: str) -> dict[str, Any]:
    return {"models": [{"id": "qwen3-8b"}],
            "metrics": {"cache_config_info": {"cache_dtype": cache_dtype}}}


def header(label: str, **changes: Any) -> RunHeader:
    fields: dict[str, Any] = dict(
        label=label, endpoint="http://127.0.0.1:8000/v1", model="qwen3-8b",
        tasks=copy.deepcopy(TASKS), sampling={"temperature": 0.0, "seed": 0, "extra_body": None},
        concurrency=8, fingerprint=fingerprint("auto"), created="2025-06-01T00:00:00Z",
        kveval_version="0.1.0",
    )
    fields.update(changes)
    return RunHeader(**fields)


def gsm8k_items(n: int, wrong: set[int], changed: set[int] = frozenset(),
                errors: set[int] = frozenset()) -> list[ItemRecord]:
    return [
        ItemRecord(task="gsm8k", item_id=f"gsm8k/test/{i:04d}", prompt_sha256=f"sha{i}",
                   request={}, status="error" if i in errors else "ok",
                   output=None if i in errors else f"So the answer is {i}" + (
                       " (recomputed)" if i in changed else ""),
                   correct=None if i in errors else i not in wrong,
                   correct_strict=None if i in errors else (i not in wrong and i % 10 != 0),
                   error="timeout" if i in errors else None)
        for i in range(n)
    ]


def prompt_items(n: int, changed: set[int]) -> list[ItemRecord]:
    return [ItemRecord(task="prompts", item_id=f"p{i}", prompt_sha256=f"p{i}", request={},
                       status="ok", output=f"reply {i}" + ("!" if i in changed else ""))
            for i in range(n)]


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, str]:
    """bf16a and bf16b: the same setup twice; fp8 and fp8bad: candidates."""
    fp8 = fingerprint("fp8")
    return {
        "bf16a": write(tmp_path / "bf16a.jsonl", header("bf16a"),
                       gsm8k_items(500, set(range(41))) + prompt_items(60, set())),
        "bf16b": write(tmp_path / "bf16b.jsonl", header("bf16b"),
                       gsm8k_items(500, set(range(3, 47)), changed=set(range(50)))
                       + prompt_items(60, {1, 2})),
        "fp8": write(tmp_path / "fp8.jsonl", header("fp8", fingerprint=fp8),
                     gsm8k_items(500, set(range(6, 53)), changed=set(range(80)))
                     + prompt_items(60, {1, 3})),
        "fp8bad": write(tmp_path / "fp8bad.jsonl", header("fp8bad", fingerprint=fp8),
                        gsm8k_items(500, set(range(100)), changed=set(range(120)))
                        + prompt_items(60, set(range(30)))),
    }


def gate_args(runs: dict[str, str], candidate: str = "fp8", *extra: str) -> list[str]:
    return ["gate", "--baseline", runs["bf16a"], "--candidate", runs[candidate], *extra]


# ---------------------------------------------------------------- gate exit codes


def test_gate_pass_exits_0(runs, capsys):
    code, out, _ = kveval(capsys, *gate_args(runs, "fp8", "--noise", runs["bf16b"]))
    assert code == 0
    assert "gate: PASS" in out
    assert "metrics.cache_config_info.cache_dtype  auto → fp8" in out
    assert "459/500  91.8%  89.1 to 93.9" in out


def test_gate_regression_exits_1(runs, capsys):
    code, out, _ = kveval(capsys, *gate_args(runs, "fp8bad"))
    assert code == 1
    assert "gate: REGRESSION in gsm8k" in out
    assert "intervals do not overlap: fp8bad is lower" in out


def test_gate_drift_beyond_the_noise_floor_exits_1(runs, capsys):
    code, out, _ = kveval(capsys, *gate_args(runs, "fp8bad", "--noise", runs["bf16b"]))
    assert code == 1
    assert "prompts" in out and "more drift than the noise floor" in out


def test_gate_paired_policy_and_margin(runs, capsys):
    code, out, _ = kveval(capsys, *gate_args(runs, "fp8", "--policy", "paired", "--margin", "5"))
    assert code == 0 and "rules out a loss above 5 points" in out
    code, out, _ = kveval(capsys, *gate_args(runs, "fp8", "--policy", "paired", "--margin", "1"))
    assert code == 2 and "cannot rule out a loss of 1 points: needs about 2,826" in out


def test_gate_strict_metric(runs, capsys):
    code, out, _ = kveval(capsys, *gate_args(runs, "fp8", "--metric", "strict"))
    assert code == 0 and "strict" in out


def assert_cannot_judge(code: int, out: str, err: str, reason: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kveval: error: ")
    assert reason in lines[0]


def test_gate_unreadable_file_exits_2(runs, tmp_path, capsys):
    missing = str(tmp_path / "missing.jsonl")
    code, out, err = kveval(capsys, "gate", "--baseline", runs["bf16a"], "--candidate", missing)
    assert_cannot_judge(code, out, err, "no such run file")
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("not json\n")
    code, out, err = kveval(capsys, "gate", "--baseline", runs["bf16a"], "--candidate",
                            str(garbage))
    assert_cannot_judge(code, out, err, "not a kveval run file")


def test_gate_unknown_schema_version_exits_2(runs, tmp_path, capsys):
    future = tmp_path / "future.jsonl"
    data = asdict(header("future"))
    data["schema_version"] = 99
    future.write_text(json.dumps(data) + "\n")
    code, out, err = kveval(capsys, "gate", "--baseline", runs["bf16a"], "--candidate", str(future))
    assert_cannot_judge(code, out, err, "schema_version 99")


def test_gate_no_paired_items_exits_2(runs, tmp_path, capsys):
    other = write(tmp_path / "other.jsonl", header("other", fingerprint=fingerprint("fp8")),
                  [ItemRecord(task="gsm8k", item_id="train/1", prompt_sha256="x",
                              request={}, status="ok", output="1", correct=True)])
    code, out, err = kveval(capsys, "gate", "--baseline", runs["bf16a"], "--candidate", other)
    assert_cannot_judge(code, out, err, "no paired items")


def test_gate_prompt_mismatch_exits_2(runs, tmp_path, capsys):
    items = gsm8k_items(500, set())
    items[7] = msgspec.structs.replace(items[7], prompt_sha256="different")
    other = write(tmp_path / "other.jsonl", header("other", fingerprint=fingerprint("fp8")),
                  items)
    code, out, err = kveval(capsys, "gate", "--baseline", runs["bf16a"], "--candidate", other)
    assert_cannot_judge(code, out, err, "prompt_sha256 differs")


def test_gate_different_sampling_exits_2(runs, tmp_path, capsys):
    tasks = copy.deepcopy(TASKS)
    tasks[0]["max_tokens"] = 1024
    other = write(tmp_path / "other.jsonl",
                  header("other", fingerprint=fingerprint("fp8"), tasks=tasks),
                  gsm8k_items(500, set()))
    code, out, err = kveval(capsys, "gate", "--baseline", runs["bf16a"], "--candidate", other)
    assert_cannot_judge(code, out, err, "different sampling parameters: task gsm8k max_tokens")


def test_gate_error_rate_exits_2_unless_allowed(runs, tmp_path, capsys):
    other = write(tmp_path / "other.jsonl", header("other", fingerprint=fingerprint("fp8")),
                  gsm8k_items(500, set(range(41)), errors={5, 9}) + prompt_items(60, set()))
    args = ["gate", "--baseline", runs["bf16a"], "--candidate", other]
    code, out, err = kveval(capsys, *args)
    assert_cannot_judge(code, out, err, "2 of 560 items are errors (0.4%)")
    code, out, _ = kveval(capsys, *args + ["--max-error-rate", "0.01"])
    assert code == 0 and "2 left out as errors" in out


def test_gate_nothing_to_judge_exits_2(tmp_path, capsys):
    a = write(tmp_path / "a.jsonl", header("a"), prompt_items(10, set()))
    b = write(tmp_path / "b.jsonl", header("b", fingerprint=fingerprint("fp8")),
              prompt_items(10, {1}))
    code, out, err = kveval(capsys, "gate", "--baseline", a, "--candidate", b)
    assert_cannot_judge(code, out, err, "nothing to judge")


def test_gate_usage_errors_exit_2(runs, capsys):
    code, out, err = kveval(capsys, *gate_args(runs, "fp8", "--margin", "2"))
    assert_cannot_judge(code, out, err, "--margin applies only to --policy paired")
    code, out, err = kveval(capsys, *gate_args(runs, "fp8", "--json", "--markdown"))
    assert_cannot_judge(code, out, err, "choose one of --json and --markdown")
    code, _, _ = kveval(capsys, *gate_args(runs, "fp8", "--policy", "bogus"))
    assert code == 2


def test_gate_reads_no_answer_arrays(runs, tmp_path, capsys):
    array = tmp_path / "outputs_fp8.json"
    array.write_text(json.dumps(["a", "b"]))
    code, out, err = kveval(capsys, "gate", "--baseline", runs["bf16a"], "--candidate", str(array))
    assert_cannot_judge(code, out, err, "JSON array of answers has no scores")


def test_gate_exit_codes_through_the_console_entry_point(runs):
    def exit_code(*args: str) -> int:
        return subprocess.run([sys.executable, "-m", "kveval.cli", *args],
                              capture_output=True, text=True, timeout=60).returncode

    assert exit_code(*gate_args(runs, "fp8")) == 0
    assert exit_code(*gate_args(runs, "fp8bad")) == 1
    assert exit_code("gate", "--baseline", runs["bf16a"], "--candidate", "/nonexistent") == 2


# ---------------------------------------------------------------- JSON and Markdown


def test_gate_json_parses_back(runs, capsys):
    code, out, _ = kveval(capsys, *gate_args(runs, "fp8bad", "--noise", runs["bf16b"], "--json"))
    data = json.loads(out)
    assert code == 1 and data["exit_code"] == 1 and data["verdict"] == "regression"
    tasks = {t["task"]: t for t in data["tasks"]}
    assert tasks["gsm8k"]["passed"] is False and tasks["gsm8k"]["rule"] == "overlap"
    assert tasks["gsm8k"]["accuracy"]["baseline"]["correct"] == 459
    assert tasks["prompts"]["rule"] == "drift"
    assert tasks["prompts"]["drift"]["drift_test"]["shown"] is True
    assert tasks["prompts"]["failed"] == ["drift"]
    assert data["alpha"] == 0.05 and data["family_size"] >= 2
    shown = {(c["task"], c["check"]) for c in data["checks"] if c["shown"]}
    assert {("gsm8k", "accuracy"), ("prompts", "drift")} <= shown
    assert data["setup"]["differences"][0] == {
        "key": "metrics.cache_config_info.cache_dtype", "baseline": "auto", "candidate": "fp8"}


def test_gate_json_reports_cannot_judge(runs, tmp_path, capsys):
    code, out, err = kveval(capsys, "gate", "--baseline", runs["bf16a"], "--candidate",
                             str(tmp_path / "none.jsonl"), "--json")
    assert code == 2
    data = json.loads(out)
    assert data["verdict"] == "cannot judge" and "no such run file" in data["reason"]


def test_gate_markdown(runs, capsys):
    code, out, _ = kveval(capsys, *gate_args(runs, "fp8", "--markdown"))
    assert code == 0
    assert out.startswith("### kveval gate: PASS")
    assert "| task | judged by |" in out


def test_compare_json_parses_back(runs, capsys):
    code, out, _ = kveval(capsys, "compare", runs["bf16a"], runs["fp8"], "--noise", runs["bf16b"],
                           "--show", "2", "--json")
    data = json.loads(out)
    assert code == 0 and data["command"] == "compare"
    gsm8k = data["tasks"][0]
    assert gsm8k["task"] == "gsm8k"
    assert gsm8k["candidate"]["changed"] == 80 and gsm8k["noise"]["changed"] == 50
    assert gsm8k["drift_test"]["candidate"] == 80 and gsm8k["drift_test"]["pool"] == [50]
    assert gsm8k["drift_test"]["adjusted_p"] is None  # gsm8k is judged by accuracy
    assert len(gsm8k["diverged"]) == 2
    assert "fp8 changed 80 of 500 answers; the noise run bf16b changed 50" in gsm8k["summary"]


def test_score_json_parses_back(runs, capsys):
    code, out, _ = kveval(capsys, "score", runs["fp8"], "--baseline", runs["bf16a"], "--json")
    data = json.loads(out)
    assert code == 0
    gsm8k = data["tasks"][0]
    assert gsm8k["flexible"]["correct"] == 453 and gsm8k["strict"]["n"] == 500
    assert gsm8k["extras"] == []
    paired = data["paired"][0]
    assert (paired["lost"], paired["gained"]) == (12, 6)
    assert paired["overlap_verdict"] == "intervals overlap"
    assert paired["loss_shown"] is False and paired["adjusted_p"] >= paired["p_value"] / 2


# ---------------------------------------------------------------- compare and score text


def test_compare_text_in_words(runs, capsys):
    code, out, _ = kveval(capsys, "compare", runs["bf16a"], runs["fp8"], "--noise", runs["bf16b"],
                           "--show", "1")
    assert code == 0
    assert "fp8 changed 80 of 500 answers; the noise run bf16b changed 50" in out
    assert "prefix ratio" in out and "first diff (median)" in out
    assert " | " in out  # the most diverged pair, side by side


def test_compare_tutorial_answer_arrays(tmp_path, capsys):
    paths = {}
    for name, answers in {"bf16a": ["A", "B", "C", "D"], "bf16b": ["A", "B", "C", "D!"],
                          "fp8": ["A", "B?", "C?", "D!"]}.items():
        paths[name] = tmp_path / f"outputs_{name}.json"
        paths[name].write_text(json.dumps(answers))
    code, out, _ = kveval(capsys, "compare", str(paths["bf16a"]), str(paths["fp8"]),
                           "--noise", str(paths["bf16b"]), "--json")
    assert code == 0
    task = json.loads(out)["tasks"][0]
    assert task["task"] == "answers"
    assert (task["candidate"]["identical"], task["noise"]["identical"]) == (1, 3)
    assert json.loads(out)["candidate"]["label"] == "outputs_fp8"


def test_compare_refuses_a_mix_of_arrays_and_run_files(runs, tmp_path, capsys):
    array = tmp_path / "outputs_fp8.json"
    array.write_text(json.dumps(["x"]))
    code, out, err = kveval(capsys, "compare", runs["bf16a"], str(array))
    assert_cannot_judge(code, out, err, "cannot pair a JSON array of answers")


def test_compare_prompt_mismatch_exits_2(runs, tmp_path, capsys):
    items = gsm8k_items(500, set())
    items[0] = msgspec.structs.replace(items[0], prompt_sha256="other")
    other = write(tmp_path / "other.jsonl", header("other"), items)
    code, out, err = kveval(capsys, "compare", runs["bf16a"], other)
    assert_cannot_judge(code, out, err, "prompt_sha256 differs")


def test_score_prints_like_the_published_reports(runs, capsys):
    code, out, _ = kveval(capsys, "score", runs["bf16a"])
    assert code == 0
    assert "gsm8k  flexible  459/500  91.8%  89.1 to 93.9" in out
    assert "prompts: 60 answered, no ground truth; 0 errors" in out


def test_score_with_a_baseline_names_the_largest_loss(runs, capsys):
    code, out, _ = kveval(capsys, "score", runs["fp8"], "--baseline", runs["bf16a"])
    assert code == 0
    assert "intervals overlap" in out
    assert "500 questions cannot rule out a loss of" in out
    assert "a loss beyond a restart's not shown at alpha 0.05 (p = 0." in out
    assert "(95% CI, unadjusted)" in out


def test_score_counts_errors_apart(tmp_path, capsys):
    path = write(tmp_path / "e.jsonl", header("e"), gsm8k_items(10, {0}, errors={1, 2}))
    code, out, _ = kveval(capsys, "score", path, "--json")
    task = json.loads(out)["tasks"][0]
    assert (task["errors"], task["flexible"]["correct"], task["flexible"]["n"]) == (2, 7, 8)


def test_score_markdown(runs, capsys):
    code, out, _ = kveval(capsys, "score", runs["bf16a"], "--markdown")
    assert out.startswith("### kveval score: bf16a")
    assert r"| gsm8k | flexible | 459/500  91\.8%  89\.1 to 93\.9 | 0 |" in out


# ---------------------------------------------------------------- help and start-up


def test_help_names_the_default_margin():
    result = CliRunner().invoke(cli, ["gate", "--help"])
    assert result.exit_code == 0
    assert f"[default: {DEFAULT_MARGIN:g}]" in result.output


def test_commands_import_no_heavy_modules():
    code = ("import sys, kveval.cli.verdicts; "
            "print(sorted(m for m in ('numpy', 'scipy', 'kveval.judge.stats', "
            "'kveval.judge.verdict') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.strip() == "[]"


def test_score_appends_per_task_extra_sections(runs, capsys, monkeypatch):
    from kveval.show import extras
    from kveval.show.report import Rendered

    def grid(run, baseline):
        assert baseline is not None
        return {"gsm8k": [Rendered("LENGTH x DEPTH", "**length x depth**", {"grid": [1]})]}

    monkeypatch.setattr(extras, "task_extras", grid)
    args = ["score", runs["fp8"], "--baseline", runs["bf16a"]]
    assert "LENGTH x DEPTH" in kveval(capsys, *args)[1]
    assert "**length x depth**" in kveval(capsys, *args + ["--markdown"])[1]
    data = json.loads(kveval(capsys, *args + ["--json"])[1])
    assert data["tasks"][0]["extras"] == [{"grid": [1]}]


def test_score_of_a_restart_is_not_asked_whether_it_is_a_different_setup(
        capsys: Any, runs: dict[str, str], tmp_path: Path) -> None:
    """A restart has the baseline's fingerprint by design: labelled as one (`kveval ab`'s
    noise1), nothing is said; otherwise the words allow that it is one."""
    restart = write(tmp_path / "noise1.jsonl", header("noise1"),
                    gsm8k_items(500, set(range(3, 47))) + prompt_items(60, set()))
    _, out, _ = kveval(capsys, "score", restart, "--baseline", runs["bf16a"])
    assert "fingerprints differs" not in out and "different setup" not in out
    _, out, _ = kveval(capsys, "score", runs["bf16b"], "--baseline", runs["bf16a"])
    assert "nothing in the server fingerprints differs between bf16a and bf16b: a restart of " \
           "the same setup, or a change the server does not tell (state it with --setup " \
           "KEY=VALUE)" in " ".join(out.split())
    assert "really a different setup" not in out
