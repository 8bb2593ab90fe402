"""`kveval plan`'s answers against the whole gate simulated: GSM8K alone, losses of 3, 5 and 8
points, flip rates of 1% (a quiet, batch-invariant server), 2.5%, 6% and 25%.

For each cell a pilot (500 items: a baseline, a noise run and a candidate that is another
restart) goes to `plan()`, which gives the items and noise runs a loss needs at 80% power
(judge/plan.py: with two noise runs or more the new answers' cost, as the gate judges it,
modelled from the pilot's three runs, judge/novel_power.py; the pool test where the pool
would hold too few new answers). The gate (`gate()`, the code `kveval gate` runs) then judges
that many simulated items with that many noise runs and a candidate that loses the given
points; the share of rollouts failing GSM8K should be at least 80% (the plan is conservative
where the restarts in fact agree: the prior stands in for a spread it cannot see).

Each run flips each item's usual answer with probability flips / 2 (its own answer, right
where the usual one is wrong and the other way round) and cuts 2.4% of the answers short (as
GSM8K at 256 tokens does, so the family holds the truncated and empty checks the plan counts
on); the candidate also turns each right answer wrong with probability loss / accuracy. In
the `noisy` world restarts differ: each run's flip probability is multiplied by e^(Z - 1/2),
Z normal (a log-sd of 1 between restarts), and a flipped answer that was right is wrong (an
accurate model's departures cost it).

`--pilots P` (P > 1) measures the procedure instead of one plan: each cell draws P pilots,
plans from each and simulates the gate reps / P times at each pilot's size (a pilot given no
size, or one over LARGEST, is counted apart and simulates nothing: the replicates column says
how many were), so the power printed is what a user who pilots once and is given a size gets
on average, the pilot's luck included (its own error is the plan's largest, so one pilot a
cell says more of that pilot than of the plan). Its seeds are its own.

    .venv/bin/python bench/plan_agreement.py [--reps 200] [--seed 0] [--jobs 9] [--noisy]
        [--pilots 1]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from functools import partial

import numpy as np

from kveval.formats.records import ItemRecord
from kveval.judge.plan import Targets, plan
from kveval.judge.sides import Side
from kveval.judge.verdict import gate

LOSSES = (3.0, 5.0, 8.0)
FLIPS = (0.01, 0.025, 0.06, 0.25)
ACCURACY = 0.6
PILOT = 500
CUT = 0.024  # answers cut short in every run
LARGEST = 30_000  # a plan for more items is printed, not simulated (minutes a replicate)


def runs(n: int, k: int, flips: float, loss: float, rng: np.random.Generator,
         noisy: bool = False) -> list[Side]:
    """The baseline, k noise runs and the candidate, last."""
    usual = rng.random(n) < ACCURACY
    found = []
    for r in range(k + 2):
        rate = flips / 2 * (float(np.exp(rng.standard_normal() - 0.5)) if noisy else 1.0)
        flipped = rng.random(n) < min(rate, 0.5)
        right = np.where(flipped, False if noisy else ~usual, usual)
        lost = right & (rng.random(n) < loss / ACCURACY) if r == k + 1 else np.zeros(n, bool)
        cut = rng.random(n) < CUT
        found.append(Side(f"r{r}", f"r{r}.jsonl", tuple(
            _item(i, r, bool(flipped[i] or lost[i]), bool(right[i] and not lost[i]),
                  bool(cut[i])) for i in range(n))))
    return found


def _item(i: int, run: int, moved: bool, right: bool, cut: bool) -> ItemRecord:
    return ItemRecord(task="gsm8k", item_id=f"gsm8k/{i}", prompt_sha256=str(i), request={},
                      status="ok", output=f"{i}" + (f" run {run}" if moved else ""),
                      finish_reason="length" if cut else "stop", correct=right and not cut)


def planned(flips: float, loss: float, rng: np.random.Generator,
            noisy: bool = False) -> tuple[int, int, str] | None:
    """(items, noise runs, the items asked at a new answer's cost one sd either way) the
    plan asks for, from one pilot."""
    base, noise, cand = runs(PILOT, 1, flips, 0.0, rng, noisy)
    found = plan(base, [noise], cand, Targets(detect=loss))
    task = found.tasks[0]
    if task.items_needed is None or task.noise_runs_needed is None:
        return None
    within = "-" if task.items_within is None else "-".join(
        "none" if n is None else f"{n:,}" for n in task.items_within)
    return task.items_needed, task.noise_runs_needed, within


def power(n: int, k: int, flips: float, loss: float, reps: int,
          rng: np.random.Generator, noisy: bool = False) -> float:
    hits = 0
    for _ in range(reps):
        *pool, cand = runs(n, k, flips, loss / 100, rng, noisy)
        report = gate(pool[0], cand, pool[1:])
        hits += any(d.status == "regression" for d in report.decisions)
    return hits / reps


def cell(loss: float, flips: float, reps: int, seed: int, noisy: bool) -> tuple[str, ...]:
    rng = np.random.default_rng([seed, int(loss * 10), int(flips * 1000), int(noisy)])
    asked = planned(flips, loss, rng, noisy)
    head = (f"{loss:g}", f"{100 * flips:g}%")
    if asked is None:
        return (*head, "none", "-", "-", "-")
    n, k, within = asked
    if n > LARGEST:
        return (*head, f"{n:,}", within, str(k), "not simulated")
    return (*head, f"{n:,}", within, str(k),
            f"{100 * power(n, k, flips, loss, reps, rng, noisy):.1f}%")


def procedure(loss: float, flips: float, reps: int, seed: int, noisy: bool,
              pilots: int) -> tuple[str, ...]:
    """One cell of the procedure: `pilots` pilots, each planned and its size simulated
    reps / pilots times; the sizes asked (median and range) and the power over them all."""
    rng = np.random.default_rng([seed, int(loss * 10), int(flips * 1000), int(noisy), pilots])
    asked = [planned(flips, loss, rng, noisy) for _ in range(pilots)]
    sized = [a for a in asked if a is not None and a[0] <= LARGEST]
    each = max(reps // pilots, 1)
    hits = [power(n, k, flips, loss, each, rng, noisy) for n, k, _ in sized]
    items = [n for n, _, _ in sized]
    restarts = [k for _, k, _ in sized]
    return (f"{loss:g}", f"{100 * flips:g}%",
            f"{np.median(items):,.0f} ({min(items):,}-{max(items):,})" if items else "-",
            f"{min(restarts)}-{max(restarts)}" if restarts else "-",
            f"{100 * float(np.mean(hits)):.1f}%" if hits else "-",
            f"{pilots - len(sized)} of {pilots}", str(each * len(sized)))


def rows(reps: int, seed: int, jobs: int = 1, noisy: bool = False,
         pilots: int = 1) -> Iterator[tuple[str, ...]]:
    """The cells in order, each as soon as it and those before it are measured."""
    cells = [(loss, flips) for loss in LOSSES for flips in FLIPS]
    measure = cell if pilots <= 1 else partial(procedure, pilots=pilots)
    if jobs <= 1:
        yield from (measure(loss, flips, reps, seed, noisy) for loss, flips in cells)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs) as pool:
        yield from pool.map(measure, *zip(*cells, strict=True), [reps] * len(cells),
                            [seed] * len(cells), [noisy] * len(cells))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="cells in this many processes")
    parser.add_argument("--noisy", action="store_true", help="restarts differ (log-sd 1)")
    parser.add_argument("--pilots", type=int, default=1, help="pilots a cell (the procedure)")
    args = parser.parse_args(argv)
    header = (("loss (points)", "flip rate", "plan: items", "cost one sd either way",
               "plan: noise runs", "gate simulated: power") if args.pilots <= 1 else
              ("loss (points)", "flip rate", "plan: items (median, range)",
               "plan: noise runs", "gate simulated: power", "pilots with no size simulated",
               "replicates"))
    world = "noisy (restarts differ with log-sd 1)" if args.noisy else "quiet"
    each = "" if args.pilots <= 1 else f", {max(args.reps // args.pilots, 1)} a pilot given a size"
    print(f"GSM8K alone, {world}, {args.pilots} pilot(s) of {PILOT} items a cell, 80% power "
          f"asked, {args.reps} replicates per cell{each}")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows(args.reps, args.seed, args.jobs, args.noisy, args.pilots):
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
