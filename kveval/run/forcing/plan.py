"""Teacher forcing: score a baseline run's own answers under another server.

For each answered item of the baseline, the baseline's prompt and answer are scored under
this server by the method run/forcing/method.py chose for it (forced decoding on llama-server,
/generate on SGLang, prompt_logprobs on vLLM, echo elsewhere; run/forcing/item.py sends them):
every position of the answer is then conditioned on the same text in both runs, so two
teacher-forced runs compare over the whole answer (llama.cpp's `perplexity --kl-divergence`,
over an API).

The echo method sends the baseline's prompt with its answer appended to the completions API
with `echo: true`, `logprobs: K` and `max_tokens: 1` (vLLM rejects 0), and keeps the
answer's tokens: those whose `text_offset` falls inside the answer's characters, counted back
from the end of the echoed text (llama-cpp-python's offsets skip the special tokens of a chat
template). A chat item's prompt is rendered there with the GGUF's own template, as
llama-cpp-python's server applies it. Alignment is checked, not assumed (run/logprobs.py).

Every answered baseline item is forced. The others (a failed request, an empty answer, a
chat item on a server with no chat-template endpoint) are listed per task and reason in the
header's `teacher_force.unforced` (formats/unforced.py) and counted on stderr.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from kveval.adapters.base import Item, Message, TaskSpec
from kveval.errors import UsageError
from kveval.formats.records import ItemRecord, Run
from kveval.formats.unforced import UNSERVABLE, WHY, Listed, add, unforceable
from kveval.run.forcing.method import Method, chat_refusal
from kveval.run.runner import Job

DEFAULT_K = 5
Render = Callable[[Sequence[Message]], str]  # chat messages -> the templated prompt text
_SPEC_FIELDS = {f.name for f in fields(TaskSpec)}


@dataclass(frozen=True)
class Context:
    """What every forced item of a run shares."""

    method: Method
    base_url: str  # the endpoint's .../v1
    model: str
    k: int
    seed: int | None = None
    limit: int | None = None
    extra_body: dict[str, Any] | None = None
    render: Render | None = None  # echo: the chat template (the embedded engine's)
    slots: Any = None  # forced decoding: the run's SlotPool


@dataclass(frozen=True)
class Plan:
    specs: list[TaskSpec]
    jobs: list[Job]
    unforced: Listed  # task -> reason -> the baseline's item ids not forced


def spec_from_header(task: Mapping[str, Any], k: int, baseline: str) -> TaskSpec:
    """A baseline task's spec as its run header recorded it, marked as teacher-forced."""
    values = {key: value for key, value in task.items() if key in _SPEC_FIELDS}
    values["stop"] = tuple(values.get("stop") or ())
    values["params"] = {**(values.get("params") or {}), "logprobs": k, "teacher_force": baseline}
    return TaskSpec(**values)


def forced_item(record: ItemRecord) -> Item:
    """The baseline's item, rebuilt from its record: same prompt, so the same prompt_sha256."""
    request = record.request
    messages = request.get("messages")
    return Item(task=record.task, item_id=record.item_id, prompt=request.get("prompt"),
                messages=tuple(messages) if messages is not None else None,
                reference=record.reference,
                meta={k: v for k, v in record.meta.items() if k != "teacher_forced"})


def forced_body(prompt: str, answer: str, model: str, k: int, seed: int | None,
                extra_body: dict[str, Any] | None = None) -> dict[str, Any]:
    """The exact JSON posted by the echo method: --extra-body's keys, then the ones teacher
    forcing owns."""
    from kveval.run.client import OWNED_KEYS

    body = {key: v for key, v in (extra_body or {}).items() if key not in OWNED_KEYS}
    body.update({"model": model, "prompt": prompt + answer, "max_tokens": 1,
                 "temperature": 0.0, "echo": True, "logprobs": k})
    if seed is not None:
        body["seed"] = seed
    return body


def forced_records(baseline: Run, limit: int | None) -> tuple[list[ItemRecord], Listed]:
    """The baseline's answered items, in file order, the first `limit` of each task; and
    the items before that cut that have no answer to score, by task and reason. A context
    task's documents are forced in every run already (run/forcing/document.py): left out."""
    documents = {t.get("name") for t in baseline.header.tasks if t.get("adapter") == "context"}
    kept: list[ItemRecord] = []
    left: Listed = {}
    counts: dict[str, int] = {}
    for record in baseline.items:
        if record.task in documents:
            continue
        if limit is not None and counts.get(record.task, 0) >= limit:
            continue
        reason = unforceable(record)
        if reason is not None:
            add(left, record.task, reason, record.item_id)
            continue
        counts[record.task] = counts.get(record.task, 0) + 1
        kept.append(record)
    if not kept:
        why = " (a context task's documents are forced in every run already)" if documents \
            else ""
        raise UsageError(f"{baseline.path}: no answered items to teacher-force{why}")
    return kept, left


def load_baseline(path: str) -> Run:
    from kveval.formats.reader import read_run

    if not Path(path).is_file():
        raise UsageError(f"--teacher-force {path}: no such run file")
    return read_run(path)


def servable(item: Item, ctx: Context) -> bool:
    if item.prompt is not None:
        return True
    return ctx.render is not None if ctx.method.name == "echo" else ctx.method.template is not None


def plan_forced(baseline: Run, ctx: Context) -> Plan:
    """The teacher-forced jobs: one per answered baseline item the method can serve."""
    label = baseline.header.label or baseline.path.stem
    specs = {t["name"]: spec_from_header(t, ctx.k, label) for t in baseline.header.tasks}
    jobs: list[Job] = []
    tokenizer = _tokenizer(ctx)
    records, left = forced_records(baseline, ctx.limit)
    for record in records:
        if record.task not in specs:
            raise UsageError(f"{baseline.path}: item {record.item_id} has a task the header "
                             "does not list")
        item = forced_item(record)
        if not servable(item, ctx):
            add(left, record.task, UNSERVABLE, record.item_id)
            continue
        jobs.append(_job(specs[record.task], item, record, ctx, tokenizer))
    if not jobs:
        raise UsageError(f"no item can be teacher-forced here: {chat_refusal(ctx.method)}; "
                         "run the baseline with --api completions")
    return Plan(list(specs.values()), jobs, left)


def _tokenizer(ctx: Context) -> Any:
    """One for the run: it remembers the ids of single tokens."""
    from kveval.run.endpoint import server_root
    from kveval.run.forcing.token_ids import Tokenizer
    from kveval.safe import redact_url

    return Tokenizer(ctx.method, server_root(redact_url(ctx.base_url).rstrip("/")), ctx.model)


def _job(spec: TaskSpec, item: Item, record: ItemRecord, ctx: Context, tokenizer: Any) -> Job:
    from kveval.run.client import OWNED_KEYS
    from kveval.run.forcing.forced import Answer, Forced
    from kveval.run.forcing.token_ids import recorded_tokens
    from kveval.safe import redact_url

    answer_text = record.output or ""
    tokens = recorded_tokens(record.logprobs, answer_text)
    texts = (record.logprobs or {}).get("tokens")
    answer = Answer(answer_text, tokens, record.finish_reason, record.usage,
                    texts[: len(tokens)] if tokens and isinstance(texts, list) else None)
    base = redact_url(ctx.base_url).rstrip("/")
    extra = {k: v for k, v in (ctx.extra_body or {}).items() if k not in OWNED_KEYS}
    if ctx.method.name == "echo":
        prompt = item.prompt if item.prompt is not None else (ctx.render or str)(
            item.messages or ())
        body = forced_body(prompt, answer_text, ctx.model, ctx.k, ctx.seed, ctx.extra_body)
        span = (len(prompt), len(prompt) + len(answer_text))
        forced = Forced(tokenizer, base, item.prompt, item.messages, answer, ctx.k,
                        echo=(body, span))
        return Job(spec, item, body, span, forced)
    forced = Forced(tokenizer, base, item.prompt, item.messages, answer, ctx.k, ctx.seed, extra,
                    ctx.slots)
    return Job(spec, item, described(item, answer_text, ctx), None, forced)


def described(item: Item, answer: str, ctx: Context) -> dict[str, Any]:
    """What a record keeps of the requests of a token-id method: enough to rebuild them
    (the ids come from the server's /tokenize)."""
    source = {"prompt": item.prompt} if item.prompt is not None else {
        "messages": list(item.messages or ())}
    return {"model": ctx.model, **source, "answer": answer, "temperature": 0.0,
            "teacher_force": ctx.method.name, "logprobs": ctx.k,
            **({"seed": ctx.seed} if ctx.seed is not None else {})}


def embedded_template(model_path: str | None) -> Render:
    """The embedded engine's chat template, applied as llama-cpp-python's server applies it
    (loaded on the first chat item: a completions-only baseline never needs it)."""
    loaded: list[Any] = []

    def render(messages: Sequence[Message]) -> str:
        if not loaded:
            loaded.append(_embedded_formatter(model_path))
        return str(loaded[0](messages=[dict(m) for m in messages]).prompt)

    return render


def _embedded_formatter(model_path: str | None) -> Any:
    import llama_cpp
    from llama_cpp import llama_chat_format

    from kveval.run.engine_setup import bundled_model_path, check_model

    path = check_model(model_path) if model_path else bundled_model_path()
    llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    fmt = llm.chat_format or ""
    if fmt.startswith("chat_template."):
        name = fmt.split(".", 1)[1]
        key = "tokenizer.chat_template" + ("" if name == "default" else f".{name}")
        eos, bos = llm.token_eos(), llm.token_bos()
        return llama_chat_format.Jinja2ChatFormatter(
            llm.metadata[key], llm._model.token_get_text(eos) if eos != -1 else "",
            llm._model.token_get_text(bos) if bos != -1 else "")
    formatter = getattr(llama_chat_format, f"format_{fmt.replace('-', '_')}", None)
    if formatter is None:
        raise UsageError(f"cannot render the embedded model's chat format {fmt!r}")
    return formatter


def plan_run(baseline: Run, base_url: str, model: str, fingerprint: dict[str, Any],
             opts: Any, api_key: str | None, embedded: bool) -> tuple[Plan, Method]:
    """Choose the server's method, plan every item, and name on stderr the items the
    method cannot serve."""
    import click

    from kveval.run.forcing.method import Probe, select
    from kveval.run.forcing.slots import SlotPool
    from kveval.safe import one_line

    method = select(Probe(base_url, model, api_key), fingerprint, embedded)
    render = embedded_template(opts.engine.get("model_path")) if embedded else None
    slots = SlotPool(method.slots) if method.name == "forced_decoding" else None
    ctx = Context(method, base_url, model, opts.logprobs or DEFAULT_K, opts.seed, opts.limit,
                  opts.extra_body, render, slots)
    plan = plan_forced(baseline, ctx)
    for task, reasons in plan.unforced.items():
        for reason, ids in reasons.items():
            why = chat_refusal(method) if reason == UNSERVABLE else WHY[reason]
            click.echo(f"note: {one_line(task)}: {len(ids)} item(s) not teacher-forced: {why}",
                       err=True)
    return plan, method


def with_documents(jobs: Sequence[Job], base_url: str, model: str, fingerprint: dict[str, Any],
                   opts: Any, api_key: str | None, embedded: bool) -> list[Job]:
    """The jobs, each of the context task forced as a document (run/forcing/document.py) by
    the best method the server offers, chosen once."""
    from kveval.run.forcing.method import Probe, select
    from kveval.run.forcing.slots import SlotPool

    if not any(job.spec.adapter == "context" for job in jobs):
        return list(jobs)
    method = select(Probe(base_url, model, api_key), fingerprint, embedded)
    slots = SlotPool(method.slots) if method.name == "forced_decoding" else None
    ctx = Context(method, base_url, model, DEFAULT_K, opts.seed, None, opts.extra_body,
                  None, slots)
    tokenizer = _tokenizer(ctx)
    return [_document_job(job, ctx, tokenizer) if job.spec.adapter == "context" else job
            for job in jobs]


def _document_job(job: Job, ctx: Context, tokenizer: Any) -> Job:
    from dataclasses import replace

    from kveval.run.client import OWNED_KEYS
    from kveval.run.forcing.document import Document
    from kveval.run.forcing.forced import Answer, Forced
    from kveval.safe import redact_url

    text, k = job.item.prompt or "", int(job.spec.params.get("logprobs") or ctx.k)
    extra = {key: v for key, v in (ctx.extra_body or {}).items() if key not in OWNED_KEYS}
    echo = None
    if ctx.method.name == "echo":
        echo = (forced_body("", text, ctx.model, k, ctx.seed, ctx.extra_body), (0, len(text)))
    forced = Forced(tokenizer, redact_url(ctx.base_url).rstrip("/"), None, None,
                    Answer(text, None, "length", None), k, ctx.seed, extra, ctx.slots, echo)
    tokens = int(job.item.meta.get("tokens") or 0)
    body = {"model": ctx.model, "document": job.item.meta.get("document"),
            "characters": len(text), "tokens": tokens, "temperature": 0.0,
            "teacher_force": ctx.method.name, "logprobs": k,
            **({"seed": ctx.seed} if ctx.seed is not None else {})}
    return replace(job, body=body, span=None, forced=Document(forced, text, tokens))
