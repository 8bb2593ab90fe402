"""What `gate` and `report` share: reading the runs, taking the gate's decision, and
publishing it as a page (`gate --html`, `report -o`) and a GitHub Actions job summary.

A run file that cannot be read or runs that cannot be judged still give a page (CANNOT
JUDGE, with the reason), so a CI job always has an artifact to upload. Heavy modules are
imported inside the functions, so `kveval --help` stays fast.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from kveval.cli import reading
from kveval.safe import one_line

if TYPE_CHECKING:
    from kveval.judge.compare import Side
    from kveval.judge.forced import Forced
    from kveval.judge.verdict import Family, GateReport
    from kveval.show.page import Inputs
    from kveval.show.report import Block


@dataclass(frozen=True)
class GateArgs:
    """The run files and options of a gate: what `report` and `gate --html` draw."""

    baseline: str
    candidate: str
    noise: tuple[str, ...]
    repeats: tuple[str, ...]
    policy: str
    margin: float | None  # None: the policy has no margin
    family: Family
    forced: tuple[str, ...] = ()  # the baseline's forced pass, the candidate's, the restarts'

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.baseline, self.candidate, *self.noise, *self.repeats, *self.forced)


def refuse_page_over_input(page: str | None, args: GateArgs) -> None:
    """The page is a regular file or a new path (atomic.py) and never replaces a file the
    gate reads (`report -o BASELINE.jsonl` would destroy the baseline): one line, before
    anything is read or written."""
    from kveval.atomic import NotRegular, regular_target
    from kveval.errors import UsageError

    if not page:
        return
    try:
        regular_target(page)
    except NotRegular as exc:
        raise UsageError(f"{page}: {exc}") from None
    if not os.path.exists(page):
        return
    for given in args.paths:
        for found in reading.files_read(given):
            with contextlib.suppress(OSError):
                if os.path.samefile(page, found):
                    raise UsageError(f"{page}: is also an input of this gate ({found}); the "
                                     "page must name another file")


def load_inputs(args: GateArgs) -> tuple[Inputs, Exception | None]:
    """The runs as read; the first file that cannot be read is the error (the page says so)."""
    from kveval.errors import KvevalError
    from kveval.formats.reader import Shared
    from kveval.show.page import Inputs

    shared = Shared()
    sides: list[Side | None] = []
    error: Exception | None = None
    for path in args.paths:
        try:
            sides.append(reading.load_run(path, shared))
        except KvevalError as exc:
            sides.append(None)
            error = error or exc
    free = 2 + len(args.noise) + len(args.repeats)
    noise, repeats = sides[2:2 + len(args.noise)], sides[2 + len(args.noise):free]
    return Inputs(sides[0], sides[1], tuple(s for s in noise if s is not None),
                  tuple(s for s in repeats if s is not None), args.family.skip, args.policy,
                  args.margin, args.family, _forced(sides[free:])), error


def _forced(sides: list[Side | None]) -> Forced | None:
    from kveval.judge.forced import Forced

    if not sides or any(s is None for s in sides):
        return None
    found = [s for s in sides if s is not None]
    return Forced(found[0], found[1], tuple(found[2:]))


def decide_gate(inputs: Inputs, max_error_rate: float,
                ) -> tuple[GateReport, list[Block], dict[str, Any]]:
    """The gate's whole decision on runs already read (judge/verdict.py decides), its text
    blocks and its JSON. `gate` prints it and `report` draws it."""
    from kveval.judge.verdict import DEFAULT_MARGIN, gate
    from kveval.show import report

    base, cand = inputs.baseline, inputs.candidate
    assert base is not None and cand is not None  # load_inputs read every file
    reading.check_fewshot(base, cand, *inputs.noise, *inputs.repeats)
    result = gate(base, cand, list(inputs.noise), policy=inputs.policy,
                  margin=DEFAULT_MARGIN if inputs.margin is None else inputs.margin,
                  max_error_rate=max_error_rate, repeats=list(inputs.repeats),
                  family=inputs.family, forced=inputs.forced)
    result = with_needs(result, inputs)
    blocks, data = report.gate_blocks(result), report.gate_json(result)
    found = trade_of(inputs)
    data["trade"] = found
    return result, [*blocks[:-1], *trade_blocks(found), *blocks[-1:]], data


def with_needs(result: GateReport, inputs: Inputs) -> GateReport:
    """A verdict with tasks it could not judge carries the plan of what would judge them
    (judge/needs.py)."""
    from dataclasses import replace

    from kveval.judge.needs import needs

    base, cand = inputs.baseline, inputs.candidate
    assert base is not None and cand is not None
    return replace(result, needs=needs(result, base, inputs.noise, cand, inputs.forced))


def figures_beside(path: str) -> Any:
    """What `kveval ab` measured of a run's server (`servers/LABEL.json` beside the run
    file), or None: a run made without it, or a figures file that cannot be read (the
    trade is reported figures, never a reason the gate cannot judge)."""
    from pathlib import Path

    from kveval.errors import KvevalError
    from kveval.formats.figures import read_optional

    run = Path(path)
    try:
        return read_optional(run.parent / "servers" / f"{run.stem}.json")
    except KvevalError:
        return None


def trade_of(inputs: Inputs) -> dict[str, Any]:
    from pathlib import Path

    from kveval.formats.figures import answered
    from kveval.judge.trade import trade

    base, cand = inputs.baseline, inputs.candidate
    assert base is not None and cand is not None
    sides = (base, cand, *inputs.noise)
    return trade(base, cand, inputs.noise, {s.path: figures_beside(s.path) for s in sides},
                 {s.path: answered(Path(s.path)) for s in sides})


def trade_blocks(found: dict[str, Any]) -> list[Block]:
    from kveval.show.trade_view import trade_blocks as blocks

    return blocks(found)


def page_html(inputs: Inputs, result: GateReport | None, error: Exception | None,
              verdict: dict[str, Any] | None = None) -> str:
    """The page; `verdict` is the gate's JSON where the gate got that far."""
    from kveval.show.extras import task_extras
    from kveval.show.html import render
    from kveval.show.page import page_data

    reason = None if error is None else str(error)
    return render(page_data(inputs, result, reason, extras=task_extras, verdict=verdict))


def write_page(path: str, html: str) -> None:
    from pathlib import Path

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
        click.echo(f"kveval: wrote the page {one_line(html)}", err=True)


def cannot_judge_markdown(reason: str) -> str:
    from kveval.safe import markdown

    return f"### kveval gate: CANNOT JUDGE\n\n{markdown(reason)}\n"


def append_step_summary(markdown: str) -> None:
    """On GitHub Actions, the gate's Markdown also goes to the job's summary page."""
    from kveval.atomic import append_text

    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    try:
        append_text(target, markdown + "\n")
    except OSError as exc:
        click.echo(f"kveval: warning: cannot append to $GITHUB_STEP_SUMMARY ({exc})", err=True)
