"""Length curves in `compare`, `score` and `gate`: the option, the blocks, the JSON, and the
gate's --min-recovery rule. Heavy modules are imported inside the functions."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from kveval.judge.compare import Side
    from kveval.judge.curves import Curve
    from kveval.judge.verdict import GateReport
    from kveval.show.blocks import Block

F = TypeVar("F", bound=Callable[..., Any])


def threshold_option(func: F) -> F:
    return click.option("--effective-threshold", type=click.FloatRange(0, 1, min_open=True),
                        default=0.9, show_default=True, metavar="FRACTION",
                        help="Effective length: the longest length up to which a long-context "
                             "task scores at least this fraction of its shortest length's "
                             "score.")(func)


def min_recovery_option(func: F) -> F:
    return click.option("--min-recovery", type=click.FloatRange(0, 2, min_open=True),
                        metavar="R",
                        help="A long-context task fails when the upper end of its AUC-recovery "
                             "95% interval is below R (a fraction: 0.95 = 95% of the "
                             "baseline's AUC).")(func)


def curves(run: Side, baseline: Side | None, fraction: float) -> dict[str, Curve]:
    """Length curves of the run's long-context tasks, against the baseline when given."""
    from kveval.judge.curves import task_curves

    return task_curves(run.items, baseline.items if baseline else None,
                       baseline.label if baseline else "baseline", fraction)


def blocks(found: dict[str, Curve]) -> dict[str, list[Block]]:
    from kveval.show import curves as shown
    from kveval.show.blocks import Rendered

    return {task: [Rendered(shown.render_text(c), shown.render_markdown(c), shown.to_json(c))]
            for task, c in found.items()}


def headed(found: dict[str, Curve]) -> list[Block]:
    """Each task's curve under a heading with the task's name."""
    from kveval.show.blocks import Heading

    return [b for task, extra in blocks(found).items() for b in (Heading(task), *extra)]


def attach(data: dict[str, Any], found: dict[str, Curve]) -> dict[str, Any]:
    """Each long-context task of a --json report gains its `length_curve`."""
    from kveval.show.curves import to_json

    for task in data.get("tasks", []):
        if task.get("task") in found:
            task["length_curve"] = to_json(found[task["task"]])
    return data


def noise_json(base: Side, noises: Sequence[Side], fraction: float) -> list[dict[str, Any]]:
    """compare's `noise_length_curves`: each noise run's curves against the baseline."""
    out = []
    for side in noises:
        found = curves(side, base, fraction)
        tasks = attach({"tasks": [{"task": t} for t in found]}, found)["tasks"]
        out.append({"noise": side.label, "tasks": tasks})
    return out


def with_recovery(result: GateReport, found: dict[str, Curve], minimum: float | None,
                  skip: Sequence[str] = ()) -> GateReport:
    """With --min-recovery, each long-context task (not skipped) gains a "recovery" decision;
    one whose recovery has no interval cannot be judged."""
    if minimum is None:
        return result
    from kveval.judge.curves import recovery_failed, recovery_reason
    from kveval.judge.decide import TaskDecision

    decisions = []
    for task, curve in found.items():
        if task in skip:
            continue
        failed = recovery_failed(curve, minimum)
        reason = recovery_reason(curve, minimum)
        decisions.append(TaskDecision(task, "recovery", None if failed is None else not failed,
                                      cannot_judge=reason if failed is None else None,
                                      detail=reason))
    return dataclasses.replace(result, decisions=result.decisions + tuple(decisions))


def gate_output(result: GateReport, found: dict[str, Curve], minimum: float | None,
                ) -> tuple[list[Block], dict[str, Any]]:
    """The gate's blocks with the length curves before its last line, and its JSON."""
    from kveval.show import report

    shown = report.gate_blocks(result)
    shown[-1:-1] = headed(found)
    return shown, {**attach(report.gate_json(result), found), "min_recovery": minimum}
