"""The accuracy check's new-answers test (kveval/judge/novel.py) in every world of the
calibration bench: its A/A false alarms at several levels, and its power against a 4-point
loss, on the GSM8K task alone (the arrays the gate reads, without the rest of the suite).

The test's reference (PRIORS["novel"] in kveval/judge/spread.py: the declared spread of the
cost rate between restarts, and the t reference's degrees of freedom) is calibrated here: the
null tail of the statistic is heavier than normal and moves with the world, so it is held to a
reference whose false-alarm rate stays at or below each level in every world (loss-biased,
fresh, correlated restarts, stable-right items; log-sd 0 to 1; two and three noise runs).
`worst` is the largest ratio of a world's A/A rate to the level; at most 1 within Monte Carlo
error is the target.

    .venv/bin/python bench/novel_reference.py [--null 4000] [--reps 1000] [--noise-runs 2,3]
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

from kveval.judge.novel import novel_cost  # noqa: E402

LEVELS = (0.05, 0.0115, 0.005, 0.001)  # 0.0115: the accuracy check's share on the suite


def p_value(world: object, k: int, scenario: str, rng: np.random.Generator) -> float | None:
    """The test's p on one rollout's GSM8K runs; None where it does not apply."""
    r = gsm8k_runs(world, k, scenario, rng)  # type: ignore[arg-type]
    collapsed = r.truncated | r.empty
    found = novel_cost(r.codes, ~r.correct | collapsed, collapsed)
    return None if found is None else found.p_value


def cell(family: str, spread: float, k: int, scenario: str, reps: int) -> np.ndarray:
    world = replace(FAMILIES[family], spread=spread)
    rng = np.random.default_rng([k, int(spread * 100), len(family), len(scenario)])
    found = [p_value(world, k, scenario, rng) for _ in range(reps)]
    return np.array([1.0 if p is None else p for p in found])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--null", type=int, default=4000, help="A/A rollouts a cell")
    parser.add_argument("--reps", type=int, default=1000, help="4-point losses a cell")
    parser.add_argument("--noise-runs", default="2,3")
    args = parser.parse_args()
    started = time.perf_counter()
    worst = dict.fromkeys(LEVELS, 0.0)
    print("| family | noise runs | log-sd | " + " | ".join(f"A/A at {lv:g}" for lv in LEVELS)
          + " | 4-point loss at 0.0115 |")
    print("|---" * (len(LEVELS) + 4) + "|")
    for k in (int(x) for x in args.noise_runs.split(",")):
        for family in FAMILIES:
            for spread in SPREADS:
                null = cell(family, spread, k, "A/A", args.null)
                loss = cell(family, spread, k, "gsm8k -4", args.reps)
                rates = [float(np.mean(null < lv)) for lv in LEVELS]
                for lv, r in zip(LEVELS, rates, strict=True):
                    worst[lv] = max(worst[lv], r / lv)
                print(f"| {family} | {k} | {spread:g} | "
                      + " | ".join(f"{100 * r:.2f}%" for r in rates)
                      + f" | {100 * float(np.mean(loss < 0.0115)):.1f}% |", flush=True)
    print("worst A/A / level: " + ", ".join(f"{lv:g}: {w:.2f}" for lv, w in worst.items()))
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
