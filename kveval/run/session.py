"""One `kveval run`, start to end: resolve specs, load data, probe the endpoint, send, summarize.

Everything that can be checked before a request is sent is checked first, so bad input
fails in one line within seconds and an existing run file is never touched by mistake.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from kveval import __version__
from kveval.adapters import ADAPTERS
from kveval.adapters.base import BuildContext, Item, TaskSpec
from kveval.errors import EXIT_OK, EXIT_REGRESSION, RunFileError, UsageError
from kveval.formats.records import (
    ItemRecord,
    Run,
    RunHeader,
    RunWriter,
    create_run,
    read_run,
    refuse_existing,
    reopen_run,
)
from kveval.run.client import ClientConfig
from kveval.run.endpoint import ServerInfo, choose_model, probe, redact
from kveval.run.runner import Job, execute, plan
from kveval.run.tasks import builtin_spec, load_suite, override, resolve_builtin_data

EMBEDDED = "embedded"
LONG_CONTEXT = frozenset({"needle", "needle-multikey", "evidence"})  # sized in server tokens


@dataclass(frozen=True)
class RunOptions:
    endpoint: str | None
    model: str | None
    task_names: tuple[str, ...]
    suite: str | None
    limit: int | None
    label: str
    output: Path
    concurrency: int
    api: str | None
    max_tokens: int | None
    seed: int | None
    extra_body: dict[str, Any] | None
    timeout: float
    retries: int
    resume: bool
    overwrite: bool
    data: str | None
    prompts_file: str | None
    params: dict[str, Any] = field(default_factory=dict)
    logprobs: int | None = None  # --logprobs K; None: each task's own (suite key), else off
    teacher_force: str | None = None  # --teacher-force BASELINE.jsonl
    engine: dict[str, Any] = field(default_factory=dict)  # model_path, kv_cache_type, ctx

    @classmethod
    def from_cli(cls, o: dict[str, Any]) -> RunOptions:
        _check_teacher_force(o)
        if not o["task_names"] and not o["suite"] and not o.get("teacher_force"):
            raise UsageError("name what to run: --task NAME (repeatable) or --suite FILE.toml")
        if o["resume"] and o["overwrite"]:
            raise UsageError("--resume and --overwrite exclude each other")
        engine = {k: o[k] for k in ("model_path", "kv_cache_type", "ctx") if o[k] is not None}
        if engine and o["endpoint"]:
            flags = ", ".join("--" + k.replace("_", "-") for k in engine)
            raise UsageError(f"{flags} only apply to the embedded engine; drop them or --endpoint")
        label = o["label"] or (Path(o["output"]).stem if o["output"] else "run")
        return cls(
            endpoint=o["endpoint"], model=o["model"], task_names=tuple(o["task_names"]),
            suite=o["suite"], limit=o["limit"], label=label,
            output=Path(o["output"] or f"results/{label}.jsonl"),
            concurrency=o["concurrency"], api=o["api"], max_tokens=o["max_tokens"],
            seed=o["seed"], extra_body=_parse_extra_body(o["extra_body"]), timeout=o["timeout"],
            retries=o["retries"], resume=o["resume"], overwrite=o["overwrite"], data=o["data"],
            prompts_file=o["prompts_file"], params=_grid_params(o), engine=engine,
            logprobs=o.get("logprobs"), teacher_force=o.get("teacher_force"),
        )


def _check_teacher_force(o: dict[str, Any]) -> None:
    if not o.get("teacher_force"):
        return
    if o["task_names"] or o["suite"]:
        raise UsageError("--teacher-force takes its items from the baseline run; drop --task "
                         "and --suite")
    if o.get("logprobs") == 0:
        raise UsageError("--teacher-force records log-probabilities: --logprobs must be at "
                         "least 1")


def _parse_extra_body(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--extra-body is not valid JSON ({exc.msg} at column "
                         f"{exc.colno})") from None
    if not isinstance(value, dict):
        raise UsageError("--extra-body must be a JSON object, e.g. '{\"top_k\": 1}'")
    return value


def _grid_params(o: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if o["lengths"]:
        from kveval.adapters.needle import parse_lengths

        params["lengths"] = parse_lengths(o["lengths"])
    if o["depths"]:
        params["depths"] = _parse_depths(o["depths"])
    if o["trials"]:
        params["trials"] = o["trials"]
    return params


def _parse_depths(text: str) -> list[int]:
    try:
        depths = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--depths {text!r}: expected percents such as 0,25,50,75,100") from None
    if not depths or any(d < 0 or d > 100 for d in depths):
        raise UsageError(f"--depths {text!r}: each depth is a percent from 0 to 100")
    return depths


# ---------------------------------------------------------------- specs and data


def resolve_specs(opts: RunOptions) -> list[TaskSpec]:
    specs = load_suite(opts.suite) if opts.suite else []
    specs += [builtin_spec(name) for name in opts.task_names if name not in {s.name for s in specs}]
    return [resolve_builtin_data(_apply_options(spec, opts)) for spec in specs]


def _apply_options(spec: TaskSpec, opts: RunOptions) -> TaskSpec:
    data = None
    if spec.adapter == "gsm8k" and opts.data:
        data = opts.data
    if spec.adapter == "prompts" and opts.prompts_file:
        data = opts.prompts_file
    grid = dict(opts.params) if spec.adapter in LONG_CONTEXT else {}
    if opts.logprobs is not None:
        grid["logprobs"] = opts.logprobs
    return override(spec, limit=opts.limit, api=opts.api, max_tokens=opts.max_tokens, data=data,
                    params=grid)


def load_task_data(spec: TaskSpec) -> tuple[Any, str | None]:
    """The adapter's data and its source (path or dataset revision), for the header."""
    from kveval.run import data

    if spec.adapter == "gsm8k":
        gsm8k = data.load_gsm8k(spec.data)
        return gsm8k, gsm8k.source
    if spec.adapter == "prompts":
        if not spec.data:
            raise UsageError("the prompts task needs a prompt file: --prompts FILE")
        prompts = data.load_prompts(spec.data)
        return prompts, prompts.source
    return None, None


# ---------------------------------------------------------------- the endpoint


@dataclass(frozen=True)
class Target:
    base_url: str
    endpoint_label: str  # what the header records
    model: str
    info: ServerInfo


def api_key() -> str | None:
    return os.environ.get("KVEVAL_API_KEY") or os.environ.get("OPENAI_API_KEY") or None


@contextlib.contextmanager
def open_target(opts: RunOptions, logits_all: bool = False) -> Iterator[Target]:
    """Probe the given endpoint, or start the embedded engine and probe that (keeping every
    position's logits only when log-probabilities are asked for)."""
    if opts.endpoint:
        info = probe(opts.endpoint, api_key())
        model = choose_model(opts.model, info.model_ids)
        yield Target(opts.endpoint, redact(opts.endpoint), model, info)
        return
    from kveval.run.local import EngineConfig, serve

    config = EngineConfig(**opts.engine, logits_all=logits_all)
    with serve(config) as engine:
        info = probe(engine.base_url, None)
        info = ServerInfo(info.models, {**info.fingerprint, "engine": engine.fingerprint})
        yield Target(engine.base_url, EMBEDDED, opts.model or engine.model, info)


# ---------------------------------------------------------------- the run file


def make_header(opts: RunOptions, target: Target, specs: Sequence[TaskSpec],
                sources: dict[str, str | None]) -> RunHeader:
    tasks = [{**spec.to_header(), "data_source": sources.get(spec.name)} for spec in specs]
    return RunHeader(
        label=opts.label, endpoint=target.endpoint_label, model=target.model, tasks=tasks,
        sampling={"temperature": 0.0, "seed": opts.seed, "extra_body": opts.extra_body},
        concurrency=opts.concurrency, fingerprint=target.info.fingerprint,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        kveval_version=__version__,
    )


def _identity(header: RunHeader) -> dict[str, Any]:
    engine = header.fingerprint.get("engine") or {}
    return {
        "endpoint": header.endpoint, "model": header.model, "sampling": header.sampling,
        "tasks": [{k: v for k, v in t.items() if k != "limit"} for t in header.tasks],
        "engine": {k: engine.get(k) for k in ("model_sha256", "kv_cache_type", "n_ctx")},
    }


def check_resumable(old: RunHeader, new: RunHeader, path: Path) -> None:
    """A resumed run must be the same run: endpoint, model, tasks and sampling."""
    a, b = _identity(old), _identity(new)
    differing = [key for key in a if a[key] != b[key]]
    if differing:
        raise RunFileError(f"{path}: cannot resume: the existing run differs in "
                           f"{', '.join(differing)}; use a new -o or --overwrite")


def answered_keys(old: Run | None, header: RunHeader, items: Sequence[Item]) -> set:
    """Resume: the items the existing file already answered, for the same prompt."""
    if old is None:
        return set()
    check_resumable(old.header, header, old.path)
    wanted = {(i.task, i.item_id): i.prompt_sha256 for i in items}
    return {r.key for r in old.items if r.ok and wanted.get(r.key) == r.prompt_sha256}


def kept_items(old: Run | None, done: set) -> list[ItemRecord]:
    return [r for r in old.items if r.key in done] if old else []


def open_writer(opts: RunOptions, header: RunHeader, old: Run | None, done: set) -> RunWriter:
    """A new run file, or the resumed one rewritten as its header and answered items."""
    if old is not None:
        merged = dataclasses.replace(old.header, tasks=header.tasks)
        return reopen_run(opts.output, merged, kept_items(old, done))
    return create_run(opts.output, header, overwrite=opts.overwrite)


def existing_run(opts: RunOptions) -> Run | None:
    """The run to resume, read once before any work; None for a new run file."""
    if opts.output.exists() and not (opts.resume or opts.overwrite):
        refuse_existing(opts.output)
    if opts.output.is_dir():
        raise UsageError(f"{opts.output}: is a folder; -o wants a file")
    return read_run(opts.output) if opts.resume and opts.output.exists() else None


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
        click.echo(f"note: {spec.name}: skipped lengths {', '.join(map(str, lengths))} tokens: "
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
    """--teacher-force BASE: the baseline's own answers, scored under this server."""
    from kveval.run import teacher

    baseline = teacher.load_baseline(str(opts.teacher_force))
    old = existing_run(opts)
    with open_target(opts, logits_all=True) as target:
        render = (teacher.embedded_renderer(opts.engine.get("model_path"))
                  if target.endpoint_label == EMBEDDED else None)
        specs, jobs = teacher.plan_forced(baseline, target.model, opts.logprobs or
                                          teacher.DEFAULT_K, opts.seed, opts.limit, render)
        source = f"teacher-forced answers of {baseline.path}"
        header = make_header(opts, target, specs, {spec.name: source for spec in specs})
        return send_all(opts, target, header, jobs, old, started)


def send_all(opts: RunOptions, target: Target, header: RunHeader, jobs: list[Job],
             old: Run | None, started: float) -> int:
    """Send what the run file does not hold yet, append each record, print the summary."""
    config = ClientConfig(target.base_url, api_key(), opts.timeout, opts.retries)
    done = answered_keys(old, header, [job.item for job in jobs])
    pending = [job for job in jobs if (job.item.task, job.item.item_id) not in done]
    records = execute(pending, config, opts.concurrency,
                      lambda: open_writer(opts, header, old, done), f"run {opts.label}",
                      before=_preflight(target, pending))
    every = kept_items(old, done) + records
    return summarize(opts, every, records, time.perf_counter() - started)


def run_session(opts: RunOptions) -> int:
    started = time.perf_counter()
    if opts.teacher_force:
        return run_forced(opts, started)
    old = existing_run(opts)
    specs = resolve_specs(opts)
    for spec in specs:
        if spec.adapter not in ADAPTERS:
            raise UsageError(f"task {spec.name!r}: no adapter {spec.adapter!r}")
    loaded, sources = {}, {}
    for spec in specs:
        loaded[spec.name], sources[spec.name] = load_task_data(spec)
    with open_target(opts, any(spec.params.get("logprobs") for spec in specs)) as target:
        built, sizing = build_items(specs, loaded, target)
        header = make_header(opts, target, specs, {**sources, **sizing})
        jobs = plan(built, target.model, opts.seed, opts.extra_body)
        if not jobs:
            raise UsageError("nothing to run: the tasks built no items")
        return send_all(opts, target, header, jobs, old, started)


def summarize(opts: RunOptions, items: Sequence[ItemRecord], new: Sequence[ItemRecord],
              wall_s: float) -> int:
    from kveval.show.summary import render_run_summary

    click.echo(render_run_summary(items, sent=len(new), wall_s=wall_s, path=str(opts.output)))
    errors = sum(1 for item in items if not item.ok)
    if errors:
        click.echo(f"{errors} item(s) failed; `kveval run ... --resume -o {opts.output}` "
                   "retries only those.", err=True)
        return EXIT_REGRESSION
    return EXIT_OK
