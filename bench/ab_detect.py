"""`kveval ab --detect`'s whole procedure simulated: its false-alarm rate with the adaptivity,
and its power, against the loss it was asked to show.

GSM8K alone (1,319 items, accuracy 60%). Each run flips each item's usual answer with
probability flips / 2; a candidate that loses also turns each right answer wrong with
probability loss / accuracy. A replicate draws every run whole, then plays `ab --detect`
on them: a pilot (the baseline and one restart on `--pilot` items), the plan (judge/plan.py),
the pool grown to what it asks (judge/sizing.py: the same code `ab` runs; a run's first items
are the ones it answered before it grew), planned again, until the plan asks no more; then
the candidate at that size and the gate (judge/verdict.py). A/A: the candidate is one more
restart. The gate's declared level is 0.05; the sizes chosen are printed beside the rates.

    .venv/bin/python bench/ab_detect.py [--reps 100] [--pilot 100] [--seed 0] [--jobs 2]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from kveval.formats.records import ItemRecord
from kveval.judge.plan import Targets, plan
from kveval.judge.sides import Side
from kveval.judge.sizing import Size, grows, wanted
from kveval.judge.verdict import gate

ITEMS = 1319
ACCURACY = 0.6
FLIPS = (0.025, 0.06)
LOSSES = (0.0, 3.0, 5.0)  # 0: A/A
MOST_PASSES = 6
LEAST = 2  # ab's default --noise-runs: the least restarts --detect grows to


def draw(flips: float, loss: float, usual: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One run's right answers, whole (its flips, its losses)."""
    flipped = rng.random(ITEMS) < flips / 2
    right = np.where(flipped, ~usual, usual)
    return right & ~(rng.random(ITEMS) < loss / 100 / ACCURACY)


def side(right: np.ndarray, usual: np.ndarray, n: int, name: str) -> Side:
    items = tuple(ItemRecord(task="gsm8k", item_id=f"gsm8k/{i}", prompt_sha256=str(i),
                             request={}, status="ok",
                             output=f"{i}" + ("" if right[i] == usual[i] else f" {name}"),
                             finish_reason="stop", correct=bool(right[i]))
                  for i in range(n))
    return Side(name, f"{name}.jsonl", items)


def sized(pool: list[np.ndarray], usual: np.ndarray, loss: float, pilot: int,
          flips: float, rng: np.random.Generator) -> Size:
    """The size `ab --detect` reaches on these runs (restarts drawn as it adds them)."""
    size = Size(pilot, 1)
    for _ in range(MOST_PASSES):
        n = size.items or ITEMS
        sides = [side(r, usual, n, f"r{k}") for k, r in enumerate(pool[:size.noise_runs + 1])]
        nxt = wanted(plan(sides[0], sides[1:], None, Targets(detect=loss),
                          {"gsm8k": ITEMS}), size, LEAST)
        if not grows(nxt, size):
            return size
        while len(pool) < nxt.noise_runs + 1:
            pool.append(draw(flips, 0.0, usual, rng))
        size = nxt
    return size


def replicate(flips: float, loss: float, detect: float, pilot: int,
              rng: np.random.Generator) -> tuple[bool, int, int]:
    usual = rng.random(ITEMS) < ACCURACY
    pool = [draw(flips, 0.0, usual, rng) for _ in range(2)]
    size = sized(pool, usual, detect, pilot, flips, rng)
    n = size.items or ITEMS
    sides = [side(r, usual, n, f"r{k}") for k, r in enumerate(pool[:size.noise_runs + 1])]
    cand = side(draw(flips, loss, usual, rng), usual, n, "cand")
    report = gate(sides[0], cand, sides[1:])
    return any(d.status == "regression" for d in report.decisions), n, size.noise_runs


def cell(flips: float, loss: float, detect: float, pilot: int, reps: int,
         seed: int) -> tuple[str, ...]:
    rng = np.random.default_rng([seed, int(flips * 1000), int(loss * 10)])
    found = [replicate(flips, loss, detect, pilot, rng) for _ in range(reps)]
    rate = sum(f for f, _, _ in found) / reps
    items, runs = [n for _, n, _ in found], [k for _, _, k in found]
    return (f"{100 * flips:g}%", "A/A" if loss == 0 else f"{loss:g}", f"{100 * rate:.1f}%",
            f"{int(np.median(items)):,} ({min(items):,}-{max(items):,})",
            f"{int(np.median(runs))} ({min(runs)}-{max(runs)})")


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--pilot", type=int, default=100)
    p.add_argument("--detect", type=float, default=3.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1)
    args = p.parse_args(argv)
    cells = [(f, loss) for f in FLIPS for loss in LOSSES]
    print(f"ab --detect {args.detect:g}, pilot {args.pilot}, GSM8K {ITEMS} at {ACCURACY:.0%}, "
          f"{args.reps} replicates a cell")
    header = ("flip rate", "loss (points)", "failed", "items judged (range)",
              "restarts (range)")
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    if args.jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.jobs) as ex:
            rows = list(ex.map(cell, *zip(*cells, strict=True), *(
                [v] * len(cells) for v in (args.detect, args.pilot, args.reps, args.seed))))
    else:
        rows = [cell(f, loss, args.detect, args.pilot, args.reps, args.seed)
                for f, loss in cells]
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
