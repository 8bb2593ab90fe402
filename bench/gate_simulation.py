"""How often each gate policy false-alarms on A/A runs, and the smallest regression each
detects with 80% power at n = 1319 (the size of GSM8K's test split).

The policies are kveval's own functions (kveval.judge.verdict, kveval.judge.stats), fed
simulated counts.

Model of a run (accuracy 90%): one item in six is hard (right with probability 0.5), the
rest easy (0.98). Each item has a canonical answer; a run keeps it, or with the item's
instability (higher for hard items) gives a fresh answer, re-drawn right or wrong. Two runs
give identical answers when both keep the canonical one. Three instability levels:
"low" changes about 2.4% of answers between restarts (12 of 500, as in the issue's example),
"medium" about 10%, "high" about 25%.

A regression of D points: the candidate additionally turns each right answer wrong with
probability D / 90 (a fresh answer), so its expected accuracy is 90 - D. A drift of E points
(tasks without ground truth): the candidate gives a fresh answer to E% more items.

The noise floor's own spread (bench/noise_spread.py): with the change rate varying from
restart to restart (log-sd 0, 0.25, 0.5), the drift test's A/A false alarms and the drift it
detects with 80% power, for 1, 2 and 3 noise runs.

    .venv/bin/python bench/gate_simulation.py [--reps 4000] [--seed 0] [--spread-only]
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from kveval.judge.compare import NoiseTest
from kveval.judge.stats import Interval, PairedTable, mcnemar_exact, paired_difference_ci, wilson
from kveval.judge.verdict import (
    DEFAULT_MARGIN,
    drift_regression,
    overlap_regression,
    paired_regression,
)

ACCURACY = 0.90
HARD_SHARE = 1 / 6
P_EASY, P_HARD = 0.98, 0.5
N_GSM8K = 1319
POWER = 0.80
MARGINS = (1.0, 2.0, 3.0, 4.0)


@dataclass(frozen=True)
class Scenario:
    name: str
    unstable_easy: float  # probability an easy item's answer departs from the canonical one
    unstable_hard: float


SCENARIOS = (
    Scenario("low", 0.0072, 0.036),
    Scenario("medium", 0.031, 0.155),
    Scenario("high", 0.08, 0.40),
)


@dataclass(frozen=True)
class Run:
    correct: np.ndarray  # (reps, n) bool
    departed: np.ndarray  # (reps, n) bool: gave a fresh answer, not the canonical one


class World:
    """All random draws for `reps` replicates of n items: baseline, noise and candidate runs.

    The candidate's regression is applied by thresholds on fixed uniforms (common random
    numbers), so detection grows monotonically with the size of the regression.
    """

    def __init__(self, scenario: Scenario, n: int, reps: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        shape = (reps, n)
        hard = rng.random(shape) < HARD_SHARE
        self.p_right = np.where(hard, P_HARD, P_EASY)
        instability = np.where(hard, scenario.unstable_hard, scenario.unstable_easy)
        canonical = rng.random(shape) < self.p_right
        self.runs = [self._run(rng, canonical, instability) for _ in range(3)]
        self.u_loss, self.u_drift, self.u_fresh = (rng.random(shape) for _ in range(3))

    def _run(self, rng: np.random.Generator, canonical: np.ndarray,
             instability: np.ndarray) -> Run:
        departed = rng.random(canonical.shape) < instability
        fresh = rng.random(canonical.shape) < self.p_right
        return Run(np.where(departed, fresh, canonical), departed)

    @property
    def baseline(self) -> Run:
        return self.runs[0]

    @property
    def noise(self) -> Run:
        return self.runs[1]

    def candidate(self, loss: float = 0.0, drift: float = 0.0) -> Run:
        """loss and drift in points."""
        base = self.runs[2]
        redrawn = self.u_drift < drift / 100
        correct = np.where(redrawn, self.u_fresh < self.p_right, base.correct)
        broken = correct & (self.u_loss < loss / 100 / ACCURACY)
        return Run(correct & ~broken, base.departed | redrawn | broken)


def tables(base: Run, cand: Run) -> list[PairedTable]:
    a, b = base.correct, cand.correct
    cells = [(a & b), (a & ~b), (~a & b), (~a & ~b)]
    counts = np.stack([c.sum(axis=1) for c in cells], axis=1)
    return [PairedTable(*(int(x) for x in row)) for row in counts]


def noise_tests(base: Run, noise: Run, cand: Run) -> list[NoiseTest]:
    cand_changed = base.departed | cand.departed
    noise_changed = base.departed | noise.departed
    cand_only = (cand_changed & ~noise_changed).sum(axis=1)
    noise_only = (noise_changed & ~cand_changed).sum(axis=1)
    return [
        NoiseTest(items=base.correct.shape[1], candidate_changed=0, noise_changed=0,
                  candidate_only=int(c), noise_only=int(nz),
                  p_value=mcnemar_exact(int(c), int(nz)))
        for c, nz in zip(cand_only, noise_only, strict=True)
    ]


def overlap_rate(world: World, loss: float = 0.0) -> float:
    found = [overlap_regression(wilson(t.baseline_correct, t.n), wilson(t.candidate_correct, t.n))
             for t in tables(world.baseline, world.candidate(loss))]
    return float(np.mean(found))


def newcombe(t: PairedTable) -> Interval:
    """The comparator: Newcombe's square-and-add interval (Newcombe 1998, method 10)."""
    p_c, p_b = t.candidate_correct / t.n, t.baseline_correct / t.n
    cand, base = wilson(t.candidate_correct, t.n), wilson(t.baseline_correct, t.n)
    margins = [t.baseline_correct, t.n - t.baseline_correct, t.candidate_correct,
               t.n - t.candidate_correct]
    cross = float(t.both * t.neither - t.lost * t.gained)
    cross = cross - t.n / 2 if cross > t.n / 2 else min(cross, 0.0)
    phi = cross / math.sqrt(math.prod(margins)) if min(margins) else 0.0
    dc, ub = p_c - cand.low, base.high - p_b
    return Interval(p_c - p_b - math.sqrt(dc**2 - 2 * phi * dc * ub + ub**2), 1.0)


def paired_rate(world: World, margin: float, loss: float = 0.0,
                interval: Callable[[PairedTable], Interval] = paired_difference_ci) -> float:
    found = [paired_regression(interval(t), margin)
             for t in tables(world.baseline, world.candidate(loss))]
    return float(np.mean(found))


def drift_rate(world: World, drift: float = 0.0) -> float:
    tests = noise_tests(world.baseline, world.noise, world.candidate(drift=drift))
    return float(np.mean([drift_regression(t) for t in tests]))


def smallest_detected(rate: Callable[[float], float], high: float = 20.0, steps: int = 12) -> float:
    """Bisect for the smallest size (points) whose detection rate reaches POWER."""
    low = 0.0
    if rate(high) < POWER:
        return float("inf")
    for _ in range(steps):
        mid = (low + high) / 2
        if rate(mid) >= POWER:
            high = mid
        else:
            low = mid
    return high


def a_a_rates(world: World) -> dict[str, float]:
    base, noise = world.baseline, world.noise
    changed = float(np.mean(base.departed | noise.departed))
    discordant = float(np.mean(base.correct != noise.correct))
    rates = {"changed": changed, "discordant": discordant, "overlap": overlap_rate(world)}
    rates |= {f"paired {m:g}": paired_rate(world, m) for m in MARGINS}
    rates["drift"] = drift_rate(world)
    return rates


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                        enumerate(zip(row, widths, strict=True))))


def false_alarms(reps: int, seed: int) -> None:
    print(f"\nFalse alarms on A/A runs (same setup twice; the noise run a third time), {reps} "
          "replicates per row.\nA policy false-alarms when the gate would exit 1.")
    header = ["scenario", "n", "answers changed", "right/wrong flips", "overlap"]
    header += [f"paired m={m:g}" for m in MARGINS] + ["drift (--noise)"]
    rows = []
    for scenario in SCENARIOS:
        for n in (500, N_GSM8K):
            r = a_a_rates(World(scenario, n, reps, seed))
            rows.append([scenario.name, str(n), pct(r["changed"]), pct(r["discordant"]),
                         pct(r["overlap"]), *(pct(r[f"paired {m:g}"]) for m in MARGINS),
                         pct(r["drift"])])
    print_table(header, rows)


def boundary(reps: int, seed: int) -> None:
    print(f"\nThe paired interval at its boundary (n = {N_GSM8K}): how often --policy paired "
          "passes a candidate\nwhose true loss is exactly the margin (a one-sided 95% "
          "interval allows 2.5%). kveval uses Tango's\nscore interval; Newcombe's "
          "square-and-add interval is shown for comparison.")
    header = ["scenario", "interval", *(f"m={m:g}" for m in MARGINS)]
    rows = []
    for scenario in SCENARIOS:
        world = World(scenario, N_GSM8K, reps, seed)
        for name, interval in (("tango", paired_difference_ci), ("newcombe", newcombe)):
            rows.append([scenario.name, name, *(pct(1 - paired_rate(world, m, m, interval))
                                                for m in MARGINS)])
    print_table(header, rows)


def _mde(rate: Callable[[float], float]) -> str:
    """The smallest detected size, starred when the policy false-alarms above 5% at size 0."""
    return f"{smallest_detected(rate):.1f}" + ("*" if rate(0.0) > 0.05 else "")


def detection(reps: int, seed: int) -> None:
    print(f"\nSmallest regression detected with {POWER:.0%} power at n = {N_GSM8K} "
          f"({reps} replicates per step).\nAccuracy policies: points of accuracy lost. "
          "Drift: points of extra changed answers.\n* this policy false-alarms on more than "
          "5% of A/A runs here, so its detections are not evidence.")
    header = ["scenario", "overlap", *(f"paired m={m:g}" for m in MARGINS), "drift (--noise)"]
    rows = []
    for scenario in SCENARIOS:
        world = World(scenario, N_GSM8K, reps, seed)
        rates: list[Callable[[float], float]] = [partial(_overlap_at, world)]
        rates += [partial(_paired_at, world, m) for m in MARGINS]
        rates.append(partial(_drift_at, world))
        rows.append([scenario.name, *(_mde(rate) for rate in rates)])
    print_table(header, rows)


def _overlap_at(world: World, loss: float) -> float:
    return overlap_rate(world, loss=loss)


def _paired_at(world: World, margin: float, loss: float) -> float:
    return paired_rate(world, margin, loss=loss)


def _drift_at(world: World, drift: float) -> float:
    return drift_rate(world, drift=drift)


def spread(reps: int, seed: int) -> None:
    import noise_spread

    print(f"\nThe drift test when the change rate varies between restarts (medium instability, "
          f"n = {noise_spread.N_ITEMS}, {reps} replicates).\nOne noise run: exact McNemar; two "
          "or more: one-sided 95% prediction interval from the spread of the baseline's "
          "setup.\nDrift: points of extra changed answers detected with 80% power.")
    header = ["log-sd of the change rate", "noise runs", "A/A false alarms", "drift at 80% power"]
    print_table(header, noise_spread.report(reps, seed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=4000, help="replicates per estimate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--spread-only", action="store_true",
                        help="print only the noise-floor spread table")
    args = parser.parse_args()
    if args.spread_only:
        spread(max(500, args.reps // 2), args.seed)
        return
    print(f"kveval gate simulation: accuracy {ACCURACY:.0%}, seed {args.seed}; "
          f"the default paired margin is {DEFAULT_MARGIN:g} points")
    false_alarms(args.reps, args.seed)
    boundary(args.reps, args.seed)
    detection(max(500, args.reps // 2), args.seed + 1)
    spread(max(500, args.reps // 2), args.seed + 2)


if __name__ == "__main__":
    main()
