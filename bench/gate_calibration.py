"""The whole gate simulated on the rollout suite: family-wise A/A false alarms and power.

Every replicate makes a baseline, k noise runs (restarts of the baseline's setup) and a
candidate for each task of tasks/rollout.toml at its size (gsm8k 500, prompts 50, needle 40
over 4 lengths, evidence 126 over 6, copy 18 over 3, mrcr 24 over 4), builds each task's
evidence with kveval's own functions (judge/floor.py, judge/lengthstats.py,
judge/divergence.py) and decides with judge/decide.py: the same code the gate runs.

The model of a run. Each item has its own propensity to change between restarts (lognormal
around the task's rate, so hard items flip more); each run multiplies every item's
propensity by exp(sd * z - sd^2 / 2), z standard normal, drawn per run and task: restarts
differ in how much they change, with log-sd 0, 0.25, 0.5 or 1.0. A run that departs from an
item's usual answer gives an answer of its own, right with the item's own accuracy (a fresh
draw). Answers cut at max_tokens and empty answers come the same way, at their own rates and
with their own spread. Long-context items are 0/1 (needle, evidence) or graded (copy, mrcr:
a departed answer draws a fresh score). Per-item KL against the baseline: an item level times
a run factor with the same spread, times Gamma noise.

Scenarios (each against A/A, the candidate being one more run of the setup, judged with the
gate's defaults and, in "A/A --max-kl 0", with divergence among the checks too):
- gsm8k -4: the candidate turns each right GSM8K answer wrong with probability 4 / accuracy
  points (a 4-point loss);
- prompts +6: the candidate departs on 6% more prompt items;
- needle @32k: at the longest needle length the candidate loses 70% of its right answers;
- kl x3: the candidate's per-item KL is 3 times the floor's (q4_0 against f16 on a GPU was
  about 3.4 times, bench/divergence.py), judged with --max-kl 0.

    .venv/bin/python bench/gate_calibration.py [--reps 1000] [--seed 0] [--quick]
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kveval.judge.accuracy import PairedComparison, accuracy
from kveval.judge.checks import ALPHA
from kveval.judge.decide import Options, TaskEvidence, decide
from kveval.judge.divergence import ItemDivergence, Position, kl_test
from kveval.judge.floor import changed_test, own_count_test
from kveval.judge.lengthstats import paired_scores
from kveval.judge.stats import mcnemar_exact, paired_difference_ci, paired_table


@dataclass(frozen=True)
class TaskModel:
    name: str
    n: int
    lengths: int  # 0: not long-context
    change: float  # mean share of items a restart changes
    accuracy: float | None  # None: no ground truth
    graded: bool = False
    truncate: float = 0.01
    empty: float = 0.003


SUITE = (
    TaskModel("gsm8k", 500, 0, 0.05, 0.6, truncate=0.024),
    TaskModel("prompts", 50, 0, 0.2, None),
    TaskModel("needle", 40, 4, 0.1, 0.8),
    TaskModel("evidence", 126, 6, 0.1, 0.7),
    TaskModel("copy", 18, 3, 0.2, 0.5, graded=True),
    TaskModel("mrcr", 24, 4, 0.2, 0.5, graded=True),
)
SPREADS = (0.0, 0.25, 0.5, 1.0)
NOISE_RUNS = (0, 1, 2, 3)
SCENARIOS = ("A/A", "A/A --max-kl 0", "gsm8k -4", "prompts +6", "needle @32k", "kl x3")


@dataclass
class Runs:
    """One task's runs: baseline first, then the noise runs, last the candidate."""

    answers: np.ndarray  # runs x items, integer codes (0: the usual answer)
    correct: np.ndarray  # runs x items
    scores: np.ndarray  # runs x items
    truncated: np.ndarray
    empty: np.ndarray
    kl: np.ndarray  # runs x items, against the baseline (row 0 unused)
    lengths: np.ndarray  # items: the length bucket


def _factor(rng: np.random.Generator, runs: int, sd: float) -> np.ndarray:
    return np.exp(sd * rng.standard_normal(runs) - sd * sd / 2)[:, None]


def simulate(t: TaskModel, runs: int, sd: float, scenario: str,
             rng: np.random.Generator) -> Runs:
    n = t.n
    base_rate = t.change * np.exp(0.8 * rng.standard_normal(n) - 0.32)
    depart = rng.random((runs, n)) < np.minimum(0.95, base_rate * _factor(rng, runs, sd))
    if scenario == "prompts +6" and t.name == "prompts":
        depart[-1] |= rng.random(n) < 0.06
    acc = t.accuracy if t.accuracy is not None else 0.5
    item_acc = rng.beta(4 * acc, 4 * (1 - acc), n)
    usual = rng.random(n) < item_acc
    fresh = rng.random((runs, n)) < item_acc
    correct = np.where(depart, fresh, usual)
    usual_score, fresh_score = rng.beta(2, 2, n), rng.beta(2, 2, (runs, n))
    scores = (np.where(depart, fresh_score, usual_score) if t.graded else correct.astype(float))
    lengths = np.arange(n) % max(t.lengths, 1)
    _lose(t, scenario, rng, correct, scores, depart, lengths)
    truncated = rng.random((runs, n)) < t.truncate * _factor(rng, runs, sd)
    empty = ~truncated & (rng.random((runs, n)) < t.empty * _factor(rng, runs, sd))
    answers = np.where(depart | truncated | empty, np.arange(1, runs + 1)[:, None], 0)
    level = np.exp(rng.standard_normal(n))
    kl = level * _factor(rng, runs, sd) * rng.gamma(2.0, 0.5, (runs, n)) * 0.01
    if scenario == "kl x3":
        kl[-1] *= 3
    return Runs(answers, correct, scores, truncated, empty, kl, lengths)


def _lose(t: TaskModel, scenario: str, rng: np.random.Generator, correct: np.ndarray,
          scores: np.ndarray, depart: np.ndarray, lengths: np.ndarray) -> None:
    """The candidate's regression, applied in place to its row (the last)."""
    if scenario == "gsm8k -4" and t.name == "gsm8k":
        lost = correct[-1] & (rng.random(t.n) < 0.04 / (t.accuracy or 1))
    elif scenario == "needle @32k" and t.name == "needle":
        lost = correct[-1] & (lengths == t.lengths - 1) & (rng.random(t.n) < 0.7)
    else:
        return
    correct[-1] &= ~lost
    scores[-1] = np.where(lost, 0.0, scores[-1])
    depart[-1] |= lost


def _comparison(task: str, base: np.ndarray, cand: np.ndarray) -> PairedComparison:
    table = paired_table(list(base), list(cand))
    return PairedComparison(task, "flexible", accuracy(table.baseline_correct, table.n),
                            accuracy(table.candidate_correct, table.n), table,
                            paired_difference_ci(table), mcnemar_exact(table.lost, table.gained),
                            sole_metric=True)


def _divergence(r: Runs, k: int) -> object:
    if k == 0:
        return None
    items = [[ItemDivergence(("t", str(i)), (Position(float(v), True, None),), None)
              for i, v in enumerate(row)] for row in r.kl[1:]]
    return kl_test(items[-1], *items[:-1])


def evidence(t: TaskModel, r: Runs, k: int, max_kl: bool) -> TaskEvidence:
    pool = slice(0, k + 1)
    changed = changed_test([list(a) for a in r.answers]) if k else None
    by_length = [np.flatnonzero(r.lengths == b) for b in range(t.lengths)]
    lengths = tuple(paired_scores(b, list(r.scores[0, i]), list(r.scores[-1, i]))
                    for b, i in enumerate(by_length))
    across = (paired_scores(None, list(r.scores[0]), list(r.scores[-1]))
              if t.graded and t.lengths else None)
    recovery = None  # --min-recovery is not among the gate's defaults
    return TaskEvidence(
        t.name,
        accuracy=(_comparison(t.name, r.correct[0], r.correct[-1])
                  if t.accuracy is not None else None),
        changed=changed,
        truncated=own_count_test(r.truncated[-1], r.truncated[pool]),
        empty=own_count_test(r.empty[-1], r.empty[pool]),
        lengths=lengths, across=across, recovery=recovery,
        fewest_pairs=min((len(i) for i in by_length), default=0),
        divergence=_divergence(r, k) if max_kl else None)  # type: ignore[arg-type]


def replicate(k: int, sd: float, scenario: str, rng: np.random.Generator) -> set[str]:
    """The tasks the gate fails in one simulated rollout."""
    max_kl = scenario in ("kl x3", "A/A --max-kl 0")
    found = [evidence(t, simulate(t, k + 2, sd, scenario, rng), k, max_kl) for t in SUITE]
    _, decisions = decide(found, Options(max_kl=0.0 if max_kl else None))
    return {d.task for d in decisions if d.status == "regression"}


TARGETS = {"gsm8k -4": "gsm8k", "prompts +6": "prompts", "needle @32k": "needle"}


def rate(k: int, sd: float, scenario: str, reps: int, seed: int) -> float:
    """A/A: the share of replicates with any failed task; else the share in which the
    scenario's task (any task for kl x3) fails."""
    if scenario == "kl x3":
        return _rate(k, sd, scenario, reps, seed, None)
    return _rate(k, sd, scenario, reps, seed, TARGETS.get(scenario))


def _rate(k: int, sd: float, scenario: str, reps: int, seed: int, target: str | None) -> float:
    rng = np.random.default_rng([seed, k, int(sd * 100), SCENARIOS.index(scenario)])
    hits = 0
    for _ in range(reps):
        failed = replicate(k, sd, scenario, rng)
        hits += bool(failed) if target is None else target in failed
    return hits / reps


def table(rows: Sequence[tuple[str, ...]], header: tuple[str, ...]) -> str:
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=True)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
              for r in rows]
    return "\n".join(lines)


def cell(k: int, sd: float, scenario: str, args: argparse.Namespace) -> str:
    if k == 0 and scenario in ("prompts +6", "kl x3", "A/A --max-kl 0"):
        return "-"  # drift and divergence need a noise run
    reps = args.reps if scenario.startswith("A/A") else args.power_reps or args.reps
    return f"{100 * rate(k, sd, scenario, reps, args.seed):.1f}%"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--power-reps", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="0.25 and 1.0 only, 1-2 noise runs")
    parser.add_argument("--jobs", type=int, default=1, help="processes, one cell each")
    args = parser.parse_args(argv)
    spreads = (0.25, 1.0) if args.quick else SPREADS
    noise = (1, 2) if args.quick else NOISE_RUNS
    started = time.perf_counter()
    grid = [(k, sd, s) for k in noise for sd in spreads for s in SCENARIOS]
    with multiprocessing.Pool(args.jobs) as pool:
        found = pool.starmap(cell, [(k, sd, s, args) for k, sd, s in grid])
    cells = dict(zip(grid, found, strict=True))
    rows = [(str(k), f"{sd:g}", *(cells[k, sd, s] for s in SCENARIOS))
            for k in noise for sd in spreads]
    print(f"whole gate, rollout suite sizes, alpha {ALPHA}; {args.reps} replicates per A/A "
          f"cell, {args.power_reps or args.reps} per power cell (A/A: any task failed; kl x3: "
          f"any task failed with --max-kl 0; else: the task named failed)")
    print(table(rows, ("noise runs", "log-sd", *SCENARIOS)))
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
