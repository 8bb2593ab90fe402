"""`kveval plan`: its numbers against the gate simulated, its JSON, and the commands it prints,
run against a fake server until the pilot has grown to the size it recommends."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from kveval.formats.reader import read_run
from kveval.judge.detect import detectable_loss, items_for_loss, mcnemar_power
from tests.clirun import kveval
from tests.test_cli_verdicts import fingerprint, gsm8k_items, header, prompt_items, write

ROOT = Path(__file__).resolve().parent.parent


def test_power_grows_with_items_and_loss_and_is_exact_at_the_extremes():
    assert mcnemar_power(500, 0.06, 0.0, 0.05) < 0.05  # no loss: at most the level
    assert mcnemar_power(500, 0.06, 0.02, 0.05) < mcnemar_power(1000, 0.06, 0.02, 0.05)
    assert mcnemar_power(500, 0.06, 0.02, 0.05) < mcnemar_power(500, 0.06, 0.04, 0.05)
    assert mcnemar_power(200, 0.0, 0.05, 0.05) > 0.95  # ten losses and no flips: nearly always
    n = items_for_loss(0.03, 0.06, 0.05 / 3)
    assert n is not None and mcnemar_power(n, 0.06, 0.03, 0.05 / 3) >= 0.8
    assert mcnemar_power(n - 1, 0.06, 0.03, 0.05 / 3) < 0.8
    # a model at 1.8% cannot lose more than 1.8 points: in a family of 37 checks not even
    # losing every right answer would show 80% of the time; alone it would, from 1.7 points
    assert detectable_loss(500, 0.004, 0.05 / 37, ceiling=0.018) is None
    assert 0.016 < (detectable_loss(500, 0.004, 0.05, ceiling=0.018) or 1) < 0.018


@pytest.mark.parametrize("loss, flips", [(5.0, 0.06), (8.0, 0.025)])
def test_plan_agrees_with_the_gate_simulated(loss, flips):
    """The items and noise runs plan asks for, from a pilot, give the gate at least the
    asked power on runs of that size (bench/plan_agreement.py: 77-100% for 80% asked)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import numpy as np
    from plan_agreement import planned, power

    rng = np.random.default_rng(1)
    asked = planned(flips, loss, rng)
    assert asked is not None
    n, k, _ = asked
    assert k >= 2 and n < 1000
    assert power(n, k, flips, loss, 40, rng) >= 0.65  # 80% asked, 40 replicates


@pytest.fixture
def pilot(tmp_path: Path) -> dict[str, str]:
    base = write(tmp_path / "a.jsonl", header("a"), gsm8k_items(500, set(range(41)))
                 + prompt_items(60, set()))
    noise = write(tmp_path / "n.jsonl", header("n"),
                  gsm8k_items(500, set(range(3, 44)), changed=set(range(50)))
                  + prompt_items(60, {1, 2, 3}))
    cand = write(tmp_path / "c.jsonl", header("c", fingerprint=fingerprint("fp8")),
                 gsm8k_items(500, set(range(6, 53)), changed=set(range(80)))
                 + prompt_items(60, set(range(10))))
    return {"a": base, "n": noise, "c": cand}


def test_plan_json_gives_items_noise_runs_and_what_the_pilot_detects(pilot, capsys):
    args = ["plan", pilot["a"], "--noise", pilot["n"], "--candidate", pilot["c"], "--detect",
            "1.8", "--json"]
    code, out, _ = kveval(capsys, *args)
    data = json.loads(out)
    assert code == 0 and data["command"] == "plan"
    gsm8k = next(t for t in data["tasks"] if t["task"] == "gsm8k")
    assert gsm8k["check"] == "accuracy" and gsm8k["flip_rate"] == pytest.approx(18 / 500)
    # two noise runs at the least, with which the gate judges by the new answers' cost
    # (judge/novel_power.py; tests/test_novel_power.py holds the size against that test):
    # more items than the pilot's, which catch no less than 3.6 points
    assert gsm8k["items_needed"] > 500
    assert gsm8k["items_available"] == 1319 and gsm8k["noise_runs_needed"] >= 2
    assert gsm8k["detectable"] > 1.8 and f"{gsm8k['noise_runs_needed']} noise runs" in \
        gsm8k["summary"]
    prompts = next(t for t in data["tasks"] if t["task"] == "prompts")
    assert prompts["check"] == "drift" and "noise_runs_needed" in prompts
    size = min(gsm8k["items_needed"], gsm8k["items_available"])
    grow = [f"kveval run --resume -o {p} --limit {size}"
            for p in (pilot["a"], pilot["n"], pilot["c"])]
    assert data["commands"][:3] == grow
    more = data["commands"][3:]  # the noise runs the plan needs beyond the pilot's one
    assert len(more) == gsm8k["noise_runs_needed"] - 1
    assert all("--order shuffle" in c and "-noise" in c for c in more)


def test_plan_says_how_far_the_pilots_new_answers_leave_the_size_open(pilot, capsys):
    args = ["plan", pilot["a"], "--noise", pilot["n"], "--candidate", pilot["c"], "--detect",
            "1.8"]
    code, out, _ = kveval(capsys, *args, "--json")
    gsm8k = next(t for t in json.loads(out)["tasks"] if t["task"] == "gsm8k")
    low, high = gsm8k["items_within"]
    assert code == 0 and gsm8k["pilot_new_answers"] > 0
    assert low <= gsm8k["items_needed"] and (high is None or gsm8k["items_needed"] <= high)
    _, text, _ = kveval(capsys, *args)
    count = gsm8k["pilot_new_answers"]
    assert f"the pilot's runs gave {count} new answers; what one costs, read one sd lower or " \
        f"higher, asks {low:,} items or " in " ".join(text.split())


def test_a_loss_the_data_cannot_supply_says_the_best_it_can_do(pilot, capsys):
    code, out, _ = kveval(capsys, "plan", pilot["a"], "--noise", pilot["n"], "--candidate",
                          pilot["c"], "--detect", "1")
    assert code == 0
    assert "a loss of 1 points needs" in out
    assert "the data has 1,319: the best it can do is" in out
    assert "--limit 1319" in out


def test_the_printed_commands_grow_the_pilot(tmp_path, capsys, monkeypatch, gsm8k_dir):
    from tests.fake_server import Behaviour, FakeServer

    monkeypatch.chdir(tmp_path)
    with FakeServer(Behaviour()) as server:
        for label, order in (("a", "data"), ("n", "shuffle")):
            code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "gsm8k",
                                  "--data", str(gsm8k_dir), "--limit", "40", "--order", order,
                                  "--label", label, "-o", f"{label}.jsonl")
            assert code in (0, 1), err
        code, out, _ = kveval(capsys, "plan", "a.jsonl", "--noise", "n.jsonl", "--detect", "5",
                              "--json")
        commands = json.loads(out)["commands"]
        needed = json.loads(out)["tasks"][0]["items_needed"]
        assert commands and 40 < needed <= 1319
        for command in commands:
            code, _, err = kveval(capsys, *shlex.split(command)[1:])
            assert code in (0, 1), err
    for label in ("a", "n"):
        run = read_run(tmp_path / f"{label}.jsonl")
        assert len(run.items) == needed and run.header.tasks[0]["items"] == needed
    assert read_run(tmp_path / "n.jsonl").header.order == "shuffle"  # kept as it was made


@pytest.mark.parametrize("rise", ["1e308", "1001", "1e6%", "inf", "0"])
def test_a_rise_past_any_meaning_is_one_line(capsys, tmp_path, rise):
    code, out, err = kveval(capsys, "plan", "--detect-kl", rise, str(tmp_path / "base.jsonl"),
                            str(tmp_path / "noise1.jsonl"))
    assert code == 2 and "inf%" not in out + err
    assert "a rise must be above 0 and at most 1000 nats or 100000% of the floor" in err
    assert len(err.strip().splitlines()) <= 3  # click's usage line, its hint, the line


def test_a_share_of_a_vanishing_floor_is_left_out():
    from kveval.show.plan_view import _figure

    assert _figure(1000.0, "divergence", 1e-320) == "1e+03 nats"
    assert _figure(0.01, "divergence", 0.1) == "0.01 nats (10.0% of the floor)"


def test_a_pilot_without_flips_does_not_blame_a_restarts_spread():
    """No flip in the pilot: a loss that cannot be caught is so because no spread was
    measured (the prior stands in), not because a restart moves accuracy that much."""
    from kveval.judge.checks import Levels
    from kveval.judge.plan import Plan, Targets, TaskPlan
    from kveval.show.plan_view import sentence

    plan = Plan((), Levels(0.05, 9.0), 1, "the noise run", Targets(detect=5.0))
    still = TaskPlan("gsm8k", "accuracy", 30, 1319, None, None, 25.0, 7.7, flip_rate=0.0)
    moving = TaskPlan("gsm8k", "accuracy", 30, 1319, None, None, 25.0, 7.7, flip_rate=0.2)
    assert "the pilot shows no flip" in sentence(still, plan)
    assert "cost about as much as that loss" not in sentence(still, plan)
    assert "cost about as much as that loss" in sentence(moving, plan)


def test_the_bracket_says_no_size_with_the_noise_runs_it_was_sized_at_and_counts_right():
    from kveval.judge.plan import TaskPlan
    from kveval.show.plan_view import within_words

    task = TaskPlan("gsm8k", "accuracy", 500, 1319, 2656, 3, 4.0, None, 0.01,
                    pilot_answers=1, items_within=(1200, None))
    assert within_words(task) == (" (the pilot's runs gave 1 new answer; what one costs, read "
                                  "one sd lower or higher, asks 1,200 items or no size with 3 "
                                  "noise runs)")
    assert within_words(TaskPlan("gsm8k", "accuracy", 500, 1319, 600, 2, 4.0, None, 0.01)) == ""
