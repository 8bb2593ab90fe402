"""`kveval compare`, `kveval score`, `kveval gate`: verdicts from saved run files.

Only click and the standard library are imported here at module level; the verdict modules
(and numpy/scipy behind them) are imported inside the commands, so `kveval --help` stays fast.
Each command renders what judge/verdict.py found and decided; none decides anything itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from kveval.cli import gating, options, reading
from kveval.errors import UsageError

if TYPE_CHECKING:
    pass


@click.command()
@click.argument("baseline", metavar="A")
@click.argument("candidate", metavar="B")
@options.noise_option("A run of A's setup restarted, best with --order shuffle (repeatable): "
                      "the noise floor. With two or more, their spread is measured.")
@options.repeat_option
@click.option("--show", type=click.IntRange(min=0), default=0, show_default=True, metavar="K",
              help="Print the K most diverged pairs side by side.")
@options.forced_options
@options.family_options
@options.output_options
def compare(baseline: str, candidate: str, noise: tuple[str, ...], repeats: tuple[str, ...],
            show: int, baseline_forced: str | None, candidate_forced: str | None,
            noise_forced: tuple[str, ...], as_json: bool, markdown: bool,
            **family: Any) -> int:
    """How many answers B changed from A, beside the noise floor N.

    \b
    Per task: identical answers, mean shared-prefix ratio, median first difference, whether
    B drifts more than the noise floor, and collapse (truncated and empty answers, length
    ratio, repetition), with every check of the gate's family and its adjusted p-value.
    A, B and N are kveval run files or lm-eval sample logs (a samples file, its results file
    or their folder), or all JSON arrays of answer strings (paired by position).
    """
    from kveval.judge.verdict import examine, inspect_setup
    from kveval.show import report

    options.check_output(as_json, markdown)
    forced_files = options.forced_paths(baseline_forced, candidate_forced, noise_forced)
    base, cand, *rest = reading.load_all((baseline, candidate, *noise, *repeats))
    noises, again = rest[:len(noise)], rest[len(noise):]
    reading.check_fewshot(base, cand, *noises, *again)
    found = examine(base, cand, noises, again, options.family(**family), show=show,
                    forced=reading.load_forced(forced_files))
    setup = inspect_setup(base, cand, noises[0] if noises else None, noises[1:], again)
    data = report.compare_json(setup, found)
    if noises:
        data["noise_length_curves"] = report.noise_curves_json(base, noises, found.family)
    options.emit(report.compare_blocks(setup, found), data, as_json, markdown)
    return 0


@click.command()
@click.argument("run_path", metavar="RUN")
@click.option("--baseline", metavar="B", help="Compare with a baseline run on the same items.")
@options.noise_option("A run of the baseline's setup restarted (repeatable, with --baseline): "
                      "accuracy is then judged against what a restart does, as the gate does.")
@options.family_options
@options.output_options
def score(run_path: str, baseline: str | None, noise: tuple[str, ...], as_json: bool,
          markdown: bool, **family: Any) -> int:
    """Accuracy per task with Wilson 95% intervals; with --baseline, the paired view.

    \b
    Items with status error are counted apart, never scored as wrong. With a baseline:
    whether the intervals overlap, and on the paired items the discordant counts, the
    accuracy check of the gate's family (the run against the baseline's setup: the
    baseline and each --noise run) with its one-sided and adjusted p-values, a 95%
    interval for the difference (unadjusted), and the largest loss not ruled out. The same
    files and options give the same p as gate, compare and report.
    """
    from kveval.judge.curves import task_curves
    from kveval.judge.verdict import examine, score_report
    from kveval.show import report
    from kveval.show.extras import task_extras

    options.check_output(as_json, markdown)
    if noise and baseline is None:
        raise UsageError("--noise needs --baseline: a restart is measured against the baseline")
    run, *rest = reading.load_all([run_path, *([baseline] if baseline else []), *noise],
                                  reading.load_run)
    base, noises = (rest[0], rest[1:]) if rest else (None, [])
    reading.check_fewshot(run, base, *noises)
    chosen = options.family(**family)
    result = score_report(run, base)
    found = examine(base, run, noises, family=chosen) if base is not None else None
    extras = task_extras(run, base)
    curves = found.curves if found else task_curves(run.items, options=chosen.curves)
    checks = found.checks if found else ()
    shown = {task: extras.get(task, []) + extra
             for task, extra in report.curve_blocks(curves, checks).items()}
    data = report.attach_curves(report.score_json(result, extras, found), curves, checks)
    options.emit(report.score_blocks(result, {**extras, **shown}, found), data, as_json, markdown)
    return 0


def _cannot_judge(inputs: Any, exc: Exception, html: str | None, as_json: bool,
                  markdown: bool) -> None:
    """What gate writes when it cannot judge: the page, the Markdown summary, the JSON."""
    from kveval.show import report
    from kveval.sink import echo_json

    gating.publish(inputs, html, gating.cannot_judge_markdown(str(exc)) if markdown else None,
                   None, exc)
    if as_json:
        echo_json(report.dumps(report.cannot_judge_json(str(exc))))


@click.command()
@click.option("--baseline", required=True, metavar="B", help="The run of the old setup.")
@click.option("--candidate", required=True, metavar="C", help="The run of the new setup.")
@options.noise_option("A run of the old setup restarted, best with --order shuffle (repeatable): "
                      "the pool of the baseline's setup that every check is judged against "
                      "(accuracy, drift, truncation, empty answers, divergence); two or three "
                      "measure a restart's spread.")
@options.repeat_option
@options.forced_options
@options.gate_options
@click.option("--html", metavar="FILE",
              help="Also write the HTML page of `kveval report` (on pass, regression or "
                   "cannot judge).")
@options.family_options
@options.output_options
def gate(baseline: str, candidate: str, noise: tuple[str, ...], repeats: tuple[str, ...],
         baseline_forced: str | None, candidate_forced: str | None,
         noise_forced: tuple[str, ...], policy: str, margin: float | None,
         max_error_rate: float, html: str | None, as_json: bool, markdown: bool,
         **family: Any) -> int:
    """Pass or fail a candidate run. Exit 0 pass, 1 regression, 2 cannot judge.

    \b
    Every check of every task (accuracy, drift, truncated and empty answers, each length of
    a long-context task, --min-recovery, divergence with log-probabilities, the forced KL of
    --candidate-forced against --noise-forced) is a one-sided test in one Holm family at
    --alpha. Cannot judge: an unreadable run file, a task the candidate or a noise run
    lacks, no paired items, a pair whose prompt differs, different sampling parameters,
    errors and missing items above --max-error-rate, a task too small for --policy
    paired's margin at its own flip rate (unless --skip TASK), or runs so small that no
    check of any task could see a change. Without --max-kl, divergence beyond the noise
    floor is named beside the verdict and never changes the exit code.
    With --markdown on GitHub Actions, the block is also appended to $GITHUB_STEP_SUMMARY.
    """
    from kveval.errors import KvevalError
    from kveval.show import report

    options.check_output(as_json, markdown)
    args = gating.GateArgs(baseline, candidate, noise, repeats, policy,
                           options.gate_margin(policy, margin), options.family(**family),
                           options.forced_paths(baseline_forced, candidate_forced,
                                                noise_forced))
    gating.refuse_page_over_input(html, args)
    inputs, error = gating.load_inputs(args)
    try:
        if error is not None:
            raise error
        result, blocks, data = gating.decide_gate(inputs, max_error_rate)
    except KvevalError as exc:
        _cannot_judge(inputs, exc, html, as_json, markdown)
        raise
    gating.publish(inputs, html, report.to_markdown(blocks) if markdown else None, result, None,
                   data)
    options.emit(blocks, data, as_json, markdown)
    return result.exit_code
