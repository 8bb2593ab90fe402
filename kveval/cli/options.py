"""The options the verdict commands share, as click decorators, the judging options they
make, and the option types every command uses: `Finite` for every number that is not a
count (NaN and the infinities refused, the range stated in --help and in the error) and
`Endpoint`, whose credentials are registered as secrets the moment it is parsed. Only
click is imported at module level, so `kveval --help` stays fast."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kveval.judge.verdict import Family
    from kveval.show.report import Block

F = TypeVar("F", bound=Callable[..., Any])


class Finite(click.FloatRange):
    """A number within its range, never NaN or an infinity (which every comparison with a
    bound lets through)."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number ({self._describe_range()}).", param,
                      ctx)
        return number


class Endpoint(click.ParamType):
    """A base URL whose user:password is a secret from the moment it is read (masked in
    every output, kveval/masking.py)."""

    name = "url"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        from kveval.masking import register_secrets
        from kveval.secret_sources import url_secrets

        register_secrets(url_secrets(str(value)))
        return str(value)


SEED = click.IntRange(0, 2**63 - 1)  # what every server's seed field takes


def _apply(func: F, *decorators: Callable[[F], F]) -> F:
    for decorate in reversed(decorators):
        func = decorate(func)
    return func


def output_options(func: F) -> F:
    return _apply(func,
                  click.option("--json", "as_json", is_flag=True,
                               help="Print machine-readable JSON on stdout."),
                  click.option("--markdown", is_flag=True,
                               help="Print a Markdown block to paste into a PR."))


def noise_option(help_text: str) -> Callable[[F], F]:
    return click.option("--noise", "noise", multiple=True, metavar="N", help=help_text)


def repeat_option(func: F) -> F:
    return click.option(
        "--candidate-repeat", "repeats", multiple=True, metavar="FILE",
        help="Another run of the candidate's setup (repeatable): how much the candidate "
             "disagrees with itself, reported beside the noise floor.")(func)


def family_options(func: F) -> F:
    """The options that shape the family of checks: compare, score, gate and report take
    them all, so the same runs and options print the same adjusted p-values everywhere."""
    return _apply(
        func,
        click.option("--alpha", type=Finite(0, 1, min_open=True, max_open=True),
                     default=0.05, show_default=True, metavar="LEVEL",
                     help="The family-wise level: every check of every task is one Holm "
                          "family at this level."),
        click.option("--metric", type=click.Choice(["flexible", "strict"]), default="flexible",
                     show_default=True,
                     help="Judge `correct` (GSM8K: the flexible match) or `correct_strict`."),
        click.option("--skip", multiple=True, metavar="TASK",
                     help="Leave a task unjudged (repeatable), e.g. one too small for the "
                          "margin."),
        click.option("--max-kl", type=Finite(min=0), default=None, metavar="NATS",
                     help="The divergence checks (free-running and forced) fail a task when "
                          "its mean per-token KL exceeds the noise floor's by more than NATS "
                          "(one-sided permutation within items). Needs noise runs with "
                          "log-probabilities. Without it, a rise beyond the floor is named "
                          "beside the verdict and fails nothing. Applies to the context "
                          "task's KL by position too."),
        click.option("--max-ppl-rise", type=Finite(min=0), default=None, metavar="PCT",
                     help="The context task: fail a perplexity rise beyond PCT percent in any "
                          "position bucket beyond the restarts' own spread (needs a noise "
                          "run)."),
        click.option("--min-recovery", type=Finite(0, 1, min_open=True),
                     metavar="R",
                     help="A check per long-context task: its AUC recovery is at least R (a "
                          "fraction: 0.95 = 95% of the baseline's AUC); needs 5 paired items "
                          "per length."),
        click.option("--effective-fraction", type=Finite(0, 1, min_open=True),
                     default=0.9, show_default=True, metavar="FRACTION",
                     help="Relative effective length: the longest length up to which a task "
                          "scores at least this fraction of its shortest length's score."),
        click.option("--effective-threshold", type=Finite(0, 1),
                     default=0.85, show_default=True, metavar="SCORE",
                     help="Absolute effective length (RULER): the longest length up to which "
                          "a task scores at least SCORE."))


def forced_options(func: F) -> F:
    """The teacher-forced passes of the baseline's answers (`kveval run --teacher-force
    BASELINE`): each forced run judged against the baseline's own forced pass."""
    return _apply(
        func,
        click.option("--baseline-forced", metavar="FILE",
                     help="The baseline's answers teacher-forced on the baseline's own server: "
                          "the reference every forced run is compared with."),
        click.option("--candidate-forced", metavar="FILE",
                     help="The baseline's answers teacher-forced on the candidate's server."),
        click.option("--noise-forced", multiple=True, metavar="FILE",
                     help="The baseline's answers teacher-forced on a restart of the "
                          "baseline's setup (repeatable): the forced noise floor."))


def forced_paths(baseline_forced: str | None, candidate_forced: str | None,
                 noise_forced: tuple[str, ...]) -> tuple[str, ...]:
    """(baseline's, candidate's, restarts'...) or () without forced runs; one line where
    only some are given."""
    from kveval.errors import UsageError

    if baseline_forced is None and candidate_forced is None and not noise_forced:
        return ()
    if baseline_forced is None or candidate_forced is None:
        raise UsageError("forced runs are judged together: give --baseline-forced and "
                         "--candidate-forced (and --noise-forced for each restart)")
    return (baseline_forced, candidate_forced, *noise_forced)


def gate_options(func: F) -> F:
    return _apply(
        func,
        click.option("--policy", type=click.Choice(["overlap", "paired"]), default="overlap",
                     show_default=True,
                     help="overlap: the candidate's 95% interval overlaps the baseline's and "
                          "no check shows a loss. paired: the paired 95% interval rules out "
                          "a loss larger than --margin."),
        click.option("--margin", type=Finite(min=0), default=None, metavar="POINTS",
                     help="With --policy paired: the largest tolerated loss, in points (a "
                          "suite task's own `margin` wins).  [default: 3]"),
        click.option("--max-error-rate", type=Finite(0, 1), default=0.0,
                     show_default=True, metavar="FRACTION",
                     help="Cannot judge a run whose share of error or missing items exceeds "
                          "this (0.02 = 2%)."))


def family(alpha: float, metric: str, skip: tuple[str, ...], max_kl: float | None,
           min_recovery: float | None, effective_fraction: float,
           effective_threshold: float, max_ppl_rise: float | None = None) -> Family:
    from kveval.judge.curves import CurveOptions
    from kveval.judge.verdict import Family

    curves = CurveOptions(effective_fraction, effective_threshold, min_recovery)
    return Family(metric, alpha, max_kl, min_recovery, max_ppl_rise, curves, tuple(skip))


def gate_margin(policy: str, margin: float | None) -> float | None:
    """The paired policy's margin (3 points unless given); None for the overlap policy."""
    from kveval.errors import UsageError
    from kveval.judge.verdict import DEFAULT_MARGIN

    if margin is not None and policy != "paired":
        raise UsageError("--margin applies only to --policy paired")
    return (DEFAULT_MARGIN if margin is None else margin) if policy == "paired" else None


def check_output(as_json: bool, markdown: bool) -> None:
    from kveval.errors import UsageError

    if as_json and markdown:
        raise UsageError("choose one of --json and --markdown")


def emit(blocks: Sequence[Block], data: dict[str, Any], as_json: bool, markdown: bool) -> None:
    """A verdict on stdout as the output options ask: JSON, a Markdown block, or text."""
    from kveval.show import report
    from kveval.sink import echo_json

    if as_json:
        echo_json(report.dumps(data))
    elif markdown:
        click.echo(report.to_markdown(blocks), nl=False)
    else:
        click.echo(report.to_text(blocks), nl=False)
