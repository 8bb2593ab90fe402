"""The gate's measured false-alarm rates, printed beside a verdict whose setting exceeds the
declared level.

`python bench/gate_calibration.py` simulates the whole gate on the rollout suite's sizes
with restarts whose change, truncation and KL rates vary with log-sd 0, 0.25, 0.5 and 1.0,
and measures how often a candidate that is one more run of the baseline's setup fails
(family-wise A/A false alarms), with the gate's defaults and with --max-kl 0. With enough
noise runs to measure the spread (two for counts, three for divergence, whose pool cannot
hold the baseline) every rate stays near 5%; with fewer the spread is assumed, and where a
rate exceeds 5% the gate says so. tests/test_calibration.py checks these figures against a
shorter simulation.
"""

from __future__ import annotations

LEVEL = 0.05
# noise runs -> {log-sd of the rates between restarts: family-wise A/A false alarms}
A_A = {
    0: {0.0: 0.015, 0.25: 0.015, 0.5: 0.028, 1.0: 0.098},
    1: {0.0: 0.010, 0.25: 0.010, 0.5: 0.052, 1.0: 0.228},
    2: {0.0: 0.010, 0.25: 0.010, 0.5: 0.020, 1.0: 0.045},
    3: {0.0: 0.018, 0.25: 0.012, 0.5: 0.035, 1.0: 0.060},
}
A_A_MAX_KL = {  # the same with --max-kl 0: divergence among the checks
    1: {0.0: 0.005, 0.25: 0.030, 0.5: 0.442, 1.0: 0.808},
    2: {0.0: 0.010, 0.25: 0.048, 0.5: 0.325, 1.0: 0.750},
    3: {0.0: 0.010, 0.25: 0.020, 0.5: 0.035, 1.0: 0.045},
}


def false_alarm_note(noise_runs: int, max_kl: bool = False) -> str | None:
    """A note for a gate with too few noise runs to measure the floor's spread, naming the
    simulated false-alarm rates above LEVEL; None when none exceeds it."""
    rates = (A_A_MAX_KL if max_kl else A_A).get(min(noise_runs, 3))
    if rates is None:
        return None
    over = [(sd, rate) for sd, rate in rates.items() if rate > LEVEL + 0.01]
    if not over:
        return None
    runs = {0: "no noise run", 1: "one noise run"}.get(noise_runs, f"{noise_runs} noise runs")
    what = "the restarts' spread of KL" if max_kl else "the noise floor's spread"
    shown = ", ".join(f"{100 * rate:.0f}% when restarts vary with log-sd {sd:g}"
                      for sd, rate in over)
    more = "three" if max_kl else "two or three"
    return (f"with {runs} {what} is assumed, not measured: simulated on the rollout suite, a "
            f"candidate that is only another restart fails {shown} "
            f"(bench/gate_calibration.py); give --noise {more} times")
