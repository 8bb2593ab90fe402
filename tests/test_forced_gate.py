"""The forced runs in the gate's family: each forced pass (the candidate's, each restart's)
judged against the baseline's own forced pass, by hand as `kveval ab` does it, against a fake
server that echoes scripted log-probabilities."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from kveval.cli.cli import main
from tests.clirun import kveval
from tests.test_logprobs_cli import BASE_TOP, KL_MOVED, MOVED_TOP, forced, serve


def quietly(*args: str) -> int:
    """A kveval command run in this process, its output dropped; its exit code."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(list(args))
        except SystemExit as exc:
            return int(exc.code or 0)
    return 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The free runs of an experiment (the candidate's answers unchanged) and the forced
    passes of the baseline's answers: on its own server, two restarts, the candidate's."""
    folder = tmp_path_factory.mktemp("forced")
    prompts = folder / "prompts.txt"
    prompts.write_text("".join(f"Name three colours, take {i}.\n" for i in range(40)))
    paths = {label: str(folder / f"{label}.jsonl") for label in
             ("baseline", "noise1", "candidate", "baseline-forced", "noise1-forced",
              "noise2-forced", "candidate-forced")}
    for label in ("baseline", "noise1", "candidate"):
        with serve(BASE_TOP) as server:
            assert quietly("run", "--endpoint", server.base_url, "--task", "prompts",
                           "--prompts", str(prompts), "--api", "completions", "--label", label,
                           "-o", paths[label]) == 0
    for label, top in (("baseline-forced", BASE_TOP), ("noise1-forced", BASE_TOP),
                       ("noise2-forced", BASE_TOP), ("candidate-forced", MOVED_TOP)):
        with forced(top) as server:
            assert quietly("run", "--endpoint", server.base_url, "--teacher-force",
                           paths["baseline"], "--logprobs", "2", "--label", label,
                           "-o", paths[label]) == 0
    return paths


def gate(capsys: Any, runs: dict[str, str], candidate_forced: str, *extra: str) -> tuple:
    return kveval(capsys, "gate", "--baseline", runs["baseline"], "--candidate",
                  runs["candidate"], "--noise", runs["noise1"],
                  "--baseline-forced", runs["baseline-forced"],
                  "--candidate-forced", runs[candidate_forced],
                  "--noise-forced", runs["noise1-forced"],
                  "--noise-forced", runs["noise2-forced"], *extra)


def forced_check(data: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in data["checks"] if c["kind"] == "forced")


def test_a_forced_rise_is_a_check_of_the_family_named_beside_the_verdict(
        capsys: Any, runs: dict[str, str]) -> None:
    code, out, err = gate(capsys, runs, "candidate-forced", "--json")
    assert code == 0, err
    data = json.loads(out)
    check = forced_check(data)
    assert check["task"] == "prompts" and check["weight"] == 2.0
    assert check["p_value"] < check["level"] and check["adjusted_p"] < 0.05
    task = data["tasks"][0]
    assert task["status"] == "pass" and task["shown"] == ["forced"] and task["failed"] == []
    test = task["forced_divergence"]["test"]
    assert test["candidate_kl"] == pytest.approx(KL_MOVED, rel=1e-3)
    assert test["noise_kl"] == 0 and test["noise_runs"] == 2
    assert "prompts forced KL +0.023 nats per token, per-item mean (from a floor of 0)" \
        in data["summary"]
    code, text, _ = gate(capsys, runs, "candidate-forced")
    assert "teacher-forced divergence (each forced pass against baseline-forced" in text


def test_max_kl_fails_a_forced_rise_and_passes_a_forced_restart(
        capsys: Any, runs: dict[str, str]) -> None:
    code, out, _ = gate(capsys, runs, "candidate-forced", "--max-kl", "0")
    assert code == 1
    assert "gate: REGRESSION in prompts (forced)" in out
    code, out, _ = gate(capsys, runs, "candidate-forced", "--max-kl", "0.1")
    assert code == 0  # a rise of 0.023 nats is within the tolerated 0.1
    code, out, _ = kveval(capsys, "gate", "--baseline", runs["baseline"], "--candidate",
                          runs["candidate"], "--noise", runs["noise1"], "--baseline-forced",
                          runs["baseline-forced"], "--candidate-forced", runs["noise2-forced"],
                          "--noise-forced", runs["noise1-forced"], "--max-kl", "0", "--json")
    data = json.loads(out)
    assert code == 0 and data["verdict"] == "pass"
    assert data["tasks"][0]["forced_divergence"]["test"]["candidate_kl"] == 0


def test_gate_and_compare_print_the_same_forced_p(capsys: Any, runs: dict[str, str]) -> None:
    _, out, _ = gate(capsys, runs, "candidate-forced", "--json")
    _, compared, _ = kveval(capsys, "compare", runs["baseline"], runs["candidate"], "--noise",
                            runs["noise1"], "--baseline-forced", runs["baseline-forced"],
                            "--candidate-forced", runs["candidate-forced"], "--noise-forced",
                            runs["noise1-forced"], "--noise-forced", runs["noise2-forced"],
                            "--json")
    assert forced_check(json.loads(out)) == forced_check(json.loads(compared))


@pytest.mark.parametrize(("args", "words"), [
    (["--candidate-forced", "candidate-forced"], "give --baseline-forced and --candidate-forced"),
    (["--baseline-forced", "noise1", "--candidate-forced", "candidate-forced"],
     "not a teacher-forced run"),
])
def test_forced_inputs_that_cannot_be_judged_are_one_line(
        capsys: Any, runs: dict[str, str], args: list[str], words: str) -> None:
    given = [runs.get(a, a) for a in args]
    code, out, err = kveval(capsys, "gate", "--baseline", runs["baseline"], "--candidate",
                            runs["candidate"], "--noise", runs["noise1"], *given)
    assert code == 2 and words in err and "Traceback" not in err


def test_forced_runs_of_other_answers_are_refused(capsys: Any, runs: dict[str, str],
                                                  tmp_path: Path) -> None:
    other = tmp_path / "other-forced.jsonl"
    lines = Path(runs["noise1-forced"]).read_text().splitlines()
    item = json.loads(lines[1])
    item["output"] = "something else"
    other.write_text("\n".join([lines[0], json.dumps(item), *lines[2:]]) + "\n")
    code, _, err = kveval(capsys, "gate", "--baseline", runs["baseline"], "--candidate",
                          runs["candidate"], "--noise", runs["noise1"], "--baseline-forced",
                          runs["baseline-forced"], "--candidate-forced", str(other),
                          "--noise-forced", runs["noise1-forced"])
    assert code == 2 and "forces other answers than the baseline" in err


def test_the_forced_runs_plan_says_when_more_restarts_are_needed() -> None:
    from kveval.judge.checks import Levels
    from kveval.judge.plan import Plan, Targets, TaskPlan
    from kveval.show.forced_plan import after_note

    def plan(needed: int | None) -> Plan:
        task = TaskPlan("gsm8k", "divergence", 500, None, 500, needed, None, None)
        return Plan((task,), Levels(0.05, 12.0), 2, "", Targets(detect_kl=0.1,
                                                                 kl_relative=True))

    assert after_note(plan(2), 2) is None
    note = after_note(plan(4), 2)
    assert note is not None and "10% over the floor needs more forced restarts than this " \
        "experiment's 2" in note and "gsm8k 4" in note
    assert "gsm8k more than 8" in (after_note(plan(None), 3) or "")
