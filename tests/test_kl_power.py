"""The divergence test's power (judge/kl_power.py) against the gate's own run-by-run test
simulated, the smallest rise and the runs and items it reports, and `plan --detect-kl` in
nats or as a share of the floor."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kveval.formats.records import ItemRecord
from kveval.judge.kl_power import Floor, detectable_rise, joint_power, needed, run_power
from kveval.judge.kl_test import log_run_p
from tests.clirun import kveval
from tests.test_cli_verdicts import header, write


@pytest.mark.parametrize("runs", [3, 4, 6])
def test_run_power_is_the_gates_run_test_simulated(runs: int) -> None:
    """Log means of k noise runs and a candidate 6.1% above, spread 0.0097: how often the
    gate's own prediction test (judge/divergence.py) rejects, against the noncentral t."""
    rng = np.random.default_rng(runs)
    spread, rise, level, reps = 0.0097, 0.061, 0.05, 4000
    pool = rng.normal(0.0, spread, (reps, runs))
    cand = rng.normal(math.log1p(rise), spread, reps)
    hits = sum(log_run_p(c, list(p), 0.0) <= level for c, p in zip(cand, pool, strict=True))
    assert hits / reps == pytest.approx(run_power(rise, 1.0, spread, runs, level), abs=0.025)


def test_fewer_than_three_runs_assume_the_spread() -> None:
    """With one or two noise runs a 6% rise is nearly never shown, whatever the spread."""
    rise = 0.061 * 0.0123
    assert run_power(rise, 0.0123, 0.001, 2, 0.05) < 0.1
    assert run_power(rise, 0.0123, 0.001, 3, 0.05) > 0.99


floors = st.builds(Floor, st.floats(1e-4, 0.1), st.one_of(st.none(), st.floats(0.001, 0.2)),
                   st.floats(0.0, 0.5), st.integers(5, 2000))


@settings(max_examples=60, deadline=None)
@given(floors, st.integers(5, 2000), st.integers(1, 8))
def test_the_detectable_rise_is_where_the_power_reaches_80(floor: Floor, items: int,
                                                           runs: int) -> None:
    found = detectable_rise(floor, items, runs, 0.01)
    if found is None:
        assert joint_power(floor.mean * 1000, floor, items, runs, 0.01) < 0.8
        return
    assert joint_power(found, floor, items, runs, 0.01) >= 0.8
    assert joint_power(found * 0.99, floor, items, runs, 0.01) < 0.8


@settings(max_examples=60, deadline=None)
@given(floors, st.floats(0.02, 2.0))
def test_the_runs_and_items_needed_are_the_fewest(floor: Floor, share: float) -> None:
    rise, level = share * floor.mean, 0.01
    need = needed(rise, floor, level, most_items=5000)
    if need.runs is None:
        assert all(joint_power(rise, floor, 5000, k, level) < 0.8 for k in range(1, 9))
        return
    assert need.items is not None and joint_power(rise, floor, need.items, need.runs,
                                                  level) >= 0.8
    reach = math.ceil(math.log(1 / level) / math.log(need.runs + 1))
    if need.items > reach:
        assert joint_power(rise, floor, need.items - 1, need.runs, level) < 0.8
    assert all(joint_power(rise, floor, 5000, k, level) < 0.8 for k in range(1, need.runs))


def test_a_quiet_floor_shows_any_rise() -> None:
    quiet = Floor(0.0, None, 0.0, 100)
    assert detectable_rise(quiet, 100, 1, 0.01) == 0.0
    assert needed(0.001, quiet, 0.01).runs == 1


def test_the_run_spread_shrinks_with_items_only_by_its_item_part() -> None:
    floor = Floor(0.01, 0.02, 0.05, 400)  # item part: (0.05 / 0.01)^2 / 400 = 0.0625 > 0.02^2
    assert floor.spread_at(400) == pytest.approx(0.25)
    assert floor.spread_at(1600) == pytest.approx(0.125)
    between = Floor(0.01, 0.02, 0.0, 400)
    assert between.spread_at(10) == between.spread_at(10_000) == pytest.approx(0.02)


# ---------------------------------------------------------------- plan --detect-kl


def forced_items(kls: np.ndarray) -> list[ItemRecord]:
    """One-position items whose top-2 puts the baseline's "a" at 0.6 and "b" at 0.3 moved so
    that KL(base || run) is each value (solved for the moved share of "a")."""
    items = []
    for i, kl in enumerate(kls):
        q = _moved(float(kl))
        lp = {"k": 2, "tokens": ["a"], "logprobs": [math.log(q)], "top_tokens": [["a", "b"]],
              "top_logprobs": [[math.log(q), math.log(0.9 - q)]]}
        items.append(ItemRecord(task="prompts", item_id=f"p{i}", prompt_sha256=f"p{i}",
                                request={}, status="ok", output="a", logprobs=lp))
    return items


def _kl(q: float) -> float:
    return 0.6 * math.log(0.6 / q) + 0.3 * math.log(0.3 / (0.9 - q))


def _moved(kl: float) -> float:
    low, high = 0.6, 0.8999
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if _kl(mid) < kl else (low, mid)
    return high


@pytest.fixture
def forced_pilot(tmp_path: Path) -> list[str]:
    """A forced reference (KL 0 against itself) and three forced restarts of 200 items."""
    rng = np.random.default_rng(7)
    typical = rng.lognormal(0, 0.5, 200) * 0.01
    paths = [write(tmp_path / "ref.jsonl", header("ref"), forced_items(np.zeros(200)))]
    for label in ("r1", "r2", "r3"):
        kls = typical * np.exp(rng.normal(0, 0.01) + rng.normal(0, 0.1, 200))
        paths.append(write(tmp_path / f"{label}.jsonl", header(label), forced_items(kls)))
    return paths


def planned(capsys: Any, pilot: list[str], rise: str) -> dict[str, Any]:
    args = ["plan", pilot[0], *(a for p in pilot[1:] for a in ("--noise", p)), "--detect-kl",
            rise, "--json"]
    code, out, err = kveval(capsys, *args)
    assert code == 0, err
    data = json.loads(out)
    return next(t for t in data["tasks"] if t["check"] == "divergence") | {"top": data}


def test_plan_detect_kl_in_nats_or_as_a_share_of_the_floor(capsys: Any,
                                                           forced_pilot: list[str]) -> None:
    share = planned(capsys, forced_pilot, "10%")
    assert share["top"]["detect_kl_unit"] == "share of the floor"
    assert share["rise_nats"] == pytest.approx(0.10 * share["floor_kl"])
    assert share["noise_runs_needed"] >= 3 and share["items_needed"] >= 1
    assert "forced noise runs" in share["summary"]
    nats = planned(capsys, forced_pilot, f"{share['rise_nats']!r}")
    assert nats["top"]["detect_kl_unit"] == "nats"
    assert (nats["noise_runs_needed"], nats["items_needed"]) == (
        share["noise_runs_needed"], share["items_needed"])


@pytest.mark.parametrize("bad", ["nan", "inf", "-1%", "0", "abc", "5%%"])
def test_a_rise_that_is_not_one_is_one_line(capsys: Any, forced_pilot: list[str],
                                            bad: str) -> None:
    code, out, err = kveval(capsys, "plan", forced_pilot[0], "--detect-kl", bad)
    assert code == 2 and out == "" and "--detect-kl" in err
    assert "Traceback" not in err


def test_a_forced_pilot_grows_by_forced_restarts(capsys: Any, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    typical = rng.lognormal(0, 0.5, 100) * 0.01
    forced = {"baseline": "free", "method": "forced_decoding"}
    free = write(tmp_path / "free.jsonl", header("free"), forced_items(np.zeros(100)))
    ref = write(tmp_path / "ref.jsonl", header("ref", teacher_force=forced),
                forced_items(np.zeros(100)))
    noise = [write(tmp_path / f"r{i}.jsonl", header(f"r{i}", teacher_force=forced),
                   forced_items(typical * np.exp(rng.normal(0, 0.1, 100)))) for i in (1, 2)]
    code, out, err = kveval(capsys, "plan", ref, "--noise", noise[0], "--noise", noise[1],
                           "--detect-kl", "20%", "--json")
    assert code == 0, err
    commands = json.loads(out)["commands"]
    assert commands and all(c.startswith("kveval run --endpoint http://127.0.0.1:8000/v1 "
                                         f"--teacher-force {free} --label ref-noise")
                            for c in commands)
    code, out, _ = kveval(capsys, "plan", ref, "--noise", noise[0], "--noise", noise[1],
                          "--detect-kl", "20%")
    assert "restart the server before each forced noise run" in out


def test_what_a_gate_could_have_seen_does_not_grow_with_the_candidates_own_rise(
        capsys: Any, tmp_path: Path) -> None:
    """The per-item spread of the floor is the noise runs' own: a candidate five times the
    floor does not make the could-have-seen rise larger than a candidate at the floor."""
    rng = np.random.default_rng(11)
    typical = rng.lognormal(0, 0.5, 120) * 0.01
    ref = write(tmp_path / "ref.jsonl", header("ref"), forced_items(np.zeros(120)))
    noise = [write(tmp_path / f"n{i}.jsonl", header(f"n{i}"), forced_items(
        typical * np.exp(rng.normal(0, 0.01) + rng.normal(0, 0.1, 120)))) for i in range(3)]
    seen = {}
    for label, factor in (("same", 1.0), ("five", 5.0)):
        cand = write(tmp_path / f"{label}.jsonl", header(label), forced_items(
            typical * factor * np.exp(rng.normal(0, 0.1, 120))))
        code, out, err = kveval(capsys, "gate", "--baseline", ref, "--candidate", cand,
                                *(a for n in noise for a in ("--noise", n)), "--max-kl", "0",
                                "--json")
        assert code in (0, 1), err
        task = json.loads(out)["tasks"][0]
        seen[label] = task["detectable"]["divergence"]["value"]
    assert seen["five"] is not None and seen["five"] == pytest.approx(seen["same"], rel=0.01)


def test_a_forced_pilot_of_ab_prints_its_port_placeholder_bare(capsys: Any,
                                                                tmp_path: Path) -> None:
    """`kveval ab` records its endpoint as http://127.0.0.1:{port}/v1: no `kveval run` can reach
    the server it started, so the plan says to grow them with the same `ab` command, the
    placeholder bare, never shell-quoted."""
    rng = np.random.default_rng(3)
    typical = rng.lognormal(0, 0.5, 100) * 0.01
    forced = {"baseline": "free", "method": "forced_decoding"}
    at = {"teacher_force": forced, "endpoint": "http://127.0.0.1:{port}/v1"}
    ref = write(tmp_path / "ref.jsonl", header("ref", **at), forced_items(np.zeros(100)))
    noise = [write(tmp_path / f"r{i}.jsonl", header(f"r{i}", **at),
                   forced_items(typical * np.exp(rng.normal(0, 0.1, 100)))) for i in (1, 2)]
    code, out, err = kveval(capsys, "plan", ref, "--noise", noise[0], "--noise", noise[1],
                           "--detect-kl", "20%", "--json")
    assert code == 0, err
    commands = json.loads(out)["commands"]
    assert len(commands) == 1 and "made by kveval ab (http://127.0.0.1:{port}/v1)" in \
        commands[0] and "--detect" in commands[0] and "'{port}'" not in commands[0]
