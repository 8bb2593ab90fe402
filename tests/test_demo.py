"""`kveval demo`: its suite (fast) and the whole story at a tiny size, offline (integration)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kveval.cli.demo import MAX_KL, Sizes, suite_toml
from kveval.run import engine_setup
from kveval.run.data import bundled_gsm8k, load_gsm8k
from kveval.run.tasks import load_suite

HAVE_ENGINE = all(importlib.util.find_spec(m) is not None for m in engine_setup.SERVER_MODULES)
HAVE_MODEL = importlib.util.find_spec(engine_setup.BUNDLED_PACKAGE) is not None
LABELS = ("f16-a", "f16-b", "q8_0")
TASKS = {"gsm8k", "prompts", "short-prompts", "context"}


def test_suite_file_loads_and_logprobs_only_where_divergence_needs_them(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(suite_toml(Sizes(), bundled_gsm8k()))
    specs = {spec.name: spec for spec in load_suite(str(suite))}
    assert list(specs) == ["gsm8k", "prompts", "short-prompts", "context"]
    assert {name for name, spec in specs.items() if spec.params.get("logprobs")} == {
        "short-prompts", "context"}  # a document's positions are log-probabilities
    assert specs["context"].limit == 1
    assert max(specs["context"].params["lengths"]) == Sizes().context_tokens
    assert specs["short-prompts"].params["logprobs"] == 5
    short = specs["short-prompts"]
    assert short.adapter == "prompts" and short.max_tokens == Sizes().short_tokens
    assert specs["gsm8k"].limit == Sizes().gsm8k and specs["prompts"].limit == Sizes().prompts
    assert specs["gsm8k"].params["shots"] == Sizes().shots
    assert specs["gsm8k"].data == bundled_gsm8k()


def test_the_suite_names_a_data_folder_with_a_quote_in_its_path(tmp_path: Path) -> None:
    folder = tmp_path / "it's \"here\""
    suite = tmp_path / "suite.toml"
    suite.write_text(suite_toml(Sizes(), str(folder)))
    assert {spec.name: spec.data for spec in load_suite(str(suite))}["gsm8k"] == str(folder)


def test_limit_cuts_every_task(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(suite_toml(Sizes().cut(2), bundled_gsm8k()))
    assert {spec.name: spec.limit for spec in load_suite(str(suite))} == {
        "gsm8k": 2, "prompts": 2, "short-prompts": 2, "context": 1,
    }  # fmt: skip
    assert Sizes().cut(2).items == 7 and Sizes().items == 25


def test_the_bundled_slice_holds_the_demos_questions_and_shots() -> None:
    data = load_gsm8k(bundled_gsm8k())
    assert len(data.test) >= Sizes().gsm8k and len(data.train) >= Sizes().shots


@pytest.mark.parametrize(("sources", "expected"), [
    (("bf16a", "bf16b", "fp8"), 1),  # the candidate lost 13.5 points: a regression
    (("bf16a", "bf16b", "bf16a"), 0),  # the candidate is the baseline: never a regression
])
def test_the_verdict_step_prints_the_gates_own_line_and_exit_code(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sources: tuple[str, ...],
        expected: int) -> None:
    from kveval.cli.demo import explain, steps, verdicts
    from tests.report_fixtures import three_runs

    runs = three_runs(tmp_path / "made")
    for step, source in zip(steps("q8_0"), sources, strict=True):
        (tmp_path / f"{step.label}.jsonl").write_text(Path(runs[source]).read_text())
    code = verdicts(tmp_path, steps("q8_0"), family=())  # these runs have no log-probabilities
    out = capsys.readouterr().out
    again = gate_again(tmp_path, family=())
    summary = [line for line in out.splitlines() if line.startswith("gate: ")]
    assert code == again.returncode == expected
    assert summary == [line for line in again.stdout.splitlines() if line.startswith("gate: ")]
    tail = out.split(f"exit code of kveval gate: {expected}\n")
    assert len(tail) == 2 and tail[1].startswith("gsm8k accuracy: a loss of 5 points ")
    assert tail[1].count("\n") == 1  # then one line of kveval plan
    assert f"Here it exited {expected}." in " ".join(explain("q8_0", code, tmp_path, 1).split())


def offline_env(tmp_path: Path) -> dict[str, str]:
    """No hub (connections refused), an empty hub cache: the demo must not need either."""
    env = {k: v for k, v in os.environ.items() if "PROXY" not in k.upper()}
    return {**env, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf"),
            "HF_HUB_OFFLINE": "1"}


def gate_again(out: Path, family: tuple[str, ...] = ("--max-kl", MAX_KL),
               ) -> subprocess.CompletedProcess[str]:
    a, b, cand = (str(out / f"{label}.jsonl") for label in LABELS)
    return subprocess.run([sys.executable, "-m", "kveval.cli", "gate", "--baseline", a,
                           "--candidate", cand, "--noise", b, *family],
                          capture_output=True, text=True, timeout=300)


def divergence(out: Path) -> dict[str, object]:
    a, b, cand = (str(out / f"{label}.jsonl") for label in LABELS)
    result = subprocess.run([sys.executable, "-m", "kveval.cli", "compare", a, cand, "--noise",
                             b, "--json"], capture_output=True, text=True, timeout=300)
    tasks = {task["task"]: task for task in json.loads(result.stdout)["tasks"]}
    assert tasks["gsm8k"].get("divergence") is None  # no log-probabilities asked there
    return dict(tasks["short-prompts"]["divergence"])


def check_run_files(out: Path) -> None:
    kinds = {}
    for label in LABELS:
        lines = (out / f"{label}.jsonl").read_text().splitlines()
        header = json.loads(lines[0])
        kinds[label] = header["fingerprint"]["engine"]["kv_cache_type"]
        assert header["order"] == ("shuffle" if label == "f16-b" else "data")  # the noise run
        sources = {task["name"]: task["data_source"] for task in header["tasks"]}
        assert sources["gsm8k"] == str(Path(bundled_gsm8k()).resolve())  # offline by default
        items = [json.loads(line) for line in lines[1:]]
        assert {item["task"] for item in items} == TASKS and len(items) == 7
        assert all(item["status"] == "ok" for item in items)
        assert {item["task"] for item in items if item.get("logprobs")} == {"short-prompts",
                                                                               "context"}
    assert kinds == {"f16-a": "f16", "f16-b": "f16", "q8_0": "q8_0"}


@pytest.mark.integration
@pytest.mark.skipif(
    not (HAVE_ENGINE and HAVE_MODEL),
    reason="llama-cpp-python[server] or the bundled model is not installed (make install-local)",
)
def test_demo_tells_the_whole_story_offline(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = subprocess.run(
        [sys.executable, "-m", "kveval.cli", "demo", "--limit", "2", "--output-dir", str(out)],
        capture_output=True, text=True, timeout=1200,  # a hang guard, not a speed test
        env=offline_env(tmp_path),
    )  # fmt: skip
    assert result.returncode in (0, 2), result.stderr[-2000:]
    for number, what in enumerate(("baseline: f16", "restart, items shuffled: f16",
                                   "candidate: q8_0"), start=1):
        assert re.search(rf"^\[{number}/3\] [^\n]*{what}", result.stderr, re.M), what
    for command in ("compare", "score", "gate"):
        assert f"$ kveval {command} " in result.stderr
    check_run_files(out)
    # the gate's own summary line and exit code, as `kveval gate` gives them on these files
    again = gate_again(out)
    summary = [line for line in result.stdout.splitlines() if line.startswith("gate: ")]
    assert summary == [line for line in again.stdout.splitlines() if line.startswith("gate: ")]
    assert len(summary) == 1 and again.returncode in (0, 1, 2)
    assert result.returncode == (2 if again.returncode == 2 else 0)  # cannot judge: said so
    if again.returncode == 2:  # two items a task: no check can reach its level
        assert "CANNOT JUDGE" in result.stdout and "would judge" in result.stdout
    assert f"exit code of kveval gate: {again.returncode}\n" in result.stdout
    assert f"Here it exited {again.returncode}." in " ".join(result.stdout.split())
    # the divergence line: token KL against the noise floor, from the --logprobs task
    lines = [line for line in result.stdout.splitlines()
             if line.startswith("short-prompts divergence: ")]
    assert lines and all("KL" in line and "f16-b" in line for line in lines)  # compare, gate
    figures = divergence(out)  # a real q8_0 cache moves the distributions; the restart hardly
    noise_kl = figures["noise"]["kl_mean"]  # type: ignore[index]
    assert noise_kl < 0.01 and figures["kl_mean"] > noise_kl  # type: ignore[operator]
    # one line of kveval plan, sized from these runs as a pilot
    assert "$ kveval plan " in result.stderr
    planned = [line for line in result.stdout.splitlines()
               if line.startswith("gsm8k accuracy: a loss of 5 points ")]
    assert len(planned) == 1 and "the pilot's 2 items catch" in planned[0]
    assert "What you just saw" in result.stdout
    assert "kveval check --endpoint http://HOST:8000/v1" in result.stdout
    assert "kveval run --endpoint http://HOST:8000/v1" in result.stdout
    page = out / "report.html"
    assert result.stdout.rstrip("\n").splitlines()[-1] == str(page)
    assert 'class="banner' in page.read_text() and 'id="setup"' in page.read_text()
