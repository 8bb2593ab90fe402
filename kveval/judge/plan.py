"""`kveval plan`: from a pilot, the items and noise runs each task needs for the gate to catch
a given change with a given power, and the change it can catch at the pilot's size.

A pilot is a baseline run, optionally noise runs and a candidate. Its own figures set the
plan: the share of answers that flip between runs (baseline against the candidate, else
against the noise runs), each count's rate and the runs' spread (measured with two noise
runs, else assumed as the gate assumes it), each divergence's per-item spread. The levels are
the gate's first step (judge/checks.py Levels), the family counted as at least a verdict
check, truncated and empty per task, as the full runs will hold. The power functions are
those the gate's detectable figures use (judge/detect.py), so a plan and the verdict it leads
to speak of the same test; bench/plan_agreement.py checks them against the whole gate
simulated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kveval.judge.checks import TASK_WEIGHT, Levels, first_step_levels
from kveval.judge.compare import Side
from kveval.judge.decide import TaskEvidence
from kveval.judge.detect import (
    POWER,
    CountFloor,
    detectable_extra,
    detectable_loss,
    detectable_shift,
    items_for_loss,
)
from kveval.judge.floor import ASSUMED_SPREAD, logit_share
from kveval.judge.stats import PairedTable
from kveval.judge.verdict import Family, examine

MOST_NOISE_RUNS = 8


@dataclass(frozen=True)
class Targets:
    detect: float = 2.0  # accuracy points
    detect_drift: float = 10.0  # points of the task's items changed beyond the floor
    detect_kl: float | None = None  # nats per token
    power: float = POWER
    alpha: float = 0.05


@dataclass(frozen=True)
class TaskPlan:
    task: str
    kind: str  # "accuracy", "drift" or "divergence"
    items: int  # in the pilot
    available: int | None  # the most items the task's data can supply (None: no limit)
    items_needed: int | None  # None: no size reaches the target
    noise_runs_needed: int | None
    detectable: float | None  # at the pilot's size, in the kind's unit
    best: float | None  # at `available` items (accuracy), or with MOST_NOISE_RUNS (drift)
    flip_rate: float | None = None
    level: float = 0.05
    note: str = ""


def accuracy_plan(task: str, table: PairedTable, available: int | None, targets: Targets,
                  level: float, note: str = "") -> TaskPlan:
    """Items for the accuracy check to catch a loss of `detect` points at the pilot's flip
    rate; the best loss the data can show when it cannot supply them."""
    n = table.n
    rate = table.discordant / n if n else 0.0
    ceiling = table.baseline_correct / n if n else 1.0
    needed = items_for_loss(targets.detect / 100, rate, level, targets.power)
    here = detectable_loss(n, rate, level, ceiling, targets.power) if n else None
    short = available is not None and (needed is None or needed > available)
    best = detectable_loss(available, rate, level, ceiling, targets.power) \
        if short and available else None
    return TaskPlan(task, "accuracy", n, available, needed, 0, _points(here), _points(best),
                    rate, level, note)


def _points(value: float | None) -> float | None:
    return None if value is None else 100 * value


def pool_figures(mean: float, spread: float | None, runs: int, n: int) -> tuple[float, ...]:
    """`runs` figures of n items around `mean` whose logit-scale sd is `spread` (None: all
    equal), the shape of a pool the spread part would see."""
    if runs < 2 or not spread:
        return (mean,) * runs
    centre = logit_share(mean, n)
    offsets = np.linspace(-1, 1, runs)
    offsets *= spread / float(offsets.std(ddof=1))
    shares = 1 / (1 + np.exp(-(centre + offsets)))
    return tuple(float(s * (n + 1) - 0.5) for s in shares)


def drift_plan(task: str, n: int, mean: float, spread: float | None, pilot_runs: int,
               targets: Targets, level: float) -> TaskPlan:
    """Noise runs for the drift check to catch `detect_drift` points of extra changes."""
    want = targets.detect_drift / 100 * n
    found: dict[int, float | None] = {}
    for k in range(1, MOST_NOISE_RUNS + 1):
        figures = pool_figures(mean, spread if k >= 2 else None, k + 1, n)
        found[k] = detectable_extra(CountFloor(n, figures, k + 1), level, targets.power)
    needed = next((k for k, extra in found.items() if extra is not None and extra <= want), None)
    here = found.get(max(pilot_runs, 1))
    return TaskPlan(task, "drift", n, n, n, needed, _share(here, n),
                    _share(found[MOST_NOISE_RUNS], n), None, level)


def _share(count: float | None, n: int) -> float | None:
    return None if count is None else 100 * count / n


def divergence_plan(task: str, items: int, item_spread: float, noise_means: Sequence[float],
                    targets: Targets, level: float) -> TaskPlan | None:
    """Items for the divergence check to catch `detect_kl` nats per token."""
    if targets.detect_kl is None or items == 0:
        return None
    from scipy.stats import norm

    z = float(norm.isf(level) + norm.ppf(targets.power))
    needed = math.ceil(items * (z * item_spread / targets.detect_kl) ** 2) if item_spread else 1
    here = detectable_shift(item_spread, noise_means, level, targets.power)
    runs = len(noise_means)
    run_part = detectable_shift(0.0, noise_means, level, targets.power)
    enough = runs if run_part <= targets.detect_kl else None
    return TaskPlan(task, "divergence", items, None, max(needed, 1), enough, here, None, None,
                    level)


@dataclass(frozen=True)
class Plan:
    tasks: tuple[TaskPlan, ...]
    levels: Levels
    noise_runs: int  # in the pilot
    flip_source: str  # what the flip rates were measured against
    targets: Targets


def _pilot(base: Side, noises: Sequence[Side], cand: Side | None) -> tuple[Side, list[Side], str]:
    """The run that stands for the candidate in the pilot, the pool, and what flips measure."""
    if cand is not None:
        return cand, list(noises), f"baseline against the candidate {cand.label}"
    if noises:
        return noises[0], list(noises[1:]), f"baseline against the noise run {noises[0].label}"
    return base, [], "nothing (the baseline alone: no flip is measured)"


def plan(base: Side, noises: Sequence[Side] = (), cand: Side | None = None,
         targets: Targets = Targets(), available: dict[str, int | None] | None = None,
         family: Family | None = None) -> Plan:
    """Every task's plan from a pilot."""
    other, pool, source = _pilot(base, noises, cand)
    ex = examine(base, other, pool, family=family or Family(alpha=targets.alpha))
    levels = first_step_levels(ex.checks, targets.alpha, len(ex.evidence) * TASK_WEIGHT)
    found = []
    for e in ex.evidence:
        plans = _task_plans(e, len(noises), targets, levels, (available or {}).get(e.task))
        found += plans or _unplanned(e, base)
    return Plan(tuple(found), levels, len(noises), source, targets)


UNPLANNED = ("no ground truth to plan accuracy on, and its drift check needs a noise floor "
             "the pilot lacks: give a --candidate and a --noise run, or --noise twice")


def _unplanned(e: TaskEvidence, base: Side) -> list[TaskPlan]:
    """A task none of the checks can be planned for is named with the reason, never
    dropped without a word."""
    if e.skipped or e.missing:
        return []
    items = sum(1 for item in base.items if item.task == e.task)
    return [TaskPlan(e.task, "drift", items, None, None, None, None, None, note=UNPLANNED)]


def _task_plans(e: TaskEvidence, noise_runs: int, targets: Targets, levels: Levels,
                available: int | None) -> list[TaskPlan]:
    if e.skipped or e.missing:
        return []
    found = []
    if e.accuracy is not None:
        found.append(accuracy_plan(e.task, e.accuracy.decisive.table, available, targets,
                                   levels.primary))
    elif e.changed is not None:
        t = e.changed
        spread = (float(np.std([logit_share(q, t.items) for q in t.figures], ddof=1))
                  if t.spread_measured else ASSUMED_SPREAD)
        found.append(drift_plan(e.task, t.items, float(np.mean(t.figures)), spread, noise_runs,
                                targets, levels.primary))
    if e.divergence is not None and e.divergence.items:
        d = divergence_plan(e.task, e.divergence.items, e.divergence.item_spread,
                            e.divergence.noise_means, targets, levels.other)
        found += [d] if d else []
    return found
