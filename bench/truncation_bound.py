"""The truncation check (kveval/judge/floor.py own_count_test on answers cut short) beside
its bound, on GSM8K 500 of the calibration bench's worlds: its A/A at its level in the
rollout suite's family (weight 3 of 26 at alpha 0.05: 0.0058) and its power against 6% more
answers cut short (`truncated +6`), beside three tests that know the world, each held to its
own A/A quantile in that very world (read from the same A/A rollouts):

- `bound`: the candidate's count of cut answers alone (it knows the world's rate, so it needs
  no pool);
- `spread known`: the check's own statistic, the logit of the candidate's cut share against
  the pool runs' mean, scaled with the world's true spread between restarts instead of one
  moderated from the pool's runs: what a test that must learn the rate from the pool reaches
  when it knows how much restarts differ;
- `held at 1`: the same statistic scaled with the spread of the family's most varied world
  (log-sd 1) in every world, held to its A/A quantile there, so it holds its level at every
  log-sd of the family without learning which one it is in: what a check that cannot tell
  the family's worlds apart can reach.

`--priors 0.2:3,0.3:10` adds, for each declared prior on the spread between restarts (a
log-sd and its degrees of freedom, `PRIORS["count"]` in kveval/judge/spread.py), the check's
A/A and power were it declared instead, on the same rollouts: where a prior buys power in
worlds whose restarts agree, and what it costs in level where they differ.

The task alone, without bad batches (they cut across tasks: the whole gate's bench has
them).

    .venv/bin/python bench/truncation_bound.py [--null 2000] [--reps 400] [--noise-runs 2]
        [--priors S:DF,...]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_worlds import flag_spread, gsm8k_runs  # noqa: E402
from gate_calibration import FAMILIES, SPREADS  # noqa: E402

from kveval.judge.floor import (  # noqa: E402
    CountTest,
    logit_share,
    logit_slope,
    logit_spread_p,
    own_count_test,
    own_counting,
)
from kveval.judge.spread import Prior  # noqa: E402

LEVEL = 0.05 * 3 / 26  # the truncation check's share on the rollout suite


def rollout(family: str, spread: float, k: int, scenario: str, priors: list[Prior],
            rng: np.random.Generator) -> tuple[float, ...]:
    """(the gate's p, the candidate's cut answers, the spread-known test's z, the same
    scaled with the family's largest spread, the check's p under each of `priors`) of one
    rollout's GSM8K runs."""
    world = replace(FAMILIES[family], spread=spread)
    cut = gsm8k_runs(world, k, scenario, rng).truncated
    widest = flag_spread(replace(world, spread=max(SPREADS)))
    test = own_count_test(cut[-1], cut[:-1])
    return (test.p_value, float(cut[-1].sum()), spread_known_z(cut, flag_spread(world)),
            spread_known_z(cut, widest), *(with_prior(test, cut[:-1], p) for p in priors))


def with_prior(test: CountTest, pool: np.ndarray, prior: Prior) -> float:
    """The check's p had `prior` been declared for the spread between restarts."""
    spread_p = logit_spread_p(test.candidate, test.pool, test.items, own_counting(pool),
                              prior)[0]
    return replace(test, spread_p=spread_p).p_value


def spread_known_z(cut: np.ndarray, sd: float) -> float:
    """The gate's statistic (runs x items, the candidate last) with the true spread `sd`."""
    n, pool = cut.shape[1], cut[:-1].sum(axis=1)
    figures = [logit_share(q, n) for q in pool]
    counting = own_counting(cut[:-1]) * logit_slope(float(np.mean(pool)), n) ** 2
    gap = logit_share(float(cut[-1].sum()), n) - float(np.mean(figures))
    return gap / float(np.sqrt((sd ** 2 + counting) * (1 + 1 / pool.size)))


def cell(family: str, spread: float, k: int, scenario: str, reps: int,
         priors: list[Prior]) -> np.ndarray:
    rng = np.random.default_rng([k, int(spread * 100), len(family), len(scenario)])
    return np.array([rollout(family, spread, k, scenario, priors, rng) for _ in range(reps)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--null", type=int, default=2000, help="A/A rollouts a cell")
    parser.add_argument("--reps", type=int, default=400, help="truncated +6 rollouts a cell")
    parser.add_argument("--noise-runs", default="2")
    parser.add_argument("--priors", default="", help="S:DF,... count priors to try beside")
    args = parser.parse_args()
    priors = [Prior(*map(float, p.split(":"))) for p in args.priors.split(",") if p]
    started = time.perf_counter()
    tried = "".join(f" prior {p.spread:g}:{p.df:g} |" for p in priors)
    print(f"| family | noise runs | log-sd | A/A at {LEVEL:.4f} | truncated +6 | held at 1 "
          f"| spread known | bound |{tried}")
    print("|---|---|---|---|---|---|---|---|" + "---|" * len(priors))
    for k in (int(x) for x in args.noise_runs.split(",")):
        for family in FAMILIES:
            nulls = {spread: cell(family, spread, k, "A/A", args.null, priors)
                     for spread in SPREADS}
            held = np.quantile(nulls[max(SPREADS)][:, 3], 1 - LEVEL)
            for spread, null in nulls.items():
                print(row(family, spread, k, args, null, held, priors), flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")


def row(family: str, spread: float, k: int, args: argparse.Namespace, null: np.ndarray,
        held: float, priors: list[Prior]) -> str:
    """One cell's line from its A/A rollouts: the check's A/A and power, the three tests
    beside it, then the check's A/A and power under each prior tried."""
    found = cell(family, spread, k, "truncated +6", args.reps, priors)
    bound, known = 100 * np.mean(found[:, 1:3] > np.quantile(null[:, 1:3], 1 - LEVEL, axis=0),
                                 axis=0)
    tried = "".join(f" {100 * np.mean(null[:, j] < LEVEL):.2f}%, "
                    f"{100 * np.mean(found[:, j] < LEVEL):.1f}% |" for j in range(4, null.shape[1]))
    return (f"| {family} | {k} | {spread:g} | {100 * np.mean(null[:, 0] < LEVEL):.2f}% | "
            f"{100 * np.mean(found[:, 0] < LEVEL):.1f}% | {100 * np.mean(found[:, 3] > held):.1f}% "
            f"| {known:.1f}% | {bound:.1f}% |{tried}")


if __name__ == "__main__":
    main()
