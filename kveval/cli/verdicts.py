"""`kveval compare`, `kveval score`, `kveval gate`: verdicts from saved run files.

Only click and the standard library are imported here at module level; the verdict modules
(and numpy/scipy behind them) are imported inside the commands, so `kveval --help` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kveval.cli import curves, reading

if TYPE_CHECKING:
    from kveval.judge.compare import Comparison, Side
    from kveval.judge.verdict import GateReport
    from kveval.show.page import Inputs
    from kveval.show.report import Block

F = TypeVar("F", bound=Callable[..., Any])


def _output_options(func: F) -> F:
    func = click.option("--markdown", is_flag=True,
                        help="Print a Markdown block to paste into a PR.")(func)
    func = click.option("--json", "as_json", is_flag=True,
                        help="Print machine-readable JSON on stdout.")(func)
    return func


def _check_output(as_json: bool, markdown: bool) -> None:
    from kveval.errors import UsageError

    if as_json and markdown:
        raise UsageError("choose one of --json and --markdown")


def _emit(blocks: Sequence[Block], data: dict[str, Any], as_json: bool, markdown: bool) -> None:
    from kveval.show import report

    if as_json:
        click.echo(report.dumps(data))
    elif markdown:
        click.echo(report.to_markdown(blocks), nl=False)
    else:
        click.echo(report.to_text(blocks), nl=False)


def _noise_option(help_text: str) -> Callable[[F], F]:
    return click.option("--noise", "noise", multiple=True, metavar="N", help=help_text)


def _repeat_option(func: F) -> F:
    return click.option(
        "--candidate-repeat", "repeats", multiple=True, metavar="FILE",
        help="Another run of the candidate's setup (repeatable): how much the candidate "
             "disagrees with itself, reported beside the noise floor.")(func)


def max_kl_option(func: F) -> F:
    return click.option(
        "--max-kl", type=click.FloatRange(min=0), default=None, metavar="NATS",
        help="Fail a task whose mean per-token KL exceeds the noise floor's (with several "
             "noise runs, each item's mean over them) by more than NATS (one-sided Wilcoxon, "
             "p < 0.05). Needs --noise and --logprobs runs.")(func)


@click.command()
@click.argument("baseline", metavar="A")
@click.argument("candidate", metavar="B")
@_noise_option("A run of A's setup restarted, best with --order shuffle (repeatable): the "
               "noise floor. With two or more, their spread is the floor.")
@_repeat_option
@click.option("--show", type=click.IntRange(min=0), default=0, show_default=True, metavar="K",
              help="Print the K most diverged pairs side by side.")
@curves.threshold_option
@_output_options
def compare(baseline: str, candidate: str, noise: tuple[str, ...], repeats: tuple[str, ...],
            show: int, effective_threshold: float, as_json: bool, markdown: bool) -> int:
    """How many answers B changed from A, beside the noise floor N.

    \b
    Per task: identical answers, mean shared-prefix ratio, median first difference, whether
    B drifts more than the noise floor, and collapse (truncated and empty answers, length
    ratio, repetition). A, B and N are kveval run files or lm-eval sample logs (a
    samples file, its results file or their folder), or all JSON arrays of answer strings
    (paired by position).
    """
    from kveval.judge.compare import compare_sides
    from kveval.judge.verdict import inspect_setup
    from kveval.show import report

    _check_output(as_json, markdown)
    base, cand, *rest = reading.load_all((baseline, candidate, *noise, *repeats))
    noises, again = rest[:len(noise)], rest[len(noise):]
    reading.check_fewshot(base, cand, *noises, *again)
    result = compare_sides(base, cand, show=show, noises=noises, repeats=again)
    setup = inspect_setup(base, cand, noises[0] if noises else None, noises[1:], again)
    found = curves.curves(cand, base, effective_threshold)
    data = curves.attach(report.compare_json(setup, result), found)
    if noises:
        data["noise_length_curves"] = curves.noise_json(base, noises, effective_threshold)
    blocks = report.compare_blocks(setup, result) + curves.headed(found)
    _with_divergence(result, blocks, data)
    _emit(blocks, data, as_json, markdown)
    return 0


def _with_divergence(result: Comparison, blocks: list[Block], data: dict[str, Any],
                     max_kl: float | None = None, skip: Sequence[str] = ()) -> int:
    """Token divergence (runs with log-probabilities) added to a compare or gate report;
    returns the exit code --max-kl adds."""
    from kveval.judge.divergence import task_divergences
    from kveval.show import divergence as shown

    noise_runs = [p.pairs for p in result.noise_pairings]
    tasks = [t for t in task_divergences(result.pairing.pairs, noise_runs, max_kl)
             if t.task not in skip]
    cand, noises = result.candidate.label, [n.label for n in result.noises]
    if max_kl is not None:
        _check_max_kl(tasks, noises)
    blocks += shown.divergence_blocks(tasks, cand, noises)
    shown.add_json(data, tasks, cand, noises)
    return shown.amend_gate(blocks, data, tasks) if max_kl is not None else 0


def _check_max_kl(tasks: Sequence[Any], noises: Sequence[str]) -> None:
    from kveval.errors import UsageError

    if not noises:
        raise UsageError("--max-kl judges the KL against the noise floor: give --noise N")
    if not any(t.test for t in tasks):
        raise UsageError("--max-kl: no task has log-probabilities in the baseline, candidate "
                         "and noise runs (run them with --logprobs K)")


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
@curves.threshold_option
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
    run, *rest = reading.load_all([run_path, *([baseline] if baseline else [])],
                                  reading.load_run)
    base = rest[0] if rest else None
    reading.check_fewshot(run, base)
    result = score_report(run, base)
    extras = task_extras(run, base)
    found = curves.curves(run, base, effective_threshold)
    shown = {task: extras.get(task, []) + extra for task, extra in curves.blocks(found).items()}
    _emit(report.score_blocks(result, {**extras, **shown}),
          curves.attach(report.score_json(result, extras), found), as_json, markdown)
    return 0


@click.command()
@click.option("--baseline", required=True, metavar="B", help="The run of the old setup.")
@click.option("--candidate", required=True, metavar="C", help="The run of the new setup.")
@_noise_option("A run of the old setup restarted (repeatable): drift beyond the noise floor "
               "fails tasks without ground truth; collapse is judged against it.")
@_repeat_option
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
              help="Cannot judge a run whose share of error or missing items exceeds this "
                   "(0.02 = 2%).")
@click.option("--skip", multiple=True, metavar="TASK",
              help="Leave a task unjudged (repeatable), e.g. one too small for the margin.")
@click.option("--html", metavar="FILE",
              help="Also write the HTML page of `kveval report` (on pass, regression or "
                   "cannot judge).")
@curves.min_recovery_option
@curves.threshold_option
@max_kl_option
@_output_options
def gate(baseline: str, candidate: str, noise: tuple[str, ...], repeats: tuple[str, ...],
         policy: str, margin: float | None, metric: str, max_error_rate: float,
         skip: tuple[str, ...], html: str | None, min_recovery: float | None,
         effective_threshold: float, max_kl: float | None, as_json: bool,
         markdown: bool) -> int:
    """Pass or fail a candidate run. Exit 0 pass, 1 regression, 2 cannot judge.

    \b
    Every task of the baseline is judged. Cannot judge: an unreadable run file, a task
    the candidate or a noise run lacks, no paired items, a pair whose prompt differs,
    different sampling parameters, errors and missing items above --max-error-rate, or a
    task too small for --policy paired's margin (unless --skip TASK).
    With --markdown on GitHub Actions, the block is also appended to $GITHUB_STEP_SUMMARY.
    """
    from kveval.cli.report import GateArgs, cannot_judge_markdown, load_inputs, publish
    from kveval.errors import KvevalError
    from kveval.show import report

    _check_output(as_json, markdown)
    args = GateArgs(baseline, candidate, noise, repeats, skip, policy,
                    gate_margin(policy, margin), metric, effective_threshold)
    inputs, error = load_inputs(args)
    try:
        if error is not None:
            raise error
        result, blocks, data, code = decide_gate(inputs, max_error_rate, min_recovery, max_kl)
    except KvevalError as exc:
        if as_json:
            click.echo(report.dumps(report.cannot_judge_json(str(exc))))
        publish(inputs, html, cannot_judge_markdown(str(exc)) if markdown else None, None, exc)
        raise
    _emit(blocks, data, as_json, markdown)
    publish(inputs, html, report.to_markdown(blocks) if markdown else None, result, None, data)
    return code


def gate_margin(policy: str, margin: float | None) -> float | None:
    """The paired policy's margin (3 points unless given); None for the overlap policy."""
    from kveval.errors import UsageError
    from kveval.judge.verdict import DEFAULT_MARGIN

    if margin is not None and policy != "paired":
        raise UsageError("--margin applies only to --policy paired")
    return (DEFAULT_MARGIN if margin is None else margin) if policy == "paired" else None


def decide_gate(inputs: Inputs, max_error_rate: float, min_recovery: float | None,
                max_kl: float | None) -> tuple[GateReport, list[Block], dict[str, Any], int]:
    """The gate's whole decision on runs already read: accuracy, drift and collapse, then
    length-curve recovery and token divergence; its text blocks, its JSON and the exit code.
    `gate` prints it and `report` draws it."""
    from kveval.judge.verdict import DEFAULT_MARGIN
    from kveval.judge.verdict import gate as judge

    base, cand = inputs.baseline, inputs.candidate
    assert base is not None and cand is not None  # load_inputs read every file
    reading.check_fewshot(base, cand, *inputs.noise, *inputs.repeats)
    result = judge(base, cand, policy=inputs.policy,
                   margin=DEFAULT_MARGIN if inputs.margin is None else inputs.margin,
                   metric=inputs.metric, max_error_rate=max_error_rate,
                   noises=list(inputs.noise), repeats=list(inputs.repeats), skip=inputs.skip)
    found = curves.curves(cand, base, inputs.threshold)
    result = curves.with_recovery(result, found, min_recovery, inputs.skip)
    blocks, data = curves.gate_output(result, found, min_recovery)
    added = _with_divergence(result.comparison, blocks, data, max_kl, inputs.skip)
    return result, blocks, data, max(result.exit_code, added)
