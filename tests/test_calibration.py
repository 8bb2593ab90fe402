"""The false-alarm rates the gate prints beside a verdict with fewer than two noise runs are
the simulation's: a shorter run of bench/gate_calibration.py lands near each printed figure."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from kveval.judge.calibration import A_A, REPLICATES, false_alarm_note

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("noise_runs, spread", [(1, 1.0), (0, 1.0), (2, 1.0)])
def test_the_printed_rates_are_the_simulations(noise_runs, spread):
    sys.path.insert(0, str(ROOT / "bench"))
    from gate_calibration import measure

    reps, printed = 40, A_A[noise_runs][500][spread]
    found = measure(("loss-biased", noise_runs, spread, 500, "A/A"), reps, seed=7)
    error = math.sqrt(max(printed * (1 - printed), 0.01) * (1 / reps + 1 / REPLICATES))
    assert abs(found - printed) < 4 * error + 0.02, (found, printed)


def test_the_note_names_the_worst_rate_the_unmeasured_spread_and_the_remedy():
    none, one = false_alarm_note(0), false_alarm_note(1)
    assert none is not None and "with no noise run" in none and "unmeasured" in none
    assert one is not None and "rests on two runs and the declared prior" in one
    worst = max(r for by_n in A_A[1].values() for r in by_n.values())
    assert f"fails {100 * worst:.1f}% of the time at worst" in one
    assert "give --noise two or three times" in one
    assert false_alarm_note(2) is None  # the pool's own spread joins the prior
