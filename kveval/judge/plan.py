"""`kveval plan`: from a pilot, the items and noise runs each task needs for the gate to catch
a given change with a given power, and the change it can catch at the pilot's size.

A pilot is a baseline run, optionally noise runs and a candidate. Its own figures set the
plan: the share of answers that flip between runs (baseline against the candidate, else
against the noise runs), how far a restart moves the wrong count (the pilot pool's spread
moderated by the declared prior, as the gate sees it: its counting part grows with the items,
its restart part in proportion to them, so more items alone cannot see below what restarts
do, and more noise runs sharpen the estimate), each count's rate and spread, each
divergence's per-item spread. The levels are
the gate's first step (judge/checks.py Levels), the family counted as at least a verdict
check, truncated and empty per task, as the full runs will hold. The power functions are
those the gate's detectable figures use (judge/detect.py), so a plan and the verdict it leads
to speak of the same test; bench/plan_agreement.py checks them against the whole gate
simulated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from kveval.judge.accuracy_power import AccuracyModel, Restarts
from kveval.judge.checks import TASK_WEIGHT, Levels, first_step_levels
from kveval.judge.compare import Side
from kveval.judge.decide import TaskEvidence
from kveval.judge.detect import (
    POWER,
    CountFloor,
    detectable_extra,
    detectable_shift,
)
from kveval.judge.floor import CountTest, logit_share, logit_slope
from kveval.judge.kl_power import Floor, item_sd, needed
from kveval.judge.kl_test import KlTest
from kveval.judge.novel_power import NovelPilot, of_pilot
from kveval.judge.pooled import scored_runs
from kveval.judge.power import smallest_size
from kveval.judge.spread import PRIORS, Spread, beyond_counting
from kveval.judge.stats import PairedTable
from kveval.judge.verdict import Family, examine

MOST_NOISE_RUNS = 8


@dataclass(frozen=True)
class Targets:
    detect: float = 2.0  # accuracy points
    detect_drift: float = 10.0  # points of the task's items changed beyond the floor
    detect_kl: float | None = None  # nats per token, or (kl_relative) a share of the floor's
    power: float = POWER
    alpha: float = 0.05
    kl_relative: bool = False


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
    floor: float | None = None  # divergence: the pilot floor's mean KL (nats per token)
    rise: float | None = None  # divergence: the target rise, in nats per token
    pilot_answers: int | None = None  # accuracy: the pilot's new answers a cost was read from
    # accuracy: items_needed with that cost one posterior sd lower and higher, at
    # noise_runs_needed (None: no size with that many)
    items_within: tuple[int | None, int | None] | None = None


def accuracy_plan(task: str, table: PairedTable, available: int | None, targets: Targets,
                  level: float, note: str = "", pooled: CountTest | None = None,
                  noise_runs: int = 0, novel: NovelPilot | None = None) -> TaskPlan:
    """Items and noise runs for the accuracy check to catch a loss of `detect` points: the
    fewest noise runs with which some size reaches it, and the items it then needs; the best
    loss the data can show when it cannot supply them. `novel`: the pilot's restarts' new
    answers, for the sizes the gate judges by their cost (judge/novel_power.py)."""
    n = table.n
    rate = table.discordant / n if n else 0.0
    ceiling = table.baseline_correct / n if n else 1.0
    model, want = AccuracyModel(rate, Restarts.of(pooled), novel), targets.detect / 100

    def needs(model: AccuracyModel, runs: int) -> int | None:
        return smallest_size(lambda m: model.short(m, runs, level, want, targets.power),
                             8, 10_000_000)

    runs = next((k for k in range(max(noise_runs, 2), MOST_NOISE_RUNS + 1)
                 if needs(model, k) is not None), None)
    needed = needs(model, runs) if runs is not None else None
    here = model.loss(n, noise_runs, level, ceiling, targets.power)
    short = available is not None and (needed is None or needed > available)
    best = model.loss(available, runs or MOST_NOISE_RUNS, level, ceiling,
                      targets.power) if short and available else None
    within = None if runs is None or needed is None else _within(needs, model, runs)
    within = None if within == (needed, needed) else within  # the pool test sizes it
    return TaskPlan(task, "accuracy", n, available, needed, runs, _points(here), _points(best),
                    rate, level, note, pilot_answers=novel.read_from if novel else None,
                    items_within=within)


def _within(needs: Callable[[AccuracyModel, int], int | None], model: AccuracyModel,
            runs: int) -> tuple[int | None, int | None] | None:
    """The items needed with the pilot's cost of a new answer one posterior sd lower and
    higher: how far its few new answers leave the size open."""
    cost = model.novel
    if cost is None:
        return None
    low, high = (replace(model, novel=cost.at_rate(cost.rate + side * cost.rate_sd))
                 for side in (-1, 1))
    return needs(low, runs), needs(high, runs)


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
        found[k] = detectable_extra(CountFloor(n, figures, k + 1, _pool_spread(figures, n)),
                                    level, targets.power)
    needed = next((k for k, extra in found.items() if extra is not None and extra <= want), None)
    here = found.get(max(pilot_runs, 1))
    return TaskPlan(task, "drift", n, n, n, needed, _share(here, n),
                    _share(found[MOST_NOISE_RUNS], n), None, level)


def _pool_spread(figures: Sequence[float], n: int) -> Spread:
    """The spread the gate's count test would take from such a pool (judge/floor.py)."""
    mean = float(np.mean(figures))
    floor = max(mean, 0.0) * logit_slope(mean, n) ** 2
    prior = PRIORS["count"]
    return beyond_counting([logit_share(q, n) for q in figures], prior.spread ** 2, prior.df,
                           floor)


def _share(count: float | None, n: int) -> float | None:
    return None if count is None else 100 * count / n


def pilot_floor(test: KlTest, restart: bool) -> Floor:
    """The floor a pilot's forced runs show: every restart's mean KL (the noise runs', and the
    run standing in for the candidate when the pilot has none), their spread from two."""
    means = np.array([*test.noise_means, *([test.candidate_kl] if restart else [])])
    logs = np.log(np.maximum(means, 1e-12))
    spread = float(logs.std(ddof=1)) if len(means) >= 2 else None
    return Floor(float(means.mean()), spread, item_sd(test), test.items)


def divergence_plan(task: str, test: KlTest, restart: bool, targets: Targets,
                    level: float, available: int | None = None) -> TaskPlan | None:
    """The fewest noise runs for the divergence check to catch `detect_kl` (nats per token,
    or a share of the floor's mean KL) with the items the data has, and the fewest items
    they need, from the pilot's forced runs."""
    if targets.detect_kl is None or test.items == 0:
        return None
    floor = pilot_floor(test, restart)
    rise = targets.detect_kl * floor.mean if targets.kl_relative else targets.detect_kl
    need = needed(rise, floor, level, targets.power, available)
    here = detectable_shift(test, level, targets.power)
    note = "" if floor.spread is not None else (
        "the restarts' spread is not measured: a pilot of two forced restarts or more "
        "(three with a candidate) measures it")
    return TaskPlan(task, "divergence", test.items, available, need.items, need.runs, here,
                    None, None, level, note, floor.mean, rise)


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
        if e.context_expected:  # sized by position (show/context_plan.py)
            continue
        novel = _restarts_new_answers(e, base, pool, other)
        plans = _task_plans(e, len(noises), targets, levels, (available or {}).get(e.task),
                            restart=cand is None, novel=novel)
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


def _restarts_new_answers(e: TaskEvidence, base: Side, pool: Sequence[Side], other: Side,
                          ) -> NovelPilot | None:
    """What the pilot's runs show of a restart's new answers, every one of them a restart
    (the candidate too: a pilot's candidate is another run of the setup)."""
    if e.accuracy is None or other is base:
        return None
    found = scored_runs(e.task, base, pool, other, e.accuracy.metric)
    return None if found is None else of_pilot(*found)


def _task_plans(e: TaskEvidence, noise_runs: int, targets: Targets, levels: Levels,
                available: int | None, restart: bool = False,
                novel: NovelPilot | None = None) -> list[TaskPlan]:
    if e.skipped or e.missing:
        return []
    found = []
    if e.accuracy is not None:
        found.append(accuracy_plan(e.task, e.accuracy.decisive.table, available, targets,
                                   levels.of("accuracy"), pooled=e.wrong,
                                   noise_runs=noise_runs, novel=novel))
    elif e.changed is not None:
        t = e.changed
        spread = (float(np.std([logit_share(q, t.items) for q in t.figures], ddof=1))
                  if t.spread_measured and len(t.figures) > 1 else PRIORS["count"].spread)
        found.append(drift_plan(e.task, t.items, float(np.mean(t.figures)), spread, noise_runs,
                                targets, levels.of("drift")))
    if e.divergence is not None and e.divergence.items:
        d = divergence_plan(e.task, e.divergence, restart, targets, levels.of("divergence"),
                            available)
        found += [d] if d else []
    return found
