"""One `kveval ab` experiment's sending: check the commands, refuse changed arguments, print
the plan, then each start in order (steps.py). The gate on what it made is the command's
(cli/ab.py): judging never touches a server.

Teacher forcing: `off` never; `on` on every server, the baseline's own too (refused with one
line where the first server cannot); `auto` where the first server's check finds a method that
works, decided once and kept in `DIR/ab.json`, so a resumed experiment forces as it began.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import click

from kveval.errors import EXIT_OK, Interrupted, UsageError
from kveval.run import serve
from kveval.run.ab.options import AbOptions
from kveval.run.ab.plan import Folder, Start, plan
from kveval.run.ab.state import State, progress, resumed, write_state
from kveval.run.ab.steps import Context, run_start
from kveval.run.interrupt import exit_code, how

FORCING = ", teacher-forcing the baseline's answers"


def check_commands(opts: AbOptions) -> None:
    for side in (opts.baseline, opts.candidate):
        serve.check_command(serve.Command(side.name, opts.command(side), side.env))


def plan_lines(opts: AbOptions, starts: Sequence[Start]) -> list[str]:
    """--dry-run: each start, its command line and environment, each run and its state."""
    lines = [f"kveval ab: plan in {opts.output}"]
    for number, start in enumerate(starts, 1):
        env = " ".join(f"{k}={v}" for k, v in start.side.env)
        lines.append(f"start {number}: {start.label}: {(env + ' ') if env else ''}"
                     f"{shlex.join(opts.command(start.side))}")
        lines += [f"  run {step.path} (--order {step.order}"
                  f"{FORCING if step.forced else ''}): "
                  f"{progress(step.path).words()}" for step in start.runs]
        if start.speed:
            lines.append("  --speed load")
    return lines + [f"then: {opts.output / 'gate.json'}, {opts.output / 'report.html'}"]


class Forcing:
    """Whether this experiment teacher-forces, asked of the first server that is up."""

    def __init__(self, opts: AbOptions, state: State, api_key: str | None) -> None:
        self.opts, self.state, self.api_key = opts, state, api_key
        if opts.teacher_force == "off":
            self.state = State(state.arguments, False)

    def __call__(self, server: serve.Server) -> bool:
        if self.state.forcing is None:
            self.state = State(self.state.arguments, self._probe(server))
            write_state(Folder(self.opts.output).state, self.state)
        return bool(self.state.forcing)

    def stop(self, why: str) -> None:
        click.echo(f"note: not teacher-forcing: {why}", err=True)
        self.state = State(self.state.arguments, False)
        write_state(Folder(self.opts.output).state, self.state)

    def _probe(self, server: serve.Server) -> bool:
        from kveval.run.check import forcing_method
        from kveval.run.endpoint import choose_model, probe

        info = probe(server.base_url, self.api_key)
        model = choose_model(self.opts.model, info.model_ids)
        method, why = forcing_method(server.base_url, model, self.api_key, info.fingerprint)
        if why is None:
            click.echo(f"kveval ab: teacher forcing by {method.name}", err=True)
            return True
        if self.opts.teacher_force == "on":
            raise UsageError(f"--teacher-force on: this server cannot teacher-force ({why})")
        click.echo(f"note: not teacher-forcing: {why}", err=True)
        return False


def run_experiment(opts: AbOptions, api_key: str | None) -> int:
    """Every start not finished on file; the worst run's exit code (1: items failed)."""
    check_commands(opts)
    folder = Folder(opts.output)
    state = resumed(folder.state, opts)
    starts = plan(opts, forcing=opts.teacher_force != "off")
    if opts.dry_run:
        click.echo("\n".join(plan_lines(opts, starts)))
        return EXIT_OK
    opts.output.mkdir(parents=True, exist_ok=True)
    forcing = Forcing(opts, state, api_key)
    write_state(folder.state, forcing.state)
    ctx = Context(opts, folder, api_key, forcing, forcing.stop)
    try:
        return max([run_start(ctx, start, forcing.state.forcing) for start in starts])
    except (KeyboardInterrupt, Interrupted):
        raise Interrupted(interrupted_words(starts), exit_code()) from None


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
