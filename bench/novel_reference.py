"""The accuracy check with two or three noise runs (kveval/judge/pooled.py: the new answers'
cost, kveval/judge/novel.py, or the pool test where the pool's runs agree item for item) in
every world of the calibration bench: its A/A false alarms at several levels, and its power
against a 4-point loss, on the GSM8K task alone (the arrays the gate reads, without the rest
of the suite). Every rollout counts, whichever path judged it; the share the pool test judged
is printed.

The test's declared spread of the cost rate between restarts (PRIORS["novel"] in
kveval/judge/spread.py) is calibrated here: held at or below each level in every world
(loss-biased, fresh, correlated restarts, stable-right items; log-sd 0 to 1; two and three
noise runs), where restarts change 7% of the answers (the bench's) and 2% (`quiet`: the pool
often holds a few new answers only). `worst` is the largest ratio of a world's A/A rate to the
level; at most 1 within Monte Carlo error is the target.

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

from kveval.judge.pooled import accuracy_of  # noqa: E402

LEVELS = (0.05, 0.0115, 0.005, 0.001)  # 0.0115: the accuracy check's share on the suite


CHANGES = {"": 0.07, "quiet ": 0.02}  # the share of GSM8K answers a restart departs on


def p_value(world: object, k: int, scenario: str, rng: np.random.Generator,
            ) -> tuple[float, bool]:
    """(the check's p on one rollout's GSM8K runs, whether the pool test judged it)."""
    r = gsm8k_runs(world, k, scenario, rng)  # type: ignore[arg-type]
    collapsed = r.truncated | r.empty
    wrong = ~r.correct | collapsed
    test = accuracy_of(r.codes, wrong, collapsed)
    return test.p_value, test.novel is None


def cell(family: str, spread: float, k: int, scenario: str, reps: int,
         change: float) -> tuple[np.ndarray, float]:
    world = replace(FAMILIES[family], spread=spread, gsm8k_change=change)
    rng = np.random.default_rng([k, int(spread * 100), len(family), len(scenario),
                                 int(change * 100)])
    found = [p_value(world, k, scenario, rng) for _ in range(reps)]
    return np.array([p for p, _ in found]), float(np.mean([pool for _, pool in found]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--null", type=int, default=4000, help="A/A rollouts a cell")
    parser.add_argument("--reps", type=int, default=1000, help="4-point losses a cell")
    parser.add_argument("--noise-runs", default="2,3")
    args = parser.parse_args()
    started = time.perf_counter()
    worst = dict.fromkeys(LEVELS, 0.0)
    print("| family | noise runs | log-sd | " + " | ".join(f"A/A at {lv:g}" for lv in LEVELS)
          + " | 4-point loss at 0.0115 | judged by the pool test |")
    print("|---" * (len(LEVELS) + 5) + "|")
    for k in (int(x) for x in args.noise_runs.split(",")):
        for name, change in CHANGES.items():
            for family in (f for f in FAMILIES if f != "quiet"):  # quiet: a change, here
                for spread in SPREADS:
                    null, by_pool = cell(family, spread, k, "A/A", args.null, change)
                    loss, _ = cell(family, spread, k, "gsm8k -4", args.reps, change)
                    rates = [float(np.mean(null < lv)) for lv in LEVELS]
                    for lv, r in zip(LEVELS, rates, strict=True):
                        worst[lv] = max(worst[lv], r / lv)
                    print(f"| {name}{family} | {k} | {spread:g} | "
                          + " | ".join(f"{100 * r:.2f}%" for r in rates)
                          + f" | {100 * float(np.mean(loss < 0.0115)):.1f}% "
                          f"| {100 * by_pool:.1f}% |", flush=True)
    print("worst A/A / level: " + ", ".join(f"{lv:g}: {w:.2f}" for lv, w in worst.items()))
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
