"""Worlds that real servers live in, as run files in memory: the baseline, its noise runs
(restarts sent in another order) and a candidate, for every task of the rollout suite.

What a GPU server does, each a switch of `World`:
- item fragility is J-shaped (a Beta with a < 1): most items never move, a few move in
  every run;
- a departure usually lands on a shared alternative answer (a temperature-0 fork continues
  deterministically), not a fresh one;
- the run effect is additive on the logit scale of each item's departure probability and
  saturates; restarts differ with log-sd `spread`, a shared part (a restart moves every task
  together) and a part of each task's own;
- loss-biased departures: a departed answer is right with p = 0.55 where the usual answer is
  right and 0.25 where it is wrong (`biased`), so for an accurate model a restart that departs
  more scores lower; else a departed answer is right with the item's own accuracy (a fresh
  draw, the first bench's model);
- truncation is overdispersed: a few long items truncate often, with a run multiplier that
  follows the run effect; bad batches: with p = `burst` a run cuts half of 32 consecutive
  items of its sending order, across tasks (or empties them);
- correlated restarts (`correlated`): the noise runs share part of their run effect
  (restarts back to back), the baseline and candidate do not;
- items that never move are more often right (`stable_right`: easy items are both), so a
  departure from an item every run answers alike costs more than one from a fragile item.

The candidate is one more draw of the baseline's setup, with the scenario's change on top.
Runs are `Side`s built from `ItemRecord`s, judged by kveval's own `gate()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import expit, logit

from kveval.formats.records import ItemRecord
from kveval.judge.sides import Side


@dataclass(frozen=True)
class TaskModel:
    name: str
    n: int
    lengths: int  # 0: not long-context; else the items spread over this many lengths
    change: float  # mean share of items a restart departs on
    accuracy: float | None  # None: no ground truth
    graded: bool = False
    truncate: float = 0.01
    empty: float = 0.003


SUITE = (
    TaskModel("gsm8k", 500, 0, 0.07, 0.85, truncate=0.024),
    TaskModel("prompts", 50, 0, 0.2, None),
    TaskModel("needle", 40, 4, 0.1, 0.8),
    TaskModel("evidence", 126, 6, 0.1, 0.7),
    TaskModel("copy", 18, 3, 0.2, 0.5, graded=True),
    TaskModel("mrcr", 24, 4, 0.2, 0.5, graded=True),
)
LENGTHS = (1024, 4096, 16384, 32768, 65536, 131072)


@dataclass(frozen=True)
class World:
    spread: float = 0.5  # log-sd of the run effect between restarts
    biased: bool = True  # loss-biased departures
    fragility: float = 0.15  # the Beta's a: small is J-shaped
    shared_alternative: float = 0.7  # a departure's chance of the item's one shared alternative
    burst: float = 0.15  # a run's chance of one bad batch
    correlated: float = 0.0  # the share of their run effect the noise runs have in common
    stable_right: float = 0.0  # how far an item's accuracy rises as its fragility falls
    gsm8k_n: int = 500
    gsm8k_change: float = 0.07  # the share of GSM8K answers a restart departs on


SCENARIOS = ("A/A", "gsm8k -4", "truncated +6", "needle lost @max", "prompts +20")


def suite_of(world: World) -> tuple[TaskModel, ...]:
    return tuple(replace(t, n=world.gsm8k_n, change=world.gsm8k_change) if t.name == "gsm8k"
                 else t for t in SUITE)


@dataclass
class TaskRuns:
    """One task's runs x items: answer codes, correctness, scores, cut and empty answers."""

    codes: np.ndarray
    correct: np.ndarray
    scores: np.ndarray
    truncated: np.ndarray
    empty: np.ndarray


def run_effects(world: World, runs: int, tasks: int, rng: np.random.Generator) -> np.ndarray:
    """runs x tasks: a shared part per run, a part per run and task; the noise runs (1 ..
    runs - 2) share `correlated` of theirs."""
    own = rng.standard_normal(runs)
    common = rng.standard_normal()
    noise = slice(1, runs - 1)
    c = world.correlated
    own[noise] = np.sqrt(c) * common + np.sqrt(1 - c) * own[noise]
    z = 0.8 * own[:, None] + 0.6 * rng.standard_normal((runs, tasks))
    return world.spread * z


def _fragility(mean: float, a: float, n: int, rng: np.random.Generator) -> np.ndarray:
    b = a * (1 - mean) / mean
    return np.clip(rng.beta(a, b, n), 1e-6, 1 - 1e-6)


def simulate_task(t: TaskModel, world: World, effect: np.ndarray,
                  rng: np.random.Generator) -> TaskRuns:
    """`effect`: each run's shift of the departure logit for this task."""
    runs, n = effect.size, t.n
    pi = _fragility(t.change, world.fragility, n, rng)
    depart = rng.random((runs, n)) < expit(logit(pi)[None, :] + effect[:, None])
    acc = t.accuracy if t.accuracy is not None else 0.5
    item_acc = _stable_right(rng.beta(8 * acc, 8 * (1 - acc), n), pi, world.stable_right)
    usual = rng.random(n) < item_acc
    right = np.where(usual, 0.55, 0.25) if world.biased else item_acc
    shared = rng.random((runs, n)) < world.shared_alternative
    codes = np.where(depart, np.where(shared, 1, 2 + np.arange(runs)[:, None]), 0)
    alt_right, fresh_right = rng.random(n) < right, rng.random((runs, n)) < right
    correct = np.where(depart, np.where(shared, alt_right[None, :], fresh_right), usual)
    usual_score, alt_score = rng.beta(2, 2, n), rng.beta(2, 2, n)
    scores = (np.where(depart, np.where(shared, alt_score, rng.beta(2, 2, (runs, n))),
                       usual_score) if t.graded else correct.astype(float))
    cut = _overdispersed(t.truncate, effect, world, rng, n)
    empty = ~cut & _overdispersed(t.empty, effect, world, rng, n)
    return TaskRuns(codes, correct, scores, cut, empty)


def _stable_right(item_acc: np.ndarray, fragility: np.ndarray, strength: float,
                  ) -> np.ndarray:
    """Each item's accuracy shifted on the logit scale by its fragility's rank: up to
    2 x strength for the sturdiest item, down as far for the most fragile."""
    if not strength:
        return item_acc
    rank = (np.argsort(np.argsort(fragility)) + 0.5) / fragility.size
    return expit(logit(np.clip(item_acc, 1e-6, 1 - 1e-6)) + 4 * strength * (0.5 - rank))


FOLLOWS, OWN = 0.3, 0.2  # a run's cut and empty rates: their logit shift per run effect, own


def _overdispersed(rate: float, effect: np.ndarray, world: World, rng: np.random.Generator,
                   n: int) -> np.ndarray:
    """A few items flagged often, at a run multiplier that follows the run effect."""
    pi = _fragility(rate, 0.3, n, rng)
    shift = FOLLOWS * effect + OWN * world.spread * rng.standard_normal(effect.size)
    return rng.random((effect.size, n)) < expit(logit(pi)[None, :] + shift[:, None])


def flag_spread(world: World) -> float:
    """The sd of a run's logit shift of its cut (and empty) rate between restarts."""
    return float(np.hypot(FOLLOWS, OWN)) * world.spread


def apply_scenario(task: TaskModel, r: TaskRuns, scenario: str, lengths: np.ndarray,
                   rng: np.random.Generator) -> None:
    """The candidate's change (its row, the last), in place."""
    n = task.n
    if scenario == "gsm8k -4" and task.name == "gsm8k":
        lose = r.correct[-1] & (rng.random(n) < 0.04 / (task.accuracy or 1))
    elif scenario == "needle lost @max" and task.name == "needle":
        lose = r.correct[-1] & (lengths == task.lengths - 1)
    elif scenario == "truncated +6" and task.name == "gsm8k":
        r.truncated[-1] |= rng.random(n) < 0.06
        return
    elif scenario == "prompts +20" and task.name == "prompts":
        r.codes[-1] = np.where(rng.random(n) < 0.2, 90, r.codes[-1])
        return
    else:
        return
    r.correct[-1] &= ~lose
    r.scores[-1] = np.where(lose, 0.0, r.scores[-1])
    r.codes[-1] = np.where(lose, 99, r.codes[-1])


def _bursts(world: World, cut: list[np.ndarray], empty: list[np.ndarray],
            orders: np.ndarray, rng: np.random.Generator) -> None:
    """Bad batches: with p = world.burst, half of 32 consecutive items a run sends are cut
    (or, one time in four, come back empty), across tasks. `cut` and `empty`: per task,
    runs x items, changed in place; `orders`: runs x all items, the sending order."""
    sizes = [c.shape[1] for c in cut]
    starts = np.cumsum([0, *sizes])
    for run in range(orders.shape[0]):
        if rng.random() >= world.burst:
            continue
        begin = rng.integers(0, orders.shape[1] - 32)
        hit = orders[run, begin:begin + 32][rng.random(32) < 0.5]
        target = empty if rng.random() < 0.25 else cut
        for index in hit:
            task = int(np.searchsorted(starts, index, side="right") - 1)
            target[task][run, index - starts[task]] = True


@dataclass(frozen=True)
class Rollout:
    baseline: Side
    noises: tuple[Side, ...]
    candidate: Side


def simulate(world: World, noise_runs: int, scenario: str,
             rng: np.random.Generator) -> Rollout:
    suite = suite_of(world)
    runs = noise_runs + 2
    effects = run_effects(world, runs, len(suite), rng)
    found = []
    for j, t in enumerate(suite):
        r = simulate_task(t, world, effects[:, j], rng)
        apply_scenario(t, r, scenario, _length_bucket(t), rng)
        found.append(r)
    total = sum(t.n for t in suite)
    orders = np.array([np.arange(total) if run in (0, runs - 1) else rng.permutation(total)
                       for run in range(runs)])
    _bursts(world, [r.truncated for r in found], [r.empty for r in found], orders, rng)
    sides = [_side(suite, found, run, orders[run], f"run{run}") for run in range(runs)]
    return Rollout(sides[0], tuple(sides[1:-1]), sides[-1])


def gsm8k_runs(world: World, noise_runs: int, scenario: str,
               rng: np.random.Generator) -> TaskRuns:
    """One rollout's GSM8K runs alone (the suite's first task), drawn as `simulate` draws them,
    with the scenario applied: for benches of one check."""
    suite = suite_of(world)
    effects = run_effects(world, noise_runs + 2, len(suite), rng)
    task = suite[0]
    r = simulate_task(task, world, effects[:, 0], rng)
    apply_scenario(task, r, scenario, _length_bucket(task), rng)
    return r


def _length_bucket(t: TaskModel) -> np.ndarray:
    return np.arange(t.n) % max(t.lengths, 1)


def _record(t: TaskModel, r: TaskRuns, run: int, i: int) -> ItemRecord:
    cut, empty = bool(r.truncated[run, i]), bool(r.empty[run, i])
    output = "" if empty else f"{r.codes[run, i]}" + (f" cut {run}" if cut else "")
    meta: dict[str, object] = {}
    if t.lengths:
        meta = {"target_tokens": LENGTHS[i % t.lengths], "depth": 50,
                "measured_tokens": LENGTHS[i % t.lengths]}
        if t.graded:
            meta["score"] = 0.0 if cut or empty else float(r.scores[run, i])
    correct = None
    if t.accuracy is not None and not t.graded:
        correct = bool(r.correct[run, i]) and not cut and not empty
    return ItemRecord(task=t.name, item_id=f"{t.name}/{i:04d}", prompt_sha256=f"{t.name}{i}",
                      request={}, status="ok", output=output,
                      finish_reason="length" if cut else "stop", correct=correct, meta=meta)


def _side(suite: Sequence[TaskModel], found: Sequence[TaskRuns], run: int,
          order: np.ndarray, label: str) -> Side:
    every = [_record(t, r, run, i) for t, r in zip(suite, found, strict=True)
             for i in range(t.n)]
    return Side(label=label, path=f"{label}.jsonl", items=tuple(every[k] for k in order))
