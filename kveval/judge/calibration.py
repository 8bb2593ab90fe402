"""The gate's measured false-alarm rates, printed beside a verdict whose setting exceeds the
declared level.

`python bench/gate_calibration.py` simulates the whole gate on the rollout suite's sizes
(default options) with restarts whose change and truncation rates vary with log-sd 0, 0.25,
0.5 and 1.0, and measures how often a candidate that is one more run of the baseline's setup
fails (family-wise A/A false alarms). With two or more noise runs the spread is measured and
every rate stays at most 5%; with none or one it cannot be, and where a rate exceeds 5% the
gate says so. tests/test_calibration.py checks these figures against a shorter simulation.
"""

from __future__ import annotations

LEVEL = 0.05
# noise runs -> {log-sd of the rate between restarts: family-wise A/A false alarms}
A_A = {
    0: {0.0: 0.013, 0.25: 0.007, 0.5: 0.027, 1.0: 0.14},
    1: {0.0: 0.007, 0.25: 0.0, 0.5: 0.0, 1.0: 0.0},
}


def false_alarm_note(noise_runs: int) -> str | None:
    """A note for a gate with too few noise runs to measure the floor's spread, naming the
    simulated false-alarm rates above LEVEL; None when none exceeds it."""
    rates = A_A.get(noise_runs)
    if rates is None:
        return None
    over = [(sd, rate) for sd, rate in rates.items() if rate > LEVEL]
    if not over:
        return None
    runs = "no noise run" if noise_runs == 0 else "one noise run"
    shown = ", ".join(f"{100 * rate:.0f}% when restarts vary with log-sd {sd:g}"
                      for sd, rate in over)
    return (f"with {runs} the noise floor's spread is assumed, not measured: simulated on the "
            f"rollout suite, a candidate that is only another restart fails {shown} "
            f"(bench/gate_calibration.py); give --noise two or three times")
