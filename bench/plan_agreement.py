"""`kveval plan`'s answers against the whole gate simulated: GSM8K, losses of 2, 3 and 5
points, flip rates of 2.5%, 6% and 25%.

For each cell, plan's power functions (kveval/judge/detect.py) give the items a loss needs
at 80% power with the gate's level for a GSM8K-only suite (accuracy's first Holm step beside
truncated and empty: alpha times its weight 5 over the family's 7); the gate
(kveval/judge/decide.py, the same code `kveval gate` runs) then judges that many simulated
items: a baseline and a candidate whose answers flip either way with the given rate and lose
the given points, with truncated and empty answers at GSM8K's rates. The simulated share of
rollouts that fail GSM8K should be 80% within its Monte Carlo error (about 1.6 points at 600
replicates).

    .venv/bin/python bench/plan_agreement.py [--reps 600] [--seed 0]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from kveval.judge.accuracy import PairedComparison, accuracy
from kveval.judge.checks import ALPHA, PRIMARY_WEIGHT, TASK_WEIGHT
from kveval.judge.decide import Options, TaskEvidence, decide
from kveval.judge.detect import items_for_loss, mcnemar_power
from kveval.judge.floor import own_count_test
from kveval.judge.stats import mcnemar_exact, paired_difference_ci, paired_table

LOSSES = (2.0, 3.0, 5.0)
FLIPS = (0.025, 0.06, 0.25)
ACCURACY = 0.6
LEVEL = ALPHA * PRIMARY_WEIGHT / TASK_WEIGHT  # accuracy's first step beside truncated, empty
TRUNCATE, EMPTY = 0.024, 0.003


def simulate(n: int, flips: float, loss: float, rng: np.random.Generator) -> TaskEvidence:
    """One GSM8K rollout: per item lost (flips / 2 + loss), gained (flips / 2), else as the
    baseline."""
    draw = rng.random(n)
    lost = draw < flips / 2 + loss
    gained = (draw >= flips / 2 + loss) & (draw < flips + loss)
    base = np.where(lost, True, np.where(gained, False, rng.random(n) < ACCURACY))
    cand = np.where(lost, False, np.where(gained, True, base))
    table = paired_table(list(base), list(cand))
    comp = PairedComparison("gsm8k", "flexible", accuracy(table.baseline_correct, n),
                            accuracy(table.candidate_correct, n), table,
                            paired_difference_ci(table), mcnemar_exact(table.lost, table.gained))
    cut, empty = rng.random((2, n)) < TRUNCATE, rng.random((2, n)) < EMPTY
    return TaskEvidence("gsm8k", accuracy=comp,
                        truncated=own_count_test(cut[1], cut[:1]),
                        empty=own_count_test(empty[1] & ~cut[1], (empty & ~cut)[:1]))


def simulated_power(n: int, flips: float, loss: float, reps: int, seed: int) -> float:
    rng = np.random.default_rng([seed, n, int(flips * 1000), int(loss * 10)])
    hits = 0
    for _ in range(reps):
        _, decisions = decide([simulate(n, flips, loss, rng)], Options())
        hits += decisions[0].status == "regression"
    return hits / reps


def rows(reps: int, seed: int) -> list[tuple[str, ...]]:
    level = LEVEL
    found = []
    for loss in LOSSES:
        for flips in FLIPS:
            n = items_for_loss(loss / 100, flips, level)
            assert n is not None
            predicted = mcnemar_power(n, flips, loss / 100, level)
            found.append((f"{loss:g}", f"{100 * flips:g}%", f"{n:,}", f"{100 * predicted:.1f}%",
                          f"{100 * simulated_power(n, flips, loss / 100, reps, seed):.1f}%"))
    return found


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    header = ("loss (points)", "flip rate", "plan: items needed", "plan: power",
              "gate simulated: power")
    print(f"GSM8K alone, alpha {ALPHA}: accuracy at {LEVEL:.3g} (weight {PRIMARY_WEIGHT:g} of "
          f"{TASK_WEIGHT:g}, beside truncated and empty), {args.reps} replicates per cell")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows(args.reps, args.seed):
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
