"""The gate's measured false-alarm rates, printed beside a verdict with fewer than two noise
runs, where the spread between restarts rests on the declared prior (judge/spread.py).

`python bench/gate_calibration.py --write` simulates the whole gate on the rollout suite in
the worlds of bench/calibration_worlds.py (loss-biased departures, J-shaped fragility, shared
alternatives, restarts that vary with log-sd 0 to 1, bad batches) and measures how often a
candidate that is one more restart of the baseline's setup fails (family-wise A/A false
alarms). It writes the rates between the markers below; tests/test_calibration.py checks them
against a shorter simulation.
"""

from __future__ import annotations

LEVEL = 0.05
# noise runs -> {GSM8K items: {log-sd of the restarts' run effect: family-wise A/A}}
# measured: begin
REPLICATES = 200
A_A = {
    0: {500: {0.0: 0.005, 0.25: 0.000, 0.5: 0.000, 1.0: 0.045},
        1319: {0.0: 0.000, 0.25: 0.005, 0.5: 0.010, 1.0: 0.080}},
    1: {500: {0.0: 0.000, 0.25: 0.005, 0.5: 0.015, 1.0: 0.015},
        1319: {0.0: 0.000, 0.25: 0.005, 0.5: 0.005, 1.0: 0.050}},
    2: {500: {0.0: 0.020, 0.25: 0.020, 0.5: 0.010, 1.0: 0.040},
        1319: {0.0: 0.000, 0.25: 0.025, 0.5: 0.015, 1.0: 0.030}},
    3: {500: {0.0: 0.015, 0.25: 0.020, 0.5: 0.020, 1.0: 0.015},
        1319: {0.0: 0.005, 0.25: 0.020, 0.5: 0.015, 1.0: 0.055}},
}
# measured: end


def false_alarm_note(noise_runs: int, max_kl: bool = False) -> str | None:
    """With fewer than two noise runs: the simulated false-alarm rates of a gate like this one
    (the worst over the restarts' spreads and suite sizes), and the remedy; None with two or
    more, where the pool's own spread joins the prior."""
    if noise_runs >= 2:
        return None
    rates = A_A[min(noise_runs, 1)]
    worst = max(rate for by_spread in rates.values() for rate in by_spread.values())
    at = next(f"log-sd {s:g}, {n} GSM8K items" for n, by_spread in rates.items()
              for s, rate in by_spread.items() if rate == worst)
    what = "of KL" if max_kl else "of accuracy and counts"
    how = (f"with no noise run how far a restart moves these runs is unmeasured: the spread "
           f"{what} between restarts is the declared prior's" if noise_runs == 0 else
           f"with one noise run the spread {what} between restarts rests on two runs and the "
           "declared prior")
    return (f"{how}; simulated "
            f"(bench/gate_calibration.py, {REPLICATES} rollouts a cell), a candidate that is "
            f"only another restart fails {100 * worst:.1f}% of the time at worst ({at}); "
            "give --noise two or three times")
