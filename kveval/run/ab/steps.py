"""One server of an `ab` experiment: start it (run/serve.py), send each unfinished run
through the same session `kveval run` uses (run/session.py: every check, resume and
protection a run has), teacher-force the baseline's answers, measure the `--speed` load,
read the KV pool its log told, stop it. What it measured goes to `DIR/servers/LABEL.json`.

Every run header records the setup as `--setup` does: `server_command` (the command with
`{port}` kept: the port changes at every start), `server_args` and `server_env` (secrets
masked on the way out), and the endpoint as `http://127.0.0.1:{port}/v1`, so a restart of
the same setup continues a cut run.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
import msgspec

from kveval.errors import EXIT_OK, EndpointError, KvevalError, UsageError
from kveval.formats.figures import ServerFigures, read_optional, write_figures
from kveval.formats.figures import (
    Start as Started,
)
from kveval.run import serve
from kveval.run.ab.env import masked_argv
from kveval.run.ab.model_kv import completed
from kveval.run.ab.options import AbOptions
from kveval.run.ab.pace import answered, host_load, pace
from kveval.run.ab.plan import BASELINE, Folder, RunStep, Start
from kveval.run.ab.progress import done
from kveval.run.ab.serverlog import kv_pool
from kveval.run.ab.side import Side
from kveval.run.ab.state import recorded_command, recorded_env, setup_of
from kveval.safe import one_line, shell_line

ENDPOINT = "http://127.0.0.1:{port}/v1"
WARM = ("aiohttp", "tqdm", "kveval.run.client", "kveval.run.data",
        "kveval.run.preflight", "kveval.run.runner", "kveval.run.summary")
STARTUP_LOG = 8 << 20  # bytes of a start's output searched for the KV pool


SLOTS = ("{slot}", "{gpu}")  # where a server started side by side takes its slot's number


@dataclass(frozen=True)
class Context:
    opts: AbOptions
    folder: Folder
    api_key: str | None
    forcing: Callable[[serve.Server], bool]  # whether this experiment forces (asked once)
    stop_forcing: Callable[[str], None] = lambda why: None  # auto: forcing found impossible
    slot: int = 0  # {slot} and {gpu}: which of --parallel N this server holds
    reference: Callable[[], None] = lambda: None  # waits for the baseline's answers on file


def placed(command: serve.Command, slot: int) -> serve.Command:
    """The command with its slot's number where `{slot}` or `{gpu}` stand (a secret that
    holds one registered as the server gets it)."""
    from kveval.masking import register_filled

    for mark in SLOTS:
        register_filled(mark, str(slot))

    def put(text: str) -> str:
        for mark in SLOTS:
            text = text.replace(mark, str(slot))
        return text

    return serve.Command(command.label, tuple(put(a) for a in command.argv),
                         tuple((k, put(v)) for k, v in command.env))


def suite_timeout(suite: str) -> float | None:
    """The suite's `timeout`: a forced run, which reads no suite, keeps it too."""
    from kveval.run.tasks import read_suite

    return read_suite(suite).timeout


def run_options(ctx: Context, step: RunStep, side: Side, base_url: str) -> Any:
    from kveval.run.options import RunOptions

    forced = str(ctx.folder.run(BASELINE)) if step.forced else None
    return RunOptions(
        endpoint=base_url, model=ctx.opts.model, task_names=(),
        suite=None if forced else ctx.opts.suite, limit=None if forced else ctx.opts.limit,
        label=step.label,
        output=step.path, concurrency=ctx.opts.concurrency, api=None, max_tokens=None,
        seed=1234, extra_body=None, timeout=ctx.opts.timeout or suite_timeout(ctx.opts.suite),
        retries=3, resume=step.path.exists(),
        overwrite=False, data=ctx.opts.data, prompts_file=None,
        setup=setup_of(ctx.opts, side), order=step.order, teacher_force=forced,
        endpoint_label=ENDPOINT)


class Recorder:
    """The server's figures file, rewritten after every change."""

    def __init__(self, path: Path, figures: ServerFigures) -> None:
        self.path, self.figures = path, figures

    def update(self, **changes: Any) -> None:
        self.figures = msgspec.structs.replace(self.figures, **changes)
        write_figures(self.path, self.figures)


def recorder(ctx: Context, start: Start) -> Recorder:
    path = ctx.folder.figures(start.label)
    found = read_optional(path) or ServerFigures(
        start.label, tuple(recorded_command(ctx.opts, start.side)),
        recorded_env(ctx.opts, start.side))
    return Recorder(path, found)


def warm_up() -> None:
    """What a run imports on its first request, imported before its pace is timed (the
    baseline's run would otherwise pay it alone)."""
    import importlib

    for name in WARM:
        importlib.import_module(name)


def send(ctx: Context, step: RunStep, start: Start, server: serve.Server,
         record: Recorder) -> int:
    """One run, through `kveval run`'s session; the free run's pace is recorded even when
    it is cut short."""
    from kveval.run.session import run_session

    click.echo(f"kveval ab: {start.label}: run {step.path.name}"
               f"{' (shuffled)' if step.order == 'shuffle' else ''}", err=True)
    warm_up()
    before = answered(step.path)[:2]
    began, load = time.perf_counter(), host_load()
    try:  # stdout is the gate's: each run's summary goes to stderr with the progress
        with contextlib.redirect_stdout(sys.stderr):
            return run_session(run_options(ctx, step, start.side, server.base_url))
    finally:
        if not step.forced:
            record.update(run=pace(before, step.path, time.perf_counter() - began,
                                   record.figures.run, (load, host_load())))


def send_step(ctx: Context, step: RunStep, start: Start, server: serve.Server,
              record: Recorder) -> int:
    """One run; with --teacher-force auto, a forced run the server cannot make (chat items
    and no chat template endpoint, say) ends forcing for the experiment with a note."""
    if not step.forced or ctx.opts.teacher_force != "auto":
        return send(ctx, step, start, server, record)
    try:
        return send(ctx, step, start, server, record)
    except (UsageError, EndpointError) as exc:
        step.path.unlink(missing_ok=True)
        ctx.stop_forcing(str(exc))
        return EXIT_OK


def _model(ctx: Context, server: serve.Server) -> str:
    from kveval.run.endpoint import choose_model, list_models

    return choose_model(ctx.opts.model, [str(m.get("id")) for m in
                                         list_models(server.base_url, ctx.api_key)])


def measure_speed(ctx: Context, server: serve.Server, record: Recorder) -> None:
    from kveval.run.ab.speed import load_size, measure

    size = load_size(ctx.opts.suite)
    click.echo(f"kveval ab: {server.command.label}: speed load, {size.requests} requests of "
               f"{size.prompt_tokens} tokens in, {size.output_tokens} out, at "
               f"{', '.join(map(str, size.concurrency))} concurrent users", err=True)
    loads = measure(server.base_url, _model(ctx, server), ctx.api_key, size)
    record.update(speed=loads)
    for load in loads:
        if load.errors:
            click.echo(f"note: {server.command.label}: speed load at {load.concurrency} "
                       f"users: {load.errors} of {load.requests} requests failed "
                       f"({one_line(load.error or '')})", err=True)


def finished(ctx: Context, step: RunStep) -> bool:
    """The run is done at this pass's size (a forced one: holds the baseline's items)."""
    return done(step.path, ctx.opts.limit, ctx.folder.run(BASELINE) if step.forced else None)


def pending(ctx: Context, start: Start, forcing: bool | None) -> list[RunStep]:
    """The runs of this start not finished yet (forced ones only where forcing is on)."""
    return [step for step in start.runs
            if not (step.forced and forcing is False) and not finished(ctx, step)]


def needed(ctx: Context, start: Start, figures: ServerFigures, forcing: bool | None) -> bool:
    return bool(pending(ctx, start, forcing)) or (start.speed and not figures.speed)


def model_path(run: Path) -> str | None:
    """The model file the server said it loads (llama-server's /props `model_path`, in the
    free run's header), where the run file has a header."""
    from kveval.formats.reader import parse_header

    try:
        with run.open("rb") as fh:
            header = parse_header(fh.readline(), run)
    except (OSError, KvevalError):
        return None
    props = header.fingerprint.get("props")
    found = props.get("model_path") if isinstance(props, dict) else None
    return found if isinstance(found, str) else None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@contextlib.contextmanager
def _serve(ctx: Context, start: Start, record: Recorder) -> Iterator[serve.Server]:
    command = placed(serve.Command(start.label, ctx.opts.command(start.side), start.side.env),
                     ctx.slot)
    shown = masked_argv(command.argv, ctx.opts.names)  # a secret too short to mask in text too
    click.echo(f"kveval ab: {start.label}: start {shell_line(shown)}", err=True)
    with serve.serving(command, ctx.folder.log(start.label), ctx.opts.ready_timeout,
                       ctx.api_key, ctx.opts.grace) as (server, ready_s):
        click.echo(f"kveval ab: {start.label}: answering on port {server.port} after "
                   f"{ready_s:.1f} s", err=True)
        record.update(starts=(*record.figures.starts, Started(server.port, ready_s, _now())))
        yield server
        pool = completed(kv_pool(server.output(first=STARTUP_LOG)), command.at(server.port)[0],
                         model_path(start.free.path))
        if pool is not None:
            record.update(kv=pool)
        click.echo(f"kveval ab: {start.label}: stopping", err=True)


def run_start(ctx: Context, start: Start, forcing: bool | None) -> int:
    """Start the server where something of it is left to do; the worst exit code of its
    runs (1: some items failed)."""
    record = recorder(ctx, start)
    if not needed(ctx, start, record.figures, forcing):
        click.echo(f"kveval ab: {start.label}: finished on file; not started", err=True)
        return EXIT_OK
    code = EXIT_OK
    with _serve(ctx, start, record) as server:
        for step in start.runs:
            if step.forced and start.label != BASELINE:
                ctx.reference()  # side by side: the baseline's answers are on file first
            if finished(ctx, step) or (step.forced and not ctx.forcing(server)):
                continue
            code = max(code, send_step(ctx, step, start, server, record))
            serve.check_alive(server)
        if start.speed and not record.figures.speed:
            measure_speed(ctx, server, record)
            serve.check_alive(server)
    return code
