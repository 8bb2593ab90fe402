"""`kveval report`: the gate's verdict and its evidence as one self-contained HTML page.

The same page is what `kveval gate --html FILE` writes beside its decision. A run file that
cannot be read or runs that cannot be judged still give a page (CANNOT JUDGE, with the
reason), so a CI job always has an artifact to upload; the exit code is the gate's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kveval.cli import curves
from kveval.cli.verdicts import gate_margin, max_kl_option

if TYPE_CHECKING:
    from kveval.formats.reader import Shared
    from kveval.judge.compare import Side
    from kveval.judge.verdict import GateReport
    from kveval.show.page import Inputs


def _read(path: str | None, shared: Shared) -> Side | None:
    from kveval.cli.reading import load_run

    return load_run(path, shared) if path else None


@dataclass(frozen=True)
class GateArgs:
    """The run files and options of a gate: what `report` and `gate --html` draw."""

    baseline: str
    candidate: str
    noise: tuple[str, ...]
    repeats: tuple[str, ...]
    skip: tuple[str, ...]
    policy: str
    margin: float | None  # None: the policy has no margin
    metric: str
    threshold: float  # effective length: --effective-threshold


def load_inputs(args: GateArgs) -> tuple[Inputs, Exception | None]:
    """The runs as read; the first file that cannot be read is the error (the page says so)."""
    from kveval.errors import KvevalError
    from kveval.formats.reader import Shared
    from kveval.show.page import Inputs

    shared = Shared()
    sides: list[Side | None] = []
    error: Exception | None = None
    for path in (args.baseline, args.candidate, *args.noise, *args.repeats):
        try:
            sides.append(_read(path, shared))
        except KvevalError as exc:
            sides.append(None)
            error = error or exc
    noise, repeats = sides[2:2 + len(args.noise)], sides[2 + len(args.noise):]
    return Inputs(sides[0], sides[1], tuple(s for s in noise if s is not None),
                  tuple(s for s in repeats if s is not None), args.skip, args.policy,
                  args.margin, args.metric, args.threshold), error


def page_html(inputs: Inputs, result: GateReport | None, error: Exception | None,
              verdict: dict[str, Any] | None = None) -> str:
    """The page; `verdict` is the gate's final JSON (with --min-recovery and --max-kl
    decisions and the divergence figures) where the gate got that far."""
    from kveval.cli.verdicts import task_extras
    from kveval.show.html import render
    from kveval.show.page import page_data

    reason = None if error is None else str(error)
    data = page_data(inputs, result, reason, extras=task_extras, verdict=verdict)
    return render(with_curves(data, inputs))


def with_curves(data: dict[str, Any], inputs: Inputs) -> dict[str, Any]:
    """The length curves `score`, `compare` and `gate` add to their `--json` task entries."""
    from kveval.cli import curves

    if inputs.baseline is None or inputs.candidate is None:
        return data
    found = curves.curves(inputs.candidate, inputs.baseline, inputs.threshold)
    for part in ("gate", "score", "compare"):
        if isinstance(data.get(part), dict):
            curves.attach(data[part], found)
    return data


def write_page(path: str, html: str) -> None:
    from kveval.atomic import write_text
    from kveval.errors import UsageError

    try:  # a temporary file renamed over the target: never a half-written page
        write_text(Path(path), html)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write the page ({exc.strerror or exc}); nothing "
                         "was written") from None


def publish(inputs: Inputs, html: str | None, summary: str | None, result: GateReport | None,
            error: Exception | None, verdict: dict[str, Any] | None = None) -> None:
    """What gate writes beside its decision: the page (`--html FILE`) and the Markdown
    `summary` (with `--markdown`) in the GitHub Actions job summary."""
    if summary is not None:
        append_step_summary(summary)
    if html:
        write_page(html, page_html(inputs, result, error, verdict))
        click.echo(f"kveval: wrote the page {html}", err=True)


def cannot_judge_markdown(reason: str) -> str:
    from kveval.safe import markdown

    return f"### kveval gate: CANNOT JUDGE\n\n{markdown(reason)}\n"


def append_step_summary(markdown: str) -> None:
    """On GitHub Actions, the gate's Markdown also goes to the job's summary page."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    try:
        with open(target, "a", encoding="utf-8") as out:
            out.write(markdown + "\n")
    except OSError as exc:
        click.echo(f"kveval: warning: cannot append to $GITHUB_STEP_SUMMARY ({exc})", err=True)


@click.command()
@click.option("--baseline", required=True, metavar="B", help="The run of the old setup.")
@click.option("--candidate", required=True, metavar="C", help="The run of the new setup.")
@click.option("--noise", metavar="N", multiple=True,
              help="A run of the old setup restarted (repeatable): the noise floor.")
@click.option("--candidate-repeat", "repeats", multiple=True, metavar="FILE",
              help="Another run of the candidate's setup (repeatable).")
@click.option("--policy", type=click.Choice(["overlap", "paired"]), default="overlap",
              show_default=True, help="The gate's policy (see kveval gate --help).")
@click.option("--margin", type=click.FloatRange(min=0), default=None, metavar="POINTS",
              help="With --policy paired: the largest tolerated loss, in points.  [default: 3]")
@click.option("--metric", type=click.Choice(["flexible", "strict"]), default="flexible",
              show_default=True, help="Judge `correct` or `correct_strict`.")
@click.option("--max-error-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              metavar="FRACTION",
              help="Cannot judge a run with more error or missing items than this.")
@click.option("--skip", multiple=True, metavar="TASK", help="Leave a task unjudged (repeatable).")
@curves.min_recovery_option
@curves.threshold_option
@max_kl_option
@click.option("-o", "--output", required=True, metavar="FILE", help="Where to write the page.")
def report(baseline: str, candidate: str, noise: tuple[str, ...], repeats: tuple[str, ...],
           policy: str, margin: float | None, metric: str, max_error_rate: float,
           skip: tuple[str, ...], min_recovery: float | None, effective_threshold: float,
           max_kl: float | None, output: str) -> int:
    """One self-contained HTML page: verdict, setup, accuracy, drift, long context and the
    changed answers side by side. Exit code as gate: 0 pass, 1 regression, 2 cannot judge.

    \b
    The page's verdict is the gate's with the same options (--min-recovery, --max-kl too).
    Inline CSS and SVG, no script, nothing fetched: it opens from disk and works as a CI
    artifact. Charts need matplotlib (pip install 'kveval[plot]'); without it, tables.
    """
    args = GateArgs(baseline, candidate, noise, repeats, skip, policy,
                    gate_margin(policy, margin), metric, effective_threshold)
    inputs, error = load_inputs(args)
    result, verdict, code = (_decide(inputs, max_error_rate, min_recovery, max_kl)
                             if error is None else (None, None, 2))
    if isinstance(verdict, Exception):
        error, verdict = verdict, None
    write_page(output, page_html(inputs, result, error, verdict))
    click.echo(output)
    if error is not None:
        raise error
    return code


def _decide(inputs: Inputs, max_error_rate: float, min_recovery: float | None,
            max_kl: float | None) -> tuple[GateReport | None, dict[str, Any] | Exception, int]:
    """The gate's decision and final JSON, or why it cannot be taken (the page says so)."""
    from kveval.cli.verdicts import decide_gate
    from kveval.errors import KvevalError

    try:
        result, _, data, code = decide_gate(inputs, max_error_rate, min_recovery, max_kl)
    except KvevalError as exc:
        return None, exc, 2
    return result, data, code
