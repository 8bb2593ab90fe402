"""What a perfectly calibrated accuracy check could give in the calibration worlds: the
gate's own statistic, and the plain wrong count, each held to the exact quantile of its own
A/A distribution instead of to a p-value's reference.

For each log-sd the bench draws many A/A rollouts (the candidate one more restart) and
4-point GSM8K losses in the loss-biased world of bench/calibration_worlds.py with two noise
runs, and reads the gate's accuracy check on GSM8K (`gate()`, the code `kveval gate` runs).
Oracle thresholds: the accuracy check's level quantile of the A/A rollouts' p-values (the
gate's statistic, calibrated by the world itself), and of the candidate's wrong count less
the pool's mean (what restarts' accuracy alone tells). Power: the share of losses beyond
each threshold. No test that knows only these runs can calibrate better than the world
itself; where even the oracle stays below 80%, the shortfall is the statistic's, not its
reference's.

    .venv/bin/python bench/accuracy_oracle.py [--null 2000] [--reps 500] [--jobs 16]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_worlds import World, simulate  # noqa: E402

from kveval.judge.checks import first  # noqa: E402
from kveval.judge.verdict import gate  # noqa: E402

SPREADS = (0.0, 0.5, 1.0)


def one(args: tuple[float, str, int]) -> tuple[float, float, float, bool]:
    """(the check's p, its level, the wrong count's gap, shown) of one rollout."""
    spread, scenario, seed = args
    rng = np.random.default_rng(seed)
    r = simulate(World(spread=spread), 2, scenario, rng)
    report = gate(r.baseline, r.candidate, list(r.noises))
    check = first(report.checks, "gsm8k", "accuracy")
    pooled = report.examined.pooled("gsm8k")
    gap = float(pooled.candidate - np.mean(pooled.pool)) if pooled else 0.0
    return check.p_value, check.level, gap, check.alarmed


def measure(pool: multiprocessing.pool.Pool, spread: float, null: int, reps: int) -> str:
    base = int(spread * 1000) * 100_000
    aa = pool.map(one, [(spread, "A/A", base + i) for i in range(null)], chunksize=16)
    loss = pool.map(one, [(spread, "gsm8k -4", base + 50_000 + i) for i in range(reps)],
                    chunksize=16)
    level = float(np.median([x[1] for x in aa]))
    p_cut = float(np.quantile([x[0] for x in aa], level))
    gap_cut = float(np.quantile([x[2] for x in aa], 1 - level))
    gate_power = np.mean([x[3] for x in loss])
    by_p = np.mean([x[0] < p_cut or (x[0] <= p_cut and p_cut < 1) for x in loss])
    by_gap = np.mean([x[2] > gap_cut for x in loss])
    false = np.mean([x[3] for x in aa])
    return (f"| {spread:g} | {level:.4f} | {100 * false:.1f}% | {100 * gate_power:.1f}% | "
            f"{100 * by_p:.1f}% | {100 * by_gap:.1f}% |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--null", type=int, default=2000, help="A/A rollouts a log-sd")
    parser.add_argument("--reps", type=int, default=500, help="4-point losses a log-sd")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"GSM8K 500 items, two noise runs, loss-biased world; {args.null} A/A and "
          f"{args.reps} 4-point losses a log-sd")
    print("| log-sd | the check's level | gate A/A (accuracy) | gate: power | "
          "oracle, the gate's statistic | oracle, the wrong count |")
    print("|---|---|---|---|---|---|")
    with multiprocessing.Pool(args.jobs) as pool:
        for spread in SPREADS:
            print(measure(pool, spread, args.null, args.reps), flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
