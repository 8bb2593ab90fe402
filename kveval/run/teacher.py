"""Teacher forcing: score a baseline run's own answers under another server.

For each answered item of the baseline, the baseline's prompt with its answer appended is
sent to the completions API with `echo: true`, `logprobs: K` and `max_tokens: 1` (vLLM
rejects 0), and the log-probabilities of the answer's tokens are kept: every position of the
answer is then conditioned on the same text in both runs, so two teacher-forced runs compare
over the whole answer (llama.cpp's `perplexity --kl-divergence`, over an API).

The answer's tokens are those whose `text_offset` falls inside the answer's characters,
counted back from the end of the echoed text (llama-cpp-python's offsets skip the special
tokens of a chat template). A chat item's prompt is first rendered with the model's chat
template: on the embedded engine with the GGUF's own template, as llama-cpp-python's server
applies it; on vLLM by the server itself (POST /tokenize with the messages, then /detokenize
of those tokens: the text its chat API would have sent), posted with `add_special_tokens:
false` as vLLM's chat API does, since the template holds them. Other servers are refused
for chat items. llama.cpp's llama-server does not return echoed log-probabilities at all.

Alignment is checked, not assumed: a token is often the top-1 of its own position and rarely
the top-1 of the next one. llama-cpp-python shifts echoed positions by one when the prompt
does not start with the model's BOS token (each position then holds the next position's
distribution); kveval detects which holds and shifts back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from kveval.adapters.base import Item, Message, TaskSpec
from kveval.errors import UsageError
from kveval.formats.records import ItemRecord, Run
from kveval.run.runner import Job

DEFAULT_K = 5
Render = Callable[[Sequence[Message]], str]  # chat messages -> the templated prompt text
_SPEC_FIELDS = {f.name for f in fields(TaskSpec)}
CHAT_REFUSED = ("teacher forcing sends a chat item's prompt rendered with the model's chat "
                "template, which kveval can do for the embedded engine and for vLLM (/tokenize "
                "and /detokenize){why}; run the baseline with --api completions")


@dataclass(frozen=True)
class ChatTemplate:
    """How chat items' prompts are rendered for teacher forcing, and what their requests add."""

    render: Render
    body: dict[str, Any] = field(default_factory=dict)  # e.g. vLLM: add_special_tokens false


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


def prompt_text(item: Item, template: ChatTemplate) -> tuple[str, dict[str, Any]]:
    """The prompt text to append the answer to, and what the request adds for it."""
    if item.prompt is not None:
        return item.prompt, {}
    return template.render(item.messages or ()), template.body


def forced_body(prompt: str, answer: str, model: str, k: int, seed: int | None,
                extra_body: dict[str, Any] | None = None) -> dict[str, Any]:
    """The exact JSON posted: --extra-body's keys, then the ones teacher forcing owns."""
    from kveval.run.client import OWNED_KEYS

    body = {key: v for key, v in (extra_body or {}).items() if key not in OWNED_KEYS}
    body.update({"model": model, "prompt": prompt + answer, "max_tokens": 1,
                 "temperature": 0.0, "echo": True, "logprobs": k})
    if seed is not None:
        body["seed"] = seed
    return body


def forced_records(baseline: Run, limit: int | None) -> list[ItemRecord]:
    """The baseline's answered items, in file order; the first `limit` of each task."""
    kept: list[ItemRecord] = []
    counts: dict[str, int] = {}
    for record in baseline.items:
        if not record.ok or not record.output:  # an empty answer has no tokens to score
            continue
        counts[record.task] = counts.get(record.task, 0) + 1
        if limit is None or counts[record.task] <= limit:
            kept.append(record)
    if not kept:
        raise UsageError(f"{baseline.path}: no answered items to teacher-force")
    return kept


def load_baseline(path: str) -> Run:
    from kveval.formats.records import read_run

    if not Path(path).is_file():
        raise UsageError(f"--teacher-force {path}: no such run file")
    return read_run(path)


def plan_forced(baseline: Run, model: str, k: int, seed: int | None, limit: int | None,
                template: ChatTemplate, extra_body: dict[str, Any] | None = None
                ) -> tuple[list[TaskSpec], list[Job]]:
    """The teacher-forced jobs: one per answered baseline item, with the answer's span."""
    label = baseline.header.label or baseline.path.stem
    specs = {t["name"]: spec_from_header(t, k, label) for t in baseline.header.tasks}
    jobs = []
    for record in forced_records(baseline, limit):
        if record.task not in specs:
            raise UsageError(f"{baseline.path}: item {record.item_id} has a task the header "
                             "does not list")
        item = forced_item(record)
        (prompt, added), answer = prompt_text(item, template), record.output or ""
        body = forced_body(prompt, answer, model, k, seed, extra_body) | added
        jobs.append(Job(specs[record.task], item, body, (len(prompt), len(prompt) + len(answer))))
    return list(specs.values()), jobs


def embedded_template(model_path: str | None) -> ChatTemplate:
    """The embedded engine's chat template, applied as llama-cpp-python's server applies it
    (loaded on the first chat item: a completions-only baseline never needs it)."""
    loaded: list[Any] = []

    def render(messages: Sequence[Message]) -> str:
        if not loaded:
            loaded.append(_embedded_formatter(model_path))
        return str(loaded[0](messages=[dict(m) for m in messages]).prompt)

    return ChatTemplate(render)


def _answer(data: Any, key: str) -> Any:
    """`key` of a tokenizer endpoint's answer: the token list or the prompt text."""
    from kveval.run.tokens import Unavailable

    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, list if key == "tokens" else str):
        raise Unavailable(f"the answer holds no {key}")
    return value


def vllm_template(base_url: str, model: str, api_key: str | None,
                  timeout: float) -> ChatTemplate:
    """vLLM's chat template, applied by the server: the messages' tokens from /tokenize
    (with the generation prompt), and their text from /detokenize."""
    from kveval.run.tokens import Server, Unavailable

    server = Server(base_url, model, api_key, timeout)

    def render(messages: Sequence[Message]) -> str:
        try:
            ids = _answer(server.post("/tokenize", {"model": model, "messages": list(messages),
                                                    "add_generation_prompt": True}), "tokens")
            prompt = _answer(server.post("/detokenize", {"model": model, "tokens": ids}),
                             "prompt")
        except Unavailable as exc:
            raise UsageError(CHAT_REFUSED.format(why=f" ({exc})")) from None
        return str(prompt)

    return ChatTemplate(render, {"add_special_tokens": False})


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
