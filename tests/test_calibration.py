"""The false-alarm rates the gate prints beside a verdict with too few noise runs are the
simulation's: a shorter run of bench/gate_calibration.py lands near each printed figure."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from kveval.judge.calibration import A_A, false_alarm_note

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("noise_runs, spread", [(1, 1.0), (0, 1.0), (2, 0.25)])
def test_the_printed_rates_are_the_simulations(noise_runs, spread):
    sys.path.insert(0, str(ROOT))
    from bench.gate_calibration import rate

    reps, printed = 120, A_A[noise_runs][spread]
    found = rate(noise_runs, spread, "A/A", reps, seed=7)
    error = math.sqrt(max(printed * (1 - printed), 0.01) / reps)
    assert abs(found - printed) < 4 * error + 0.02, (found, printed)


def test_the_note_names_the_rates_above_the_level_and_the_remedy():
    note = false_alarm_note(1)
    assert note is not None and "one noise run" in note and "give --noise two or three" in note
    assert f"{100 * A_A[1][1.0]:.0f}% when restarts vary with log-sd 1" in note
    assert false_alarm_note(2) is None  # measured: every rate near the level
    assert "three times" in (false_alarm_note(2, max_kl=True) or "")
