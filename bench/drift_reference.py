"""The drift check (kveval/judge/floor.py changed_test) in the worlds a prompt file lives
in: its A/A false alarms at several levels and its power, beside the bound: what a test that
knows the world's true spread would catch.

Worlds: `j-shaped` (bench/power_cases.py's: 50 prompts, J-shaped fragility with mean 0.1,
every departure a fresh answer) and the prompts task of bench/calibration_worlds.py in the
calibration bench's `loss-biased` (J-shaped, mean 0.2, departures to one shared alternative
70% of the time), `fresh` (flat fragility, fresh answers) and `correlated` (the noise runs
share half their run effect) families; restarts differing with log-sd 0, 0.25, 0.5 and 1; one
to three noise runs. `worst` is the largest ratio of a world's A/A rate to the level.

Power: in `j-shaped` the candidate departs on 19% of the other items on top (about 18 changed
against the baseline, a restart about 10: power_cases' `drift`); elsewhere the calibration
bench's `prompts +20`; at drift's level in the rollout suite (0.0038). The bounds know the
world: each statistic held to its own A/A quantile in that very world (read from the same A/A
rollouts), so they are what the data allow, not what a test that must estimate the spread from
two or three restarts can have:
- `changes`: the candidate's changed answers against the baseline;
- `Z`: item by item, the candidate's excess of disagreements, sum over items of d(candidate)
  less the mean over runs of d(r), d(r) the number of other runs answering the item otherwise
  than run r (an item every other run answers alike weighs (M - 1)(M - 2) / M, one the runs
  already answer in several ways less: an item a restart never moves is stronger evidence).

Beside them, `Z within items`: Z referred to its exact permutation distribution within items
(conditional on each item's answers the candidate is a random one of the M runs, the pmf of
its disagreements a convolution over items), with no allowance for restarts that differ: the
counting variance known exactly, the spread between restarts not at all. Its A/A at the level
and its power show what the counting part alone gives, and what the spread costs.

After the table: Z held to the A/A quantile of each log-sd, on each log-sd's candidate: what
a test that holds its level where restarts differ more, knowing the world otherwise, can
still catch where they differ less.

    .venv/bin/python bench/drift_reference.py [--null 2000] [--reps 400] [--noise-runs 1,2,3]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy.special import expit, logit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_worlds import SUITE, simulate_task  # noqa: E402
from calibration_worlds import run_effects as world_effects  # noqa: E402
from gate_calibration import FAMILIES, SPREADS  # noqa: E402

from kveval.judge.floor import changed_test  # noqa: E402

LEVELS = (0.05, 0.0038, 0.001)  # 0.0038: the drift check's share on the rollout suite
LEVEL = 0.0038
WORLDS = ("j-shaped", "loss-biased", "fresh", "correlated")


def j_shaped(spread: float, k: int, changed: bool, rng: np.random.Generator) -> np.ndarray:
    """power_cases' drift world as codes: runs x 50 items, a departure a fresh answer."""
    n, runs = 50, k + 2
    fragility = np.clip(rng.beta(0.3, 0.3 * 0.9 / 0.1, n), 1e-6, 1 - 1e-6)
    effect = spread * rng.standard_normal(runs)
    departs = rng.random((runs, n)) < expit(logit(fragility)[None, :] + effect[:, None])
    if changed:
        departs[-1] |= rng.random(n) < 0.19
    return np.where(departs, 1 + np.arange(runs)[:, None], 0)


def calibration_world(family: str, spread: float, k: int, changed: bool,
                      rng: np.random.Generator) -> np.ndarray:
    """The calibration bench's prompts task as codes, its `prompts +20` on top."""
    world = replace(FAMILIES[family], spread=spread)
    effects = world_effects(world, k + 2, len(SUITE), rng)
    task = SUITE[1]
    codes = simulate_task(task, world, effects[:, 1], rng).codes
    if changed:
        codes[-1] = np.where(rng.random(task.n) < 0.2, 90, codes[-1])
    return codes


def codes_of(world: str, spread: float, k: int, changed: bool,
             rng: np.random.Generator) -> np.ndarray:
    if world == "j-shaped":
        return j_shaped(spread, k, changed, rng)
    return calibration_world(world, spread, k, changed, rng)


def disagreements(codes: np.ndarray) -> np.ndarray:
    """Runs x items: how many of the other runs answer each item otherwise than this run."""
    same = (codes[:, None, :] == codes[None, :, :]).sum(axis=1)
    return codes.shape[0] - same


def excess(codes: np.ndarray) -> float:
    """Z of the candidate (the last of runs x items of answer codes)."""
    d = disagreements(codes).astype(float)
    return float((d[-1] - d.mean(axis=0)).sum())


def within_items_p(codes: np.ndarray) -> float:
    """P(the candidate's disagreements >= its own) when on each item it is a random one of
    the M runs (1 where its answers are a pool run's, item for item)."""
    if (codes[:-1] == codes[-1][None, :]).all(axis=1).any():
        return 1.0
    d = disagreements(codes)
    m = codes.shape[0]
    pmf = np.ones(1)
    for column in d.T:
        pmf = np.convolve(pmf, np.bincount(column, minlength=m) / m)
    return float(min(1.0, pmf[int(d[-1].sum()):].sum()))


def rollouts(world: str, spread: float, k: int, changed: bool, reps: int,
             ) -> np.ndarray:
    """Columns of `reps` rollouts: the gate's p, Z, the candidate's changes against the
    baseline, Z's within-items p."""
    rng = np.random.default_rng([k, int(spread * 100), WORLDS.index(world), changed])
    found = np.empty((reps, 4))
    for r in range(reps):
        codes = codes_of(world, spread, k, changed, rng)
        found[r] = (changed_test([list(run) for run in codes]).p_value, excess(codes),
                    float((codes[-1] != codes[0]).sum()), within_items_p(codes))
    return found


def above(null: np.ndarray, found: np.ndarray, level: float) -> float:
    """The share of `found` beyond `null`'s upper quantile at this level (a bound's power)."""
    return float(np.mean(found > np.quantile(null, 1 - level)))


Zs = dict[tuple[str, int, float], tuple[np.ndarray, np.ndarray]]  # A/A Z, changed Z a cell


def row(world: str, k: int, spread: float, reps: tuple[int, int], zs: Zs,
        ) -> tuple[list[float], str]:
    null, found = (rollouts(world, spread, k, False, reps[0]),
                   rollouts(world, spread, k, True, reps[1]))
    zs[world, k, spread] = null[:, 1], found[:, 1]
    rates = [float(np.mean(null[:, 0] < lv)) for lv in LEVELS]
    power = [float(np.mean(found[:, 0] < LEVEL)), above(null[:, 1], found[:, 1], LEVEL),
             above(null[:, 2], found[:, 2], LEVEL), float(np.mean(null[:, 3] < LEVEL)),
             float(np.mean(found[:, 3] < LEVEL))]
    text = (f"| {world} | {k} | {spread:g} | " + " | ".join(f"{100 * r:.2f}%" for r in rates)
            + " | " + " | ".join(f"{100 * x:.{2 if i == 3 else 1}f}%" for i, x in enumerate(power))
            + " |")
    return rates, text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--null", type=int, default=2000, help="A/A rollouts a cell")
    parser.add_argument("--reps", type=int, default=400, help="changed rollouts a cell")
    parser.add_argument("--noise-runs", default="1,2,3")
    parser.add_argument("--worlds", default=",".join(WORLDS))
    parser.add_argument("--spreads", default=",".join(map(str, SPREADS)))
    args = parser.parse_args()
    started = time.perf_counter()
    worst = dict.fromkeys(LEVELS, 0.0)
    zs: Zs = {}
    print("| world | noise runs | log-sd | " + " | ".join(f"A/A at {lv:g}" for lv in LEVELS)
          + f" | power at {LEVEL:g} | bound: Z | bound: changes"
          " | Z within items: A/A | Z within items: power |")
    print("|---" * (len(LEVELS) + 8) + "|")
    for k in (int(x) for x in args.noise_runs.split(",")):
        for world in args.worlds.split(","):
            for spread in (float(s) for s in args.spreads.split(",")):
                rates, text = row(world, k, spread, (args.null, args.reps), zs)
                for lv, r in zip(LEVELS, rates, strict=True):
                    worst[lv] = max(worst[lv], r / lv)
                print(text, flush=True)
    print("worst A/A / level: " + ", ".join(f"{lv:g}: {w:.2f}" for lv, w in worst.items()))
    assumed(zs)
    print(f"({time.perf_counter() - started:.0f} s)")


def assumed(zs: Zs) -> None:
    """What a test must give up to hold its level where restarts differ more: Z held to the
    A/A quantile of each log-sd (knowing the world otherwise), on each log-sd's candidate."""
    print("\nZ held to the A/A quantile of the log-sd in the column, on the row's candidate:")
    for (world, k, spread), (_, found) in zs.items():
        cells = [f"at {s:g}: {100 * above(null, found, LEVEL):.1f}%"
                 for (w, j, s), (null, _) in zs.items() if (w, j) == (world, k)]
        print(f"{world}, {k} noise runs, log-sd {spread:g}: " + ", ".join(cells))


if __name__ == "__main__":
    main()
