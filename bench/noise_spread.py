"""The drift test when restarts themselves vary: A/A false alarms and the drift detected with
80% power, for 1, 2 and 3 noise runs, as the run-to-run spread of the change rate grows.

Model ("medium" instability of bench/gate_simulation.py, n items): an easy item departs from
its canonical answer with probability 0.031, a hard one (one in six) with 0.155, each scaled by
the run's own factor exp(sd * z - sd^2 / 2), z standard normal (log-sd `sd`; mean factor 1).
Two runs give the same answer when both keep the canonical one. The candidate is one more such
run; a drift of E points gives a fresh answer to E% more of its items.

The tests are kveval's own: one noise run, the exact McNemar test on the same items
(kveval.judge.compare.noise_test); two or more, the prediction interval from the spread of
the baseline's setup, every run against every other (kveval.judge.floor.spread_test).

    python bench/gate_simulation.py --spread-only [--reps 2000]
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from kveval.judge.compare import NoiseTest
from kveval.judge.floor import spread_test
from kveval.judge.stats import mcnemar_exact

UNSTABLE_EASY, UNSTABLE_HARD, HARD_SHARE = 0.031, 0.155, 1 / 6
LOG_SDS = (0.0, 0.25, 0.5)
NOISE_RUNS = (1, 2, 3)
N_ITEMS = 500
POWER = 0.80


class SpreadWorld:
    """Baseline, three noise runs and a candidate, for `reps` replicates of n items."""

    def __init__(self, log_sd: float, n: int, reps: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        hard = rng.random((reps, n)) < HARD_SHARE
        base = np.where(hard, UNSTABLE_HARD, UNSTABLE_EASY)
        factors = np.exp(log_sd * rng.standard_normal((5, reps, 1)) - log_sd**2 / 2)
        self.departed = [rng.random((reps, n)) < np.minimum(1.0, base * f) for f in factors]
        self.u_drift = rng.random((reps, n))

    def changed(self, run: int) -> np.ndarray:
        """(reps, n): run `run` (1-3 noise, 4 candidate) differs from the baseline (run 0)."""
        return self.departed[0] | self.departed[run]

    def own(self, drift: float) -> np.ndarray:
        """(reps, n): the candidate's own departures, its drift included."""
        return self.departed[4] | (self.u_drift < drift / 100)

    def candidate(self, drift: float) -> np.ndarray:
        """(reps, n): the candidate differs from the baseline."""
        return self.departed[0] | self.own(drift)


def alarm_rate(world: SpreadWorld, noise_runs: int, drift: float = 0.0) -> float:
    cand = world.candidate(drift)
    n = cand.shape[1]
    if noise_runs == 1:
        noise = world.changed(1)
        c_only = (cand & ~noise).sum(axis=1)
        n_only = (noise & ~cand).sum(axis=1)
        alarms = [NoiseTest(n, 0, 0, int(c), int(z), mcnemar_exact(int(c), int(z))).drifts_more
                  for c, z in zip(c_only, n_only, strict=True)]
        return float(np.mean(alarms))
    runs = range(noise_runs + 1)  # the baseline and the noise runs
    among = [[(world.departed[a] | world.departed[b]).sum(axis=1) for b in runs] for a in runs]
    own = world.own(drift)
    to_cand = [(world.departed[a] | own).sum(axis=1) for a in runs]
    alarms = [spread_test([int(c[i]) for c in to_cand],
                          [[int(x[i]) for x in row] for row in among], n).exceeds
              for i in range(cand.shape[0])]
    return float(np.mean(alarms))


def detected_at_power(rate: Callable[[float], float], high: float = 40.0,
                      steps: int = 10) -> float:
    low = 0.0
    if rate(high) < POWER:
        return float("inf")
    for _ in range(steps):
        mid = (low + high) / 2
        low, high = (mid, high) if rate(mid) < POWER else (low, mid)
    return high


def report(reps: int, seed: int) -> list[list[str]]:
    rows = []
    for log_sd in LOG_SDS:
        world = SpreadWorld(log_sd, N_ITEMS, reps, seed)
        for k in NOISE_RUNS:
            false_alarms = alarm_rate(world, k)
            power = detected_at_power(partial(alarm_rate, world, k))
            rows.append([f"{log_sd:g}", str(k), f"{100 * false_alarms:.1f}%",
                         "-" if power == float("inf") else f"{power:.1f}"])
    return rows
