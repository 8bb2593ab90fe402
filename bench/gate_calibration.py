"""The whole gate in the worlds real servers live in: family-wise A/A false alarms and power.

Every replicate makes a baseline, k noise runs (restarts sent in another order) and a
candidate for every task of tasks/rollout.toml at its size (gsm8k 500 or 1,319, prompts 50,
needle 40 over 4 lengths, evidence 126 over 6, copy 18 over 3, mrcr 24 over 4) as run records
in memory (bench/calibration_worlds.py), and judges them with kveval's own `gate()` at its
defaults: the code the command runs, from pairing to the decision.

Families (bench/calibration_worlds.py World): `loss-biased` (J-shaped fragility, shared
alternatives, logit-additive run effects, departed answers more often wrong on an accurate
model, overdispersed truncation following the run effect, and bad batches with p = 0.15 a
run), `fresh` (a departed answer right with the item's own accuracy, no bad batches: the
first bench's world), `correlated` (loss-biased, the noise runs sharing half of their run
effect: restarts back to back), `stable-right` (loss-biased, items that never move more often
right: a sturdy item's departure costs more), `quiet` (loss-biased, restarts departing on 2%
of the GSM8K answers instead of 7%: the pool often holds a few new answers only). Restarts
differ with log-sd 0, 0.25, 0.5 or 1.

Scenarios: A/A (the candidate is one more restart: the share of rollouts failing any task);
gsm8k -4 (each right GSM8K answer turned wrong with probability 4 / accuracy points);
truncated +6 (6% more GSM8K answers cut short); needle lost @max (every right needle answer
at the longest length lost); prompts +20 (20% more prompt answers changed): the share failing
that task.

    .venv/bin/python bench/gate_calibration.py [--reps 200] [--jobs 2] [--quick] [--write]

`--write` puts the table into docs/calibration.md between its markers and the A/A rates
into kveval/judge/calibration.py, which the gate prints beside a verdict with fewer than two
noise runs.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_worlds import SCENARIOS, World, simulate  # noqa: E402

from kveval.judge.checks import ALPHA  # noqa: E402
from kveval.judge.verdict import gate  # noqa: E402

FAMILIES = {
    "loss-biased": World(biased=True, burst=0.15),
    "fresh": World(biased=False, burst=0.0, fragility=1.0, shared_alternative=0.0),
    "correlated": World(biased=True, burst=0.15, correlated=0.5),
    "stable-right": World(biased=True, burst=0.15, stable_right=1.0),
    "quiet": World(biased=True, burst=0.15, gsm8k_change=0.02),
}
SPREADS = (0.0, 0.25, 0.5, 1.0)
NOISE_RUNS = (0, 1, 2, 3)
TARGETS = {"gsm8k -4": "gsm8k", "truncated +6": "gsm8k", "needle lost @max": "needle",
           "prompts +20": "prompts"}
ROOT = Path(__file__).resolve().parent.parent


def failed_tasks(world: World, k: int, scenario: str, rng: np.random.Generator) -> set[str]:
    r = simulate(world, k, scenario, rng)
    report = gate(r.baseline, r.candidate, list(r.noises))
    return {d.task for d in report.decisions if d.status == "regression"}


def rate(world: World, k: int, scenario: str, reps: int, seed: int) -> float:
    rng = np.random.default_rng([seed, k, int(world.spread * 100), world.gsm8k_n,
                                 SCENARIOS.index(scenario)])
    target = TARGETS.get(scenario)
    hits = 0
    for _ in range(reps):
        failed = failed_tasks(world, k, scenario, rng)
        hits += bool(failed) if target is None else target in failed
    return hits / reps


Cell = tuple[str, int, float, int, str]  # family, noise runs, log-sd, GSM8K items, scenario


def cells(quick: bool, noise: Sequence[int] = NOISE_RUNS,
          spreads: Sequence[float] = SPREADS) -> list[Cell]:
    spreads = (0.0, 1.0) if quick else spreads
    noise = (1, 2) if quick else noise
    found: list[Cell] = []
    for k in noise:
        for s in spreads:
            found.append(("loss-biased", k, s, 500, "A/A"))
            found.append(("loss-biased", k, s, 1319, "A/A"))
            found += [("loss-biased", k, s, 500, sc) for sc in SCENARIOS[1:]
                      if not (k == 0 and sc == "prompts +20")]
            found.append(("fresh", k, s, 500, "A/A"))
            found.append(("fresh", k, s, 500, "gsm8k -4"))
            if k:
                found.append(("correlated", k, s, 500, "A/A"))
            found.append(("stable-right", k, s, 500, "A/A"))
            found.append(("quiet", k, s, 500, "A/A"))
            found.append(("quiet", k, s, 500, "gsm8k -4"))
    return found


def declare(priors: Sequence[tuple[str, float, float]],
               weights: Sequence[tuple[str, float]] = ()) -> None:
    """Another declared prior or weight in each worker, to measure what it would give."""
    from kveval.judge import checks, spread

    for kind, value, df in priors:
        spread.PRIORS[kind] = spread.Prior(value, df)
    for kind, weight in weights:
        checks.WEIGHTS[kind] = weight


def measure(cell: Cell, reps: int, seed: int) -> float:
    family, k, s, n, scenario = cell
    world = replace(FAMILIES[family], spread=s, gsm8k_n=n)
    return rate(world, k, scenario, reps, seed)


def column(cell: Cell) -> str:
    family, _, _, n, scenario = cell
    name = "" if family == "loss-biased" else f"{family} "
    return f"{name}{scenario}" + (" n=1319" if n != 500 else "")


def table(results: dict[Cell, float]) -> str:
    columns = list(dict.fromkeys(column(c) for c in results))
    rows = sorted({(c[1], c[2]) for c in results})
    found = {(c[1], c[2], column(c)): v for c, v in results.items()}
    header = ("noise runs", "log-sd", *columns)
    body = [(str(k), f"{s:g}", *(f"{100 * found[k, s, col]:.1f}%" if (k, s, col) in found
                                  else "-" for col in columns)) for k, s in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *body, strict=True)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    rest = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
            for r in body]
    return "\n".join([line, rule, *rest])


def write_rates(results: dict[Cell, float], reps: int) -> None:
    """The loss-biased A/A rates into kveval/judge/calibration.py, which the gate prints
    beside a verdict with fewer than two noise runs."""
    rates: dict[int, dict[int, dict[float, float]]] = {}
    for (family, k, s, n, scenario), value in sorted(results.items()):
        if family == "loss-biased" and scenario == "A/A":
            rates.setdefault(k, {}).setdefault(n, {})[s] = value
    lines = [f"REPLICATES = {reps}", "A_A = {"]
    for k, by_n in rates.items():
        rows = [f"{n}: {{" + ", ".join(f"{s}: {v:.3f}" for s, v in by_s.items()) + "}"
                for n, by_s in by_n.items()]
        lines.append(f"    {k}: {{" + (",\n        ").join(rows) + "},")
    path = ROOT / "kveval/judge/calibration.py"
    text = path.read_text()
    begin, end = "# measured: begin\n", "# measured: end\n"
    head, rest = text.split(begin, 1)
    path.write_text(head + begin + "\n".join([*lines, "}"]) + "\n" + end
                    + rest.split(end, 1)[1])


def write_page(body: str) -> None:
    path = ROOT / "docs" / "calibration.md"
    text = path.read_text()
    begin, end = "<!-- calibration table: bench/gate_calibration.py --write -->", \
        "<!-- end of calibration table -->"
    if begin not in text:
        raise SystemExit(f"{path} has no {begin!r} marker")
    head, rest = text.split(begin, 1)
    path.write_text(head + begin + "\n" + body + "\n" + end + rest.split(end, 1)[1])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="log-sd 0 and 1, 1-2 noise runs")
    parser.add_argument("--jobs", type=int, default=1, help="processes, one cell each")
    parser.add_argument("--noise-runs", default="0,1,2,3", help="e.g. 2,3")
    parser.add_argument("--spreads", default="0,0.25,0.5,1", help="log-sds, e.g. 0,1")
    parser.add_argument("--prior", nargs=3, metavar=("KIND", "SPREAD", "DF"), action="append",
                        default=[], help="try another declared prior (judge/spread.py)")
    parser.add_argument("--weight", nargs=2, metavar=("KIND", "WEIGHT"), action="append",
                        default=[], help="try another declared weight (judge/checks.py)")
    parser.add_argument("--save", help="write the measured cells to this JSON file")
    parser.add_argument("--load", nargs="*", default=[],
                        help="measure nothing: read cells saved by --save (several join)")
    parser.add_argument("--write", action="store_true",
                        help="write the table into docs/calibration.md, the rates into "
                        "calibration.py")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.load:
        results = load(args.load)
    else:
        grid = cells(args.quick, [int(k) for k in args.noise_runs.split(",")],
                     [float(s) for s in args.spreads.split(",")])
        priors = [(kind, float(spread), float(df)) for kind, spread, df in args.prior]
        weights = [(kind, float(weight)) for kind, weight in args.weight]
        with multiprocessing.Pool(args.jobs, initializer=declare,
                                  initargs=(priors, weights)) as pool:
            found = pool.starmap(measure, [(c, args.reps, args.seed) for c in grid])
        results = dict(zip(grid, found, strict=True))
    if args.save:
        Path(args.save).write_text(json.dumps([[*c, v] for c, v in results.items()]))
    body = table(results)
    print(f"whole gate, rollout suite sizes, alpha {ALPHA}, {args.reps} replicates a cell "
          f"(A/A: any task failed; else the scenario's task failed)")
    print(body)
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.write:
        write_page(body)
        write_rates(results, args.reps)


def load(paths: Sequence[str]) -> dict[Cell, float]:
    found: dict[Cell, float] = {}
    for path in paths:
        for family, k, s, n, scenario, value in json.loads(Path(path).read_text()):
            found[(family, int(k), float(s), int(n), scenario)] = float(value)
    return found


if __name__ == "__main__":
    main()
