"""`kveval plan --detect-kl` against the divergence test simulated: do the forced noise runs and
items the plan asks for from a pilot make the gate's test (judge/divergence.py kl_test) catch
the rise 80% of the time?

The world is the H200's forced runs (issue 27: llama-server with CUDA, 16 slots, SmolLM2-135M;
489 GSM8K items; four forced f16 restarts whose mean KLs against forced f16-a lie within 2.0%
of each other; q8_0 6.1% above them): item i's typical KL b_i is lognormal (log-sd 1) with
mean 0.0123 nats per token; restart r's per-item mean KL against the baseline is
b_i exp(u_r + tau z_ri - tau^2 / 2), u_r ~ N(0, between) a restart's own effect, z_ri ~ N(0, 1)
the item's; a candidate multiplies it by 1 + rise. Defaults: between = 0.006 and tau = 0.094,
which give four restarts' means a log-sd of 0.0095, their range 2.0% on average.

For each of --pilots pilots (the baseline and --pilot-restarts forced restarts, no candidate)
the plan is made by judge/plan.py divergence_plan; then the test is simulated (--reps
replicates a cell, at the plan's level) to find what it really needs: the fewest noise runs
whose power reaches 80% at the plan's items, and the fewest items (a grid) at the plan's noise
runs. Prints, per rise, the plan's answers (median and range over pilots), the simulated
needs, their ratios, and the simulated power at the plan's own sizes.

    python bench/kl_plan.py [--rises 6.1,10,20] [--pilots 20] [--reps 300] [--level 0.01]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kveval.judge.divergence import ItemDivergence, Position  # noqa: E402
from kveval.judge.kl_test import kl_test  # noqa: E402
from kveval.judge.plan import Targets, divergence_plan  # noqa: E402

ITEM_GRID = (10, 20, 30, 50, 75, 100, 150, 200, 300, 489, 700, 1000, 1500, 2500, 4000)


@dataclass(frozen=True)
class World:
    items: int = 489
    mean: float = 0.0123
    item_log_sd: float = 1.0
    between: float = 0.006
    tau: float = 0.094


def typical(world: World, rng: np.random.Generator, items: int) -> np.ndarray:
    b = rng.lognormal(0.0, world.item_log_sd, items)
    return b * world.mean / float(np.exp(world.item_log_sd ** 2 / 2))


def run_kls(world: World, b: np.ndarray, rng: np.random.Generator, rise: float = 0.0
            ) -> np.ndarray:
    u = rng.normal(0.0, world.between)
    z = rng.normal(0.0, 1.0, b.size)
    return b * np.exp(u + world.tau * z - world.tau ** 2 / 2) * (1 + rise)


def as_items(values: np.ndarray) -> list[ItemDivergence]:
    return [ItemDivergence(("gsm8k", str(i)), (Position(float(v), True),), None)
            for i, v in enumerate(values)]


def pilot_plan(world: World, rng: np.random.Generator, restarts: int, rise: float,
               level: float, most_items: int | None) -> tuple[int | None, int | None]:
    b = typical(world, rng, world.items)
    runs = [as_items(run_kls(world, b, rng)) for _ in range(restarts)]
    test = kl_test(runs[0], *runs[1:])
    targets = Targets(detect_kl=rise, kl_relative=True)
    plan = divergence_plan("gsm8k", test, True, targets, level, most_items)
    assert plan is not None
    return plan.noise_runs_needed, plan.items_needed


def power(world: World, rng: np.random.Generator, runs: int, items: int, rise: float,
          level: float, reps: int) -> float:
    caught = 0
    for _ in range(reps):
        b = typical(world, rng, items)
        cand = as_items(run_kls(world, b, rng, rise))
        noise = [as_items(run_kls(world, b, rng)) for _ in range(runs)]
        caught += kl_test(cand, *noise).p_value <= level
    return caught / reps


def fewest_runs(world: World, rng: np.random.Generator, items: int, rise: float,
                level: float, reps: int) -> int | None:
    return next((k for k in range(1, 9)
                 if power(world, rng, k, items, rise, level, reps) >= 0.8), None)


def fewest_items(world: World, rng: np.random.Generator, runs: int, rise: float,
                 level: float, reps: int) -> int | None:
    return next((n for n in ITEM_GRID
                 if power(world, rng, runs, n, rise, level, reps) >= 0.8), None)


def _spread(values: list[int | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "none"
    none = len(values) - len(known)
    return (f"{int(np.median(known))} ({min(known)}-{max(known)})"
            + (f", {none} none" if none else ""))


def ratio(plan: int | None, true: int | None) -> str:
    return "-" if not plan or not true else f"{plan / true:.2f}"


def one_rise(world: World, args: argparse.Namespace, rise: float) -> None:
    rng = np.random.default_rng(args.seed)
    plans = [pilot_plan(world, rng, args.pilot_restarts, rise / 100, args.level, world.items)
             for _ in range(args.pilots)]
    runs = [k for k, _ in plans]
    k = int(np.median([r for r in runs if r is not None])) if any(runs) else None
    true_k = fewest_runs(world, rng, world.items, rise / 100, args.level, args.reps)
    free = [pilot_plan(world, rng, args.pilot_restarts, rise / 100, args.level, None)
            for _ in range(args.pilots)]
    n_at = [n for r, n in free if r == k]
    n = int(np.median(n_at)) if n_at else None
    true_n = fewest_items(world, rng, k, rise / 100, args.level, args.reps) if k else None
    at_plan = power(world, rng, k, world.items, rise / 100, args.level, args.reps) if k else 0.0
    print(f"{rise:>5.1f}% {_spread(runs):>14} {str(true_k):>10} {ratio(k, true_k):>6}  "
          f"{_spread(n_at):>18} {str(true_n):>10} {ratio(n, true_n):>6}  {at_plan:>6.1%}",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rises", default="6.1,10,20", help="relative rises, percent")
    parser.add_argument("--pilots", type=int, default=20)
    parser.add_argument("--pilot-restarts", type=int, default=3)
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--level", type=float, default=0.01)
    parser.add_argument("--between", type=float, default=World.between)
    parser.add_argument("--tau", type=float, default=World.tau)
    parser.add_argument("--seed", type=int, default=27)
    args = parser.parse_args()
    world = World(between=args.between, tau=args.tau)
    rng = np.random.default_rng(args.seed)
    b = typical(world, rng, world.items)
    means = [[float(run_kls(world, b, rng).mean()) for _ in range(4)] for _ in range(500)]
    sd = float(np.mean([np.log(m).std(ddof=1) for m in means]))
    spread = float(np.mean([max(m) / min(m) - 1 for m in means]))
    print(f"world: {world.items} items, floor {world.mean} nats, four restarts' log-sd "
          f"{sd:.4f}, range {spread:.1%}; pilot: the baseline and {args.pilot_restarts} forced "
          f"restarts; level {args.level}; {args.pilots} pilots, {args.reps} replicates a cell")
    print(f"{'rise':>6} {'plan: runs':>14} {'sim: runs':>10} {'ratio':>6}  "
          f"{'plan: items':>18} {'sim: items':>10} {'ratio':>6}  {'power at plan (489 items)':>6}")
    for rise in (float(r) for r in args.rises.split(",")):
        one_rise(world, args, rise)


if __name__ == "__main__":
    main()
