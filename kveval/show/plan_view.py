"""`kveval plan` rendered: a table per task, a sentence each, and the commands that grow the
pilot's runs; its JSON for CI."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kveval.judge.checks import WEIGHTS
from kveval.judge.plan import MOST_NOISE_RUNS, Plan, TaskPlan
from kveval.show.blocks import Block, Heading, Table

UNITS = {"accuracy": "points", "drift": "% of items", "divergence": "nats"}


def _figure(value: float | None, kind: str, floor: float | None = None) -> str:
    if value is None:
        return "none"
    if kind == "divergence":
        if value == 0:
            return "any rise"
        share = 100 * value / floor if floor else math.inf
        share_text = f" ({share:.1f}% of the floor)" if math.isfinite(share) else ""
        return f"{value:.2g} nats{share_text}"
    return f"{value:.1f} points" if kind == "accuracy" else f"{value:.0f}% of items"


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def sentence(p: TaskPlan, plan: Plan) -> str:
    t = plan.targets
    if p.note:
        return p.note
    if p.kind == "accuracy":
        rate = f"{100 * (p.flip_rate or 0):.1f}% of answers flipping either way"
        want = f"a loss of {t.detect:g} points"
        if p.items_needed is None:
            why = ("the pilot shows no flip, so the declared prior of a restart's spread "
                   "stands in; a candidate pilot run or a second noise run measures it"
                   if not p.flip_rate else "at every size a restart's own changed answers cost "
                   "about as much as that loss")
            head = f"{want} cannot be caught at {rate} with up to 8 noise runs ({why})"
        else:
            head = (f"{want} needs {p.items_needed:,} items and {p.noise_runs_needed} noise "
                    f"runs at {rate}")
        if p.available is not None and (p.items_needed is None or p.items_needed > p.available):
            head += (f"; the data has {p.available:,}: " + (
                f"the best it can do is {_figure(p.best, p.kind)}" if p.best is not None
                else "too few to catch any loss"))
        return (f"{head}; the pilot's {p.items:,} items catch {_figure(p.detectable, p.kind)}"
                + within_words(p))
    if p.kind == "drift":
        want = f"{t.detect_drift:g}% of its {p.items} items changed beyond the floor"
        runs = (f"needs {p.noise_runs_needed} noise runs" if p.noise_runs_needed
                else f"cannot be caught with up to 8 noise runs (best {_figure(p.best, p.kind)})")
        return (f"{want} {runs}; with the pilot's noise runs: "
                f"{_figure(p.detectable, p.kind)}")
    return divergence_sentence(p, plan)


def within_words(p: TaskPlan) -> str:
    """How far the pilot's few new answers leave the size open."""
    if p.items_within is None:
        return ""
    low, high = (f"{n:,} items" if n is not None else
                 f"no size with {p.noise_runs_needed} noise runs" for n in p.items_within)
    answers = f"{p.pilot_answers} new answer" + ("" if p.pilot_answers == 1 else "s")
    return (f" (the pilot's runs gave {answers}; what one costs, read one sd lower or "
            f"higher, asks {low} or {high})")


def kl_target(plan: Plan) -> str:
    t = plan.targets
    if t.kl_relative:
        return f"a KL rise of {100 * (t.detect_kl or 0):g}% over the floor's mean"
    return f"a KL rise of {t.detect_kl:g} nats per token over the floor"


def divergence_sentence(p: TaskPlan, plan: Plan) -> str:
    want = kl_target(plan)
    if p.floor == 0:
        want += (" (the floor is quiet: every forced restart repeats the reference bit for "
                 "bit, so any rise shows)")
    elif p.floor is not None and p.rise is not None:
        want += (f" ({p.rise:.2g} nats per token, {100 * p.rise / p.floor:.1f}% of the "
                 f"floor's {p.floor:.3g})")
    if p.noise_runs_needed is None:
        needs = f"cannot be caught with up to {MOST_NOISE_RUNS} forced noise runs"
    else:
        needs = (f"needs {p.noise_runs_needed} forced noise runs and "
                 f"{_count(p.items_needed)} items")
    said = (f"{want} {needs}; the pilot's {p.items} items catch "
            f"{_figure(p.detectable, p.kind, p.floor)}")
    return f"{said} ({p.note})" if p.note else said


def rows(plan: Plan) -> tuple[tuple[str, ...], ...]:
    return tuple((p.task, p.kind, _count(p.items),
                  "-" if p.flip_rate is None else f"{100 * p.flip_rate:.1f}%",
                  _figure(p.detectable, p.kind, p.floor), _count(p.items_needed),
                  _count(p.available),
                  _figure(p.best, p.kind) if p.best is not None else "-",
                  _count(p.noise_runs_needed)) for p in plan.tasks)


def plan_blocks(plan: Plan, commands: Sequence[str]) -> list[Block]:
    t = plan.targets
    head = (f"kveval plan: catch a loss of {t.detect:g} points, {t.detect_drift:g}% extra drift"
            + (f", {kl_target(plan)}" if t.detect_kl else "")
            + f" with {100 * t.power:.0f}% power; accuracy and drift each at "
              f"{plan.levels.of('accuracy'):.2g}, drift at {plan.levels.of('drift'):.2g}, "
              f"divergence at {plan.levels.of('divergence'):.2g} (alpha "
              f"{t.alpha:g} over the family); flips measured: {plan.flip_source}")
    blocks: list[Block] = [Heading("kveval plan"), head,
                           Table(("task", "check", "pilot items", "flip rate", "catches now",
                                  "items needed", "data has", "best it can do",
                                  "noise runs needed"), rows(plan))]
    blocks += [f"{p.task} {p.kind}: {sentence(p, plan)}" for p in plan.tasks]
    if plan.noise_runs < 2:
        blocks.append("two noise runs or more measure the spread between restarts; with fewer "
                      "the gate's declared priors stand in for it (bench/gate_calibration.py)")
    if commands:
        blocks += ["grow the runs to these sizes:", *(f"  {c}" for c in commands)]
    if any("--teacher-force" in c for c in commands):
        blocks.append("restart the server before each forced noise run: a restart is what "
                      "it measures")
    return blocks


def plan_json(plan: Plan, commands: Sequence[str]) -> dict[str, Any]:
    t = plan.targets
    return {
        "command": "plan", "level": plan.levels.of("accuracy"),
        "levels": {kind: plan.levels.of(kind) for kind in WEIGHTS},
        "alpha": t.alpha, "power": t.power,
        "detect": t.detect, "detect_drift": t.detect_drift, "detect_kl": t.detect_kl,
        "detect_kl_unit": "share of the floor" if t.kl_relative else "nats",
        "noise_runs": plan.noise_runs, "flips_measured": plan.flip_source,
        "tasks": [{"task": p.task, "check": p.kind, "unit": UNITS[p.kind], "items": p.items,
                   "items_needed": p.items_needed, "items_available": p.available,
                   "noise_runs_needed": p.noise_runs_needed, "detectable": p.detectable,
                   "best_detectable": p.best, "flip_rate": p.flip_rate,
                   **({"pilot_new_answers": p.pilot_answers,
                       "items_within": list(p.items_within)} if p.items_within else {}),
                   **({"floor_kl": p.floor, "rise_nats": p.rise} if p.kind == "divergence"
                      else {}),
                   "summary": sentence(p, plan)} for p in plan.tasks],
        "commands": list(commands),
    }
