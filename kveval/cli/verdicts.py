"""`kveval compare`, `kveval score`, `kveval gate`: verdicts from saved run files.

Only click and the standard library are imported here at module level; the verdict modules
(and numpy/scipy behind them) are imported inside the commands, so `kveval --help` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from kveval.judge.compare import Side
    from kveval.judge.curves import Curve
    from kveval.judge.verdict import GateReport
    from kveval.show.report import Block

F = TypeVar("F", bound=Callable[..., Any])


def _output_options(func: F) -> F:
    func = click.option("--markdown", is_flag=True,
                        help="Print a Markdown block to paste into a PR.")(func)
    func = click.option("--json", "as_json", is_flag=True,
                        help="Print machine-readable JSON on stdout.")(func)
    return func


def _threshold_option(func: F) -> F:
    return click.option("--effective-threshold", type=click.FloatRange(0, 1, min_open=True),
                        default=0.9, show_default=True, metavar="FRACTION",
                        help="Effective length: the longest length up to which a long-context "
                             "task scores at least this fraction of its shortest length's "
                             "score.")(func)


def _curves(run: Side, baseline: Side | None, fraction: float) -> dict[str, Curve]:
    """Length curves of the run's long-context tasks, against the baseline when given."""
    from kveval.judge.curves import task_curves

    return task_curves(run.items, baseline.items if baseline else None,
                       baseline.label if baseline else "baseline", fraction)


def _curve_blocks(curves: dict[str, Curve]) -> dict[str, list[Block]]:
    from kveval.show import curves as shown
    from kveval.show import report

    return {task: [report.Rendered(shown.render_text(c), shown.render_markdown(c),
                                   shown.to_json(c))] for task, c in curves.items()}


def _attach_curves(data: dict[str, Any], curves: dict[str, Curve]) -> dict[str, Any]:
    """Each long-context task of a --json report gains its `length_curve`."""
    from kveval.show.curves import to_json

    for task in data.get("tasks", []):
        if task.get("task") in curves:
            task["length_curve"] = to_json(curves[task["task"]])
    return data


def _check_output(as_json: bool, markdown: bool) -> None:
    from kveval.errors import UsageError

    if as_json and markdown:
        raise UsageError("choose one of --json and --markdown")


def _load(path: str) -> Side:
    """A kveval run file, or the tutorial's JSON array of answer strings."""
    from kveval.formats.records import is_answer_array, read_answer_array, read_run
    from kveval.judge.compare import side_from_answers, side_from_run

    if is_answer_array(path):
        return side_from_answers(path, read_answer_array(path))
    return side_from_run(read_run(path))


def _load_run(path: str) -> Side:
    """A kveval run file; arrays of answers carry no scores."""
    from kveval.errors import UsageError
    from kveval.formats.records import is_answer_array, read_run
    from kveval.judge.compare import side_from_run

    if is_answer_array(path):
        raise UsageError(f"{path}: a JSON array of answers has no scores; score and gate read "
                         "kveval run files (compare reads both)")
    return side_from_run(read_run(path))


def _emit(blocks: Sequence[Block], data: dict[str, Any], as_json: bool, markdown: bool) -> None:
    from kveval.show import report

    if as_json:
        click.echo(report.dumps(data))
    elif markdown:
        click.echo(report.to_markdown(blocks), nl=False)
    else:
        click.echo(report.to_text(blocks), nl=False)


@click.command()
@click.argument("baseline", metavar="A")
@click.argument("candidate", metavar="B")
@click.option("--noise", metavar="N",
              help="A second run of A's setup (e.g. after a restart): the noise floor.")
@click.option("--show", type=click.IntRange(min=0), default=0, show_default=True, metavar="K",
              help="Print the K most diverged pairs side by side.")
@_threshold_option
@_output_options
def compare(baseline: str, candidate: str, noise: str | None, show: int,
            effective_threshold: float, as_json: bool, markdown: bool) -> int:
    """How many answers B changed from A, beside the noise floor N.

    \b
    Per task: identical answers, mean shared-prefix ratio, median first difference, and
    whether B drifts more than N does (exact McNemar on the same items).
    A, B and N are kveval run files, or all JSON arrays of answer strings (paired by position).
    """
    from kveval.judge.compare import check_same_format, compare_sides
    from kveval.judge.verdict import inspect_setup
    from kveval.show import report

    _check_output(as_json, markdown)
    base, cand = _load(baseline), _load(candidate)
    noise_side = _load(noise) if noise else None
    check_same_format([base, cand] + ([noise_side] if noise_side else []))
    setup = inspect_setup(base, cand, noise_side)
    result = compare_sides(base, cand, noise_side, show=show)
    curves = _curves(cand, base, effective_threshold)
    blocks = report.compare_blocks(setup, result)
    for task, extra in _curve_blocks(curves).items():
        blocks += [report.Heading(task), *extra]
    data = _attach_curves(report.compare_json(setup, result), curves)
    if noise_side is not None:
        data["noise_length_curves"] = _attach_curves(
            {"tasks": [{"task": t} for t in curves]},
            _curves(noise_side, base, effective_threshold))["tasks"]
    _emit(blocks, data, as_json, markdown)
    return 0


def task_extras(run: Side, baseline: Side | None) -> dict[str, list[Block]]:
    """Per-task sections printed below the scores, keyed by task name: a long-context
    task's accuracy per length, its length x depth table (with a baseline, the per-cell
    change) and the evidence task's error classes."""
    from kveval.judge import grid
    from kveval.show import report

    extras: dict[str, list[Block]] = {}
    for name in dict.fromkeys(item.task for item in run.items):
        mine = [item for item in run.items if item.task == name]
        theirs = [item for item in baseline.items if item.task == name] if baseline else None
        section = grid.section(name, mine, theirs)
        if section is not None:
            rendered = report.Rendered(grid.render_text(section), grid.render_markdown(section),
                                       section)
            extras[name] = [rendered]
    return extras


@click.command()
@click.argument("run_path", metavar="RUN")
@click.option("--baseline", metavar="B", help="Compare with a baseline run on the same items.")
@_threshold_option
@_output_options
def score(run_path: str, baseline: str | None, effective_threshold: float, as_json: bool,
          markdown: bool) -> int:
    """Accuracy per task with Wilson 95% intervals; with --baseline, the paired view.

    \b
    Items with status error are counted apart, never scored as wrong. With a baseline:
    whether the intervals overlap, and on the paired items the discordant counts, the
    exact McNemar p, a 95% interval for the difference, and the largest loss not ruled out.
    """
    from kveval.judge.verdict import score_report
    from kveval.show import report

    _check_output(as_json, markdown)
    run = _load_run(run_path)
    base = _load_run(baseline) if baseline else None
    result = score_report(run, base)
    extras = task_extras(run, base)
    curves = _curves(run, base, effective_threshold)
    shown = {task: extras.get(task, []) + extra for task, extra in _curve_blocks(curves).items()}
    _emit(report.score_blocks(result, {**extras, **shown}),
          _attach_curves(report.score_json(result, extras), curves), as_json, markdown)
    return 0


@click.command()
@click.option("--baseline", required=True, metavar="B", help="The run of the old setup.")
@click.option("--candidate", required=True, metavar="C", help="The run of the new setup.")
@click.option("--noise", metavar="N",
              help="A second run of the old setup: drift beyond it fails tasks without "
                   "ground truth.")
@click.option("--policy", type=click.Choice(["overlap", "paired"]), default="overlap",
              show_default=True,
              help="overlap: the candidate's 95% interval overlaps the baseline's. paired: the "
                   "paired 95% interval rules out a loss larger than --margin.")
@click.option("--margin", type=click.FloatRange(min=0), default=None, metavar="POINTS",
              help="With --policy paired: the largest tolerated loss, in points.  "
                   "[default: 3]")
@click.option("--metric", type=click.Choice(["flexible", "strict"]), default="flexible",
              show_default=True,
              help="Judge `correct` (GSM8K: the flexible match) or `correct_strict`.")
@click.option("--max-error-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              metavar="FRACTION",
              help="Cannot judge a run whose share of error items exceeds this (0.02 = 2%).")
@click.option("--min-recovery", type=click.FloatRange(0, 2, min_open=True), metavar="R",
              help="A long-context task fails when the upper end of its AUC-recovery 95% "
                   "interval is below R (a fraction: 0.95 = 95% of the baseline's AUC).")
@_threshold_option
@_output_options
def gate(baseline: str, candidate: str, noise: str | None, policy: str, margin: float | None,
         metric: str, max_error_rate: float, min_recovery: float | None,
         effective_threshold: float, as_json: bool, markdown: bool) -> int:
    """Pass or fail a candidate run. Exit 0 pass, 1 regression, 2 cannot judge.

    \b
    Cannot judge: an unreadable run file, no paired items, a pair whose prompt differs,
    different sampling parameters, or an error rate above --max-error-rate.
    """
    from kveval.errors import KvevalError, UsageError
    from kveval.judge.verdict import DEFAULT_MARGIN
    from kveval.judge.verdict import gate as judge
    from kveval.show import report

    _check_output(as_json, markdown)
    if margin is not None and policy != "paired":
        raise UsageError("--margin applies only to --policy paired")
    try:
        base, cand = _load_run(baseline), _load_run(candidate)
        result = judge(
            base, cand, _load_run(noise) if noise else None,
            policy=policy, margin=DEFAULT_MARGIN if margin is None else margin, metric=metric,
            max_error_rate=max_error_rate,
        )
    except KvevalError as exc:
        if as_json:
            click.echo(report.dumps(report.cannot_judge_json(str(exc))))
        raise
    curves = _curves(cand, base, effective_threshold)
    result = _with_recovery(result, curves, min_recovery)
    _emit(*_gate_output(result, curves, min_recovery), as_json, markdown)
    return result.exit_code


def _gate_output(result: GateReport, curves: dict[str, Curve], min_recovery: float | None,
                 ) -> tuple[list[Block], dict[str, Any]]:
    """The gate's blocks with the length curves before its last line, and its JSON."""
    from kveval.show import report

    blocks = report.gate_blocks(result)
    blocks[-1:-1] = [b for task, extra in _curve_blocks(curves).items()
                     for b in (report.Heading(task), *extra)]
    return blocks, {**_attach_curves(report.gate_json(result), curves),
                    "min_recovery": min_recovery}


def _with_recovery(result: GateReport, curves: dict[str, Curve],
                   minimum: float | None) -> GateReport:
    """With --min-recovery, each long-context task gains a "recovery" decision."""
    if minimum is None:
        return result
    import dataclasses

    from kveval.judge.curves import recovery_failed, recovery_reason
    from kveval.judge.verdict import TaskDecision

    decisions = []
    for task, curve in curves.items():
        failed = recovery_failed(curve, minimum)
        decisions.append(TaskDecision(task, "recovery", None if failed is None else not failed,
                                      recovery_reason(curve, minimum)))
    return dataclasses.replace(result, decisions=result.decisions + tuple(decisions))
