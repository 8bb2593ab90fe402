"""`kveval ab --detect POINTS` (tests/ab_server.py with restarts that change answers): a pilot,
the plan, the pool grown, then the candidate; resumed from ab.json; a budget that ends the
growth said in the verdict; the pure sizing rule (judge/sizing.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_ab import command, environment, last_line, pids, serve, write_suite

from kveval.judge.plan import TaskPlan
from kveval.judge.sizing import MOST_NOISE_RUNS, Size, from_json, grows, wanted


def detect(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = command(tmp_path, write_suite(tmp_path, 40), "--detect", "3", "--pilot", "10",
                  "--json", *args, serve_cmd=serve(tmp_path, "--flip 0.2"))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                          env=environment())


def header(path: Path) -> dict[str, object]:
    return dict(json.loads(path.open().readline()))


def test_the_pilot_sizes_the_pool_before_the_candidate_runs(tmp_path: Path) -> None:
    done = detect(tmp_path)
    assert done.returncode in (0, 1), done.stderr
    sizing = json.loads(done.stdout)["sizing"]
    assert sizing["passes"] >= 2 and sizing["stopped"] == "planned"
    assert sizing["noise_runs"] >= 1 and sizing["items"] == 40  # no accuracy task: whole
    folder = tmp_path / "ab"
    for k in range(1, sizing["noise_runs"] + 1):
        assert (folder / f"noise{k}.jsonl").is_file()
    tasks = header(folder / "candidate.jsonl")["tasks"]
    assert tasks[0]["items"] == 40  # type: ignore[index]
    assert "--detect: pass 2: 40 items a task" in done.stderr
    before = len(pids(tmp_path))
    again = detect(tmp_path)
    assert again.returncode == done.returncode, again.stderr
    assert len(pids(tmp_path)) == before  # resumed from ab.json: nothing started
    assert json.loads(again.stdout)["sizing"] == sizing


def test_a_budget_ends_the_growth_and_the_verdict_says_so(tmp_path: Path) -> None:
    done = detect(tmp_path, "--budget", "3")
    assert done.returncode in (0, 1, 2), done.stderr
    assert "Traceback" not in done.stderr
    assert len(pids(tmp_path)) == 3  # the pilot's two servers and the candidate's
    stopped = json.loads((tmp_path / "ab" / "gate.json").read_text())["sizing"]["stopped"]
    assert stopped.startswith("budget: 2 server starts made")
    assert "growth ended: budget" in done.stderr


@pytest.mark.parametrize("value", ["0", "-3", "h", "3x", "1e9h"])
def test_a_bad_budget_is_one_line(tmp_path: Path, value: str) -> None:
    done = detect(tmp_path, "--budget", value)
    assert done.returncode == 2
    assert f"--budget {value!r}: server starts (12) or hours (3h)" in last_line(done.stderr)
    assert not pids(tmp_path)


def task(kind: str, items: int | None, runs: int | None, available: int | None) -> TaskPlan:
    return TaskPlan("t", kind, 100, available, items, runs, None, None)


class Found:
    def __init__(self, *tasks: TaskPlan) -> None:
        self.tasks = tasks


def test_the_size_grows_to_the_plan_and_never_shrinks() -> None:
    pilot = Size(100, 1)
    grown = wanted(Found(task("accuracy", 400, 3, 1319)), pilot)
    assert (grown.items, grown.noise_runs, grown.passes) == (400, 3, 2) and grows(grown, pilot)
    assert wanted(Found(task("accuracy", 50, 1, 1319)), grown).items == 400
    assert wanted(Found(task("accuracy", None, None, 1319)), pilot).items == 1319  # the most
    assert wanted(Found(task("accuracy", 9000, 40, 1319)), pilot).items == 1319
    assert wanted(Found(task("accuracy", 9000, 40, 1319)), pilot).noise_runs == MOST_NOISE_RUNS
    assert wanted(Found(task("drift", 100, 2, 100)), pilot, 1, {"t": 400}).items == 400
    assert wanted(Found(task("drift", 100, 2, 100)), pilot, 1, {"t": None}).items is None
    assert wanted(Found(task("accuracy", 100, 1, 1319)), pilot, least=2).noise_runs == 2
    same = Size(400, 3)
    assert not grows(wanted(Found(task("accuracy", 300, 2, 1319)), same), same)


@pytest.mark.parametrize("data", [None, [], {"items": 0, "noise_runs": 1},
                                  {"items": "9", "noise_runs": 1}, {"noise_runs": 0},
                                  {"items": None, "noise_runs": True}])
def test_a_size_on_file_that_does_not_parse_is_none(data: object) -> None:
    assert from_json(data) is None
    assert from_json({"items": 10, "noise_runs": 99}) == Size(10, MOST_NOISE_RUNS)


@pytest.mark.parametrize(("args", "said"), [
    (("--budget", "1"), "--budget 1: the pilot makes 2 server starts and the candidates 1"),
    (("--budget", "2"), "give at least 3"),
])
def test_a_budget_below_the_pilot_and_the_candidates_is_one_line(
        tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    done = detect(tmp_path, *args)
    assert done.returncode == 2 and said in last_line(done.stderr)
    assert not pids(tmp_path)


def test_a_budget_without_detect_is_one_line(tmp_path: Path) -> None:
    cmd = command(tmp_path, write_suite(tmp_path, 40), "--budget", "12")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=environment())
    assert done.returncode == 2
    assert "--budget bounds the growth of --detect" in last_line(done.stderr)
    assert not pids(tmp_path)


def test_a_figures_file_that_does_not_parse_is_one_line(tmp_path: Path) -> None:
    figures = tmp_path / "ab" / "servers" / "baseline.json"
    figures.parent.mkdir(parents=True)
    figures.write_text(json.dumps({"label": "baseline", "command": ["x"], "starts": [
        {"port": 1, "ready_s": 1.0, "at": "garbage"}]}))
    done = detect(tmp_path, "--budget", "1h")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{figures}: not a kveval ab figures file" in last_line(done.stderr)
    assert "'garbage', is no ISO time" in last_line(done.stderr)
