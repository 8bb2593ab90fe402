"""The truncation check (kveval/judge/floor.py own_count_test on answers cut short) beside
its bound, on GSM8K 500 of the calibration bench's worlds: its A/A at its level in the
rollout suite's family (weight 3 of 26 at alpha 0.05: 0.0058) and its power against 6% more
answers cut short (`truncated +6`), beside a test that knows the world's true spread: the
candidate's count of cut answers held to its own A/A quantile in that very world (read from
the same A/A rollouts). The task alone, without bad batches (they cut across tasks: the
whole gate's bench has them).

    .venv/bin/python bench/truncation_bound.py [--null 2000] [--reps 400] [--noise-runs 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_worlds import gsm8k_runs  # noqa: E402
from gate_calibration import FAMILIES, SPREADS  # noqa: E402

from kveval.judge.floor import own_count_test  # noqa: E402

LEVEL = 0.05 * 3 / 26  # the truncation check's share on the rollout suite


def rollout(family: str, spread: float, k: int, scenario: str,
            rng: np.random.Generator) -> tuple[float, float]:
    """(the gate's p, the candidate's cut answers) of one rollout's GSM8K runs."""
    world = replace(FAMILIES[family], spread=spread)
    r = gsm8k_runs(world, k, scenario, rng)
    cut = r.truncated
    return own_count_test(cut[-1], cut[:-1]).p_value, float(cut[-1].sum())


def cell(family: str, spread: float, k: int, scenario: str, reps: int) -> np.ndarray:
    rng = np.random.default_rng([k, int(spread * 100), len(family), len(scenario)])
    return np.array([rollout(family, spread, k, scenario, rng) for _ in range(reps)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--null", type=int, default=2000, help="A/A rollouts a cell")
    parser.add_argument("--reps", type=int, default=400, help="truncated +6 rollouts a cell")
    parser.add_argument("--noise-runs", default="2")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"| family | noise runs | log-sd | A/A at {LEVEL:.4f} | truncated +6 | bound |")
    print("|---|---|---|---|---|---|")
    for k in (int(x) for x in args.noise_runs.split(",")):
        for family in FAMILIES:
            for spread in SPREADS:
                null = cell(family, spread, k, "A/A", args.null)
                found = cell(family, spread, k, "truncated +6", args.reps)
                bar = np.quantile(null[:, 1], 1 - LEVEL)
                print(f"| {family} | {k} | {spread:g} | {100 * np.mean(null[:, 0] < LEVEL):.2f}% | "
                      f"{100 * np.mean(found[:, 0] < LEVEL):.1f}% | "
                      f"{100 * np.mean(found[:, 1] > bar):.1f}% |", flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
