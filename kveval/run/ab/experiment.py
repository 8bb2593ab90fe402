"""One `kveval ab` experiment's sending: check the commands, refuse changed arguments, print
the plan, then each start in order (steps.py). The gate on what it made is the command's
(cli/ab.py): judging never touches a server.

Teacher forcing: `off` never; `on` on every server, the baseline's own too (refused with one
line where the first server cannot); `auto` where the first server's check finds a method that
works, decided once and kept in `DIR/ab.json`, so a resumed experiment forces as it began.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from kveval.atomic import output_folder
from kveval.errors import EXIT_OK, Interrupted
from kveval.formats.lock import folder_held
from kveval.run import serve
from kveval.run.ab.forcing import Forcing
from kveval.run.ab.options import AbOptions
from kveval.run.ab.plan import Folder, Start, plan
from kveval.run.ab.progress import progress
from kveval.run.ab.state import (
    check_ours,
    read_state,
    recorded_command,
    recorded_env,
    resumed,
    write_state,
)
from kveval.run.ab.steps import Context, run_start
from kveval.run.interrupt import exit_code, how
from kveval.run.leftover import stop_leftovers
from kveval.safe import shell_line

FORCING = ", teacher-forcing the baseline's answers"


def check_commands(opts: AbOptions) -> None:
    """Every command, the suite and its --speed load, before any server starts."""
    from kveval.run.tasks import read_suite

    for side in opts.sides:
        serve.check_command(serve.Command(side.name, opts.command(side), side.env))
    suite = read_suite(opts.suite)
    if opts.speed:
        from kveval.run.ab.speed import LoadSize

        LoadSize.of(suite.speed)


def plan_lines(opts: AbOptions, starts: Sequence[Start]) -> list[str]:
    """--dry-run: each start, its command line and environment (secrets fingerprinted), each
    run and its state."""
    lines = [f"kveval ab: plan in {opts.output}"]
    for number, start in enumerate(starts, 1):
        env = " ".join(f"{k}={v}" for k, v in recorded_env(opts, start.side).items())
        lines.append(f"start {number}: {start.label}: {(env + ' ') if env else ''}"
                     f"{shell_line(recorded_command(opts, start.side))}")
        lines += [f"  run {step.path} (--order {step.order}"
                  f"{FORCING if step.forced else ''}): "
                  f"{progress(step.path).words()}" for step in start.runs]
        if start.speed:
            lines.append("  --speed load")
    pages = [f"{opts.output / 'gate.json'}", f"{opts.output / 'report.html'}"]
    if len(opts.candidates) > 1:
        pages.append(f"a page per candidate ({opts.output / 'NAME.html'})")
    return lines + [f"then: {', '.join(pages)}"]


def prepare(opts: AbOptions, api_key: str | None) -> AbOptions | None:
    """The commands checked, the folder's record made or checked against these arguments;
    the options with the experiment's salt, or None where --dry-run printed the plan."""
    check_commands(opts)
    folder = Folder(opts.output)
    state, opts = resumed(folder.state, opts)
    starts = plan(opts, forcing=opts.teacher_force != "off")
    check_ours(opts, starts)
    if opts.dry_run:
        click.echo("\n".join(plan_lines(opts, starts)))
        return None
    output_folder(opts.output)
    write_state(folder.state, Forcing(opts, state, api_key).state)
    return opts


def send_pass(opts: AbOptions, api_key: str | None) -> int:
    """Every start of these options not finished on file; the worst run's exit code (1:
    items failed)."""
    folder = Folder(opts.output)
    starts = plan(opts, forcing=opts.teacher_force != "off")
    check_ours(opts, starts)
    state = read_state(folder.state)
    assert state is not None  # prepare wrote it
    forcing = Forcing(opts, state, api_key)
    with folder_held(opts.output):  # one kveval ab a folder; a killed one's servers stopped
        stop_leftovers(folder.root / "servers", opts.grace)
        try:
            if opts.parallel > 1:
                from kveval.run.ab.parallel import run_side_by_side

                return run_side_by_side(opts, starts, api_key)
            ctx = Context(opts, folder, api_key, forcing, forcing.stop)
            return max([run_start(ctx, start, forcing.state.forcing) for start in starts])
        except (KeyboardInterrupt, Interrupted):
            raise Interrupted(interrupted_words(starts), exit_code()) from None


def run_experiment(opts: AbOptions, api_key: str | None) -> int:
    """Every start not finished on file; the worst run's exit code (1: items failed)."""
    ready = prepare(opts, api_key)
    return EXIT_OK if ready is None else send_pass(ready, api_key)


def interrupted_words(starts: Sequence[Start]) -> str:
    """What an interrupted experiment leaves: each run file's state, and how to go on."""
    found = []
    for step in (step for start in starts for step in start.runs):
        state = progress(step.path)
        if state.planned is not None or step.path.exists():
            found.append(f"{step.path.name} " + ("finished" if state.finished else
                                                 f"{state.answered} of {state.planned or '?'}"
                                                 " items"))
    held = "; ".join(found) or "no run file yet"
    return (f"interrupted ({how()}); the server it started was stopped; on file: {held}; "
            "the same `kveval ab` command resumes, sending only what is missing")
