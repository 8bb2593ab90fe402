"""One `kveval run`, start to end: resolve specs and data (resolve.py), probe the endpoint,
claim the run file (runfile.py), send, summarize.

Everything that can be checked before a request is sent is checked first, so bad input
fails in one line within seconds and an existing run file is never touched by mistake.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import click

from kveval import __version__, masking, secret_sources
from kveval.adapters import ADAPTERS
from kveval.adapters.base import BuildContext, Item, TaskSpec
from kveval.errors import EXIT_OK, EXIT_REGRESSION, UsageError
from kveval.formats.records import ItemRecord, Run, RunHeader
from kveval.formats.unforced import left_out, sentence
from kveval.run.client import ClientConfig
from kveval.run.credentials import api_key
from kveval.run.endpoint import ServerInfo, choose_model, probe, redact
from kveval.run.options import RunOptions
from kveval.run.resolve import LONG_CONTEXT, Resolved, load_task_data, resolve
from kveval.run.runfile import RunFile
from kveval.run.runner import Job, Sent, execute, plan
from kveval.safe import one_line

EMBEDDED = "embedded"
DEFAULT_TIMEOUT_S = 600.0  # --timeout where neither it nor the suite gives one
DEFAULT_CONCURRENCY = 32  # --concurrency where the user gives none and the server no slots


# ---------------------------------------------------------------- the endpoint


@dataclass(frozen=True)
class Target:
    base_url: str
    endpoint_label: str  # what the header records
    model: str
    info: ServerInfo


@contextlib.contextmanager
def open_target(opts: RunOptions, logits_all: bool = False) -> Iterator[Target]:
    """Probe the given endpoint, or start the embedded engine and probe that (keeping every
    position's logits only when log-probabilities are asked for)."""
    if opts.endpoint:
        info = probe(opts.endpoint, api_key())
        model = choose_model(opts.model, info.model_ids)
        yield Target(opts.endpoint, opts.endpoint_label or redact(opts.endpoint), model, info)
        return
    from kveval.run.engine_setup import EngineConfig
    from kveval.run.local import serve

    config = EngineConfig(**opts.engine, logits_all=logits_all)
    with serve(config) as engine:
        info = probe(engine.base_url, None)
        info = ServerInfo(info.models, {**info.fingerprint, "engine": engine.fingerprint})
        yield Target(engine.base_url, EMBEDDED, opts.model or engine.model, info)


def with_slots(opts: RunOptions, target: Target, old: Run | None) -> RunOptions:
    """--concurrency where the user gave none: a resumed run's own, else 32, or the slots
    the server reports where fewer (requests beyond them would wait in its queue, their
    clock running against --timeout), said in one line."""
    from kveval.run.forcing.method import server_slots

    if opts.concurrency is not None:
        return opts
    if old is not None:
        return dataclasses.replace(opts, concurrency=old.header.concurrency)
    slots = server_slots(target.info.fingerprint)
    if slots is None or slots >= DEFAULT_CONCURRENCY:
        return dataclasses.replace(opts, concurrency=DEFAULT_CONCURRENCY)
    click.echo(f"note: the server reports {slots} slot(s) (/props total_slots): "
               f"--concurrency {slots}, not {DEFAULT_CONCURRENCY} (more would wait in its queue "
               "against --timeout); give --concurrency to choose", err=True)
    return dataclasses.replace(opts, concurrency=slots)


# ---------------------------------------------------------------- the run file


def make_header(opts: RunOptions, target: Target, resolved: Resolved,
                sources: dict[str, str | None], items: dict[str, int] | None = None) -> RunHeader:
    """The header; `items`: how many items each task asked for (the gate holds a run to it)."""
    tasks = [{**spec.to_header(), "data_source": sources.get(spec.name),
              **({"items": items[spec.name]} if items and spec.name in items else {})}
             for spec in resolved.specs]
    return RunHeader(
        label=opts.label, endpoint=target.endpoint_label, model=target.model, tasks=tasks,
        sampling={"temperature": 0.0, "seed": opts.seed, "extra_body": resolved.extra_body},
        concurrency=opts.concurrency or DEFAULT_CONCURRENCY, fingerprint=target.info.fingerprint,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        kveval_version=__version__, setup=resolved.setup,
        order="shuffle" if opts.order == "shuffle" else "data",
        order_seed=random.SystemRandom().randrange(2**32) if opts.order == "shuffle" else None,
    )


def in_order(jobs: Sequence[Job], header: RunHeader) -> list[Job]:
    """The jobs in the header's order: as built, or shuffled by random.Random(order_seed)."""
    ordered = list(jobs)
    if header.order == "shuffle":
        random.Random(header.order_seed).shuffle(ordered)
    return ordered


# ---------------------------------------------------------------- the session


def build_items(specs: Sequence[TaskSpec], loaded: dict[str, Any], target: Target
                ) -> tuple[list[tuple[TaskSpec, list[Item]]], dict[str, str]]:
    """Each task's items, and for long-context tasks how their tokens were counted.

    One token counter serves every long-context task, so its probes and cache are shared."""
    built, sizing = [], {}
    counter = None
    for spec in specs:
        long_context = spec.adapter in LONG_CONTEXT
        if long_context and counter is None:
            from kveval.run.tokens import make_token_counter

            counter = make_token_counter(target.base_url, target.model, api_key())
        ctx = BuildContext(data=loaded[spec.name],
                           max_context=target.info.max_context(target.model),
                           count_tokens=counter if long_context else None)
        _note_skipped(spec, ctx)
        built.append((spec, ADAPTERS[spec.adapter].build(spec, ctx)))
        if long_context:
            sizing[spec.name] = f"generated; tokens counted by {getattr(counter, 'source', '?')}"
    return built, sizing


def _note_skipped(spec: TaskSpec, ctx: BuildContext) -> None:
    skipped = getattr(ADAPTERS[spec.adapter], "skipped_lengths", None)
    lengths = skipped(spec, ctx) if skipped else []
    if lengths:
        shown = ", ".join(map(str, lengths))
        click.echo(f"note: {one_line(spec.name)}: skipped lengths {shown} tokens: "
                   f"above the server's context of {ctx.max_context} minus the answer budget",
                   err=True)


def _preflight(target: Target, pending: Sequence[Job]) -> Any:
    """The longest-prompt check; not on the embedded engine, whose context kveval set itself
    and where one CPU prefill of a long prompt costs 10 to 40 seconds."""
    if not pending or target.endpoint_label == EMBEDDED:
        return None
    from kveval.run.preflight import check_longest

    return check_longest(pending)


def run_forced(opts: RunOptions, started: float) -> int:
    """--teacher-force BASE: the baseline's own answers, scored under this server by the
    best method it offers (run/forcing/method.py), chosen before any item is sent."""
    from kveval.run.forcing import plan as teacher

    out = RunFile.claim(opts.output, opts.resume, opts.overwrite,
                        [opts.teacher_force, opts.engine.get("model_path")])
    baseline = teacher.load_baseline(str(opts.teacher_force))
    with open_target(opts, logits_all=True) as target:
        opts = with_slots(opts, target, out.old)
        plan, method = teacher.plan_run(baseline, target.base_url, target.model,
                                        target.info.fingerprint, opts, api_key(),
                                        target.endpoint_label == EMBEDDED)
        source = f"teacher-forced answers of {baseline.path}"
        header = make_header(opts, target, Resolved(plan.specs, opts.setup, opts.extra_body),
                             {spec.name: source for spec in plan.specs},
                             dict(Counter(job.item.task for job in plan.jobs)))
        header = dataclasses.replace(header, teacher_force={
            "baseline": baseline.header.label or baseline.path.stem, **method.header(),
            "unforced": plan.unforced or None})
        return send_all(opts, target, header, plan.jobs, out, started)


def send_all(opts: RunOptions, target: Target, header: RunHeader, jobs: list[Job],
             out: RunFile, started: float, order: Sequence[str] = ()) -> int:
    """Send what the run file does not hold yet, append each record, print the summary."""
    config = ClientConfig(target.base_url, api_key(), opts.timeout or DEFAULT_TIMEOUT_S,
                          opts.retries)
    done = out.pending(header, [job.item for job in jobs])
    pending = [job for job in jobs if (job.item.task, job.item.item_id) not in done]
    sent = execute(pending, config, header.concurrency, lambda: out.writer(header),
                   f"run {opts.label}", before=_preflight(target, pending))
    every = out.every(sent.records)
    forced_from = str(header.teacher_force.get("baseline") or "the baseline") \
        if header.teacher_force else ""
    return summarize(opts, every, sent, time.perf_counter() - started, order,
                     sentence(left_out(header.teacher_force, every)), forced_from)


def replayed(opts: RunOptions, old: Run | None) -> RunOptions:
    """With no task named: the settings of the run on file (--resume) or of --like FILE."""
    if opts.task_names or opts.suite:
        return opts
    from kveval.formats.reader import read_run
    from kveval.run.replay import from_header

    if opts.like:
        return from_header(read_run(opts.like).header, opts, new_run=True)
    if old is None:
        raise UsageError(f"{opts.output}: no run file to resume; name what to run: --task "
                         "NAME or --suite FILE.toml")
    return from_header(old.header, opts)


def run_session(opts: RunOptions) -> int:
    started = time.perf_counter()
    # registered at start-up (cli.main, the --endpoint option) too; here for every caller
    masking.register_secrets([*secret_sources.key_secrets(api_key()),
                              *secret_sources.url_secrets(opts.endpoint)])
    if opts.teacher_force:
        return run_forced(opts, started)
    out = RunFile.claim(opts.output, opts.resume, opts.overwrite)
    opts = replayed(opts, out.old)
    resolved = resolve(opts)
    opts = dataclasses.replace(opts, timeout=opts.timeout or resolved.timeout)
    out.refuse_inputs([opts.suite, opts.engine.get("model_path"),
                       *(spec.data for spec in resolved.specs)])
    loaded, sources = {}, {}
    for spec in resolved.specs:
        loaded[spec.name], sources[spec.name] = load_task_data(spec)
    logits_all = any(spec.params.get("logprobs") or spec.adapter == "context"
                     for spec in resolved.specs)
    with open_target(opts, logits_all) as target:
        opts = with_slots(opts, target, out.old)
        built, sizing = build_items(resolved.specs, loaded, target)
        header = make_header(opts, target, resolved, {**sources, **sizing},
                             {spec.name: len(items) for spec, items in built})
        jobs = in_order(_documents(plan(built, target.model, opts.seed, resolved.extra_body),
                                   target, opts),
                        out.old.header if out.old else header)  # a resumed run keeps its order
        if not jobs:
            raise UsageError("nothing to run: the tasks built no items")
        return send_all(opts, target, header, jobs, out, started,
                        [spec.name for spec in resolved.specs])


def _documents(jobs: list[Job], target: Target, opts: RunOptions) -> list[Job]:
    """The context task's items forced as documents by the server's best method."""
    from kveval.run.forcing.plan import with_documents

    return with_documents(jobs, target.base_url, target.model, target.info.fingerprint, opts,
                          api_key(), target.endpoint_label == EMBEDDED)


def summarize(opts: RunOptions, items: Sequence[ItemRecord], new: Sent,
              wall_s: float, order: Sequence[str] = (), not_forced: str = "",
              forced_from: str = "") -> int:
    from kveval.run.summary import render_run_summary

    click.echo(render_run_summary(items, sent=len(new.records), wall_s=wall_s,
                                  path=str(opts.output), order=order, not_forced=not_forced,
                                  forced_from=forced_from, resent=new.resent))
    errors = sum(1 for item in items if not item.ok)
    if errors:
        click.echo(f"{errors} item(s) failed; `kveval run ... --resume -o {opts.output}` "
                   "retries only those.", err=True)
        return EXIT_REGRESSION
    return EXIT_OK
