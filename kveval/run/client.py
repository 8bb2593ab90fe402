"""Async requests to the endpoint over plain HTTP (run/plain.py), with kveval's retries and
timeouts.

This is the only module that sends completions. An openai client is made only for what asks
for one (a streamed load, `Connection.client`), never at start-up nor for a run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kveval.adapters.base import Item, TaskSpec
from kveval.errors import UsageError
from kveval.formats.checks import record_problem
from kveval.formats.limits import DEPTH_MESSAGE, too_deep, writable
from kveval.formats.numbers import usage_counts
from kveval.masking import forms, mask
from kveval.run.failures import backoff, classify
from kveval.run.logprobs import answer_logprobs, compact, request_keys
from kveval.run.plain import PlainClient
from kveval.safe import one_line, redact_url

if TYPE_CHECKING:
    from openai import AsyncOpenAI


@dataclass(frozen=True)
class ClientConfig:
    base_url: str
    api_key: str | None
    timeout: float = 600.0  # seconds for a whole attempt, a slowly trickled answer included
    retries: int = 3

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never be written or printed: the key and the URL's credentials, in
        every form a server can echo them (kveval/masking.py)."""
        return forms(self.api_key, self.base_url)


@dataclass(frozen=True)
class Reply:
    """One answer, or the error that stopped it after the retries."""

    text: str | None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    latency_s: float = 0.0
    error: str | None = None
    logprobs: dict[str, Any] | None = None  # compact, see run/logprobs.py
    reasoning: str | None = None  # a reasoning server's thinking, apart from the answer
    meta: dict[str, Any] | None = None  # added to the item's meta (teacher forcing: how)


class Connection:
    """The endpoint's plain HTTP session (every completion and forcing request) and, made
    when first asked for, an openai client with the same settings (a streamed load)."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.http = PlainClient(config.base_url, config.api_key)
        self._openai: AsyncOpenAI | None = None
        self.resent: list[str] = []  # why each attempt was sent again, for the run's summary

    @property
    def client(self) -> AsyncOpenAI:
        if self._openai is None:
            self._openai = _openai_client(self.config)
        return self._openai

    async def close(self) -> None:
        await self.http.close()
        if self._openai is not None:
            await self._openai.close()


# Request keys kveval sets itself and records; --extra-body may not change them.
OWNED_KEYS: dict[str, str] = {
    "model": "--model",
    "prompt": "the task's data",
    "messages": "the task's data",
    "temperature": "nothing: kveval always sends temperature 0",
    "max_tokens": "--max-tokens or a suite's max_tokens",
    "max_completion_tokens": "--max-tokens or a suite's max_tokens",
    "stop": "a suite's stop",
    "seed": "--seed",
    "n": "nothing: kveval asks for one answer per item",
    "best_of": "nothing: kveval asks for one answer per item",
    "stream": "nothing: kveval reads whole answers",
    "stream_options": "nothing: kveval reads whole answers",
    "logprobs": "--logprobs",
    "top_logprobs": "--logprobs",
    "echo": "--teacher-force",
    "prompt_logprobs": "--teacher-force",
}


def check_extra_body(extra: dict[str, Any], where: str) -> None:
    """Raise UsageError when `extra` sets a key that kveval owns, or holds what no JSON
    body can carry (NaN, an infinity such as 1e999) or nests past the cap."""
    for key in extra:
        if key in OWNED_KEYS:
            raise UsageError(f"{where} cannot set {key!r}: kveval sets it and records it; "
                             f"use {OWNED_KEYS[key]}")
    if too_deep(extra):
        raise UsageError(f"{where}: {DEPTH_MESSAGE}")
    bad = _not_finite(extra)
    if bad is not None:
        raise UsageError(f"{where}: {bad[0]} is {bad[1]}, which JSON cannot carry; a request "
                         "body holds finite numbers only")


def _not_finite(value: Any) -> tuple[str, float] | None:
    """The first NaN or infinity in a JSON value, as (its path, the number)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return path.lstrip(".") or "the value", node
        if isinstance(node, dict):
            stack += [(f"{path}.{k}", v) for k, v in node.items()]
        elif isinstance(node, list):
            stack += [(f"{path}[{i}]", v) for i, v in enumerate(node)]
    return None


def build_request(item: Item, spec: TaskSpec, model: str, seed: int | None,
                  extra_body: dict[str, Any] | None) -> dict[str, Any]:
    """The exact JSON body posted for an item: temperature is always sent, explicitly, and
    extra keys never replace a key kveval owns."""
    body: dict[str, Any] = {k: v for k, v in (extra_body or {}).items() if k not in OWNED_KEYS}
    body["model"] = model
    if item.messages is not None:
        body["messages"] = list(item.messages)
    else:
        body["prompt"] = item.prompt
    body["max_tokens"] = item.max_tokens if item.max_tokens is not None else spec.max_tokens
    body["temperature"] = spec.temperature
    if spec.stop:
        body["stop"] = list(spec.stop)
    if seed is not None:
        body["seed"] = seed
    if logprobs_k(spec):
        body.update(request_keys(item.messages is not None, logprobs_k(spec)))
    return body


def logprobs_k(spec: TaskSpec) -> int:
    """The top-K log-probabilities a task asks for (suite key or --logprobs); 0: none."""
    return int(spec.params.get("logprobs") or 0)


def asked_k(body: dict[str, Any]) -> int:
    """The K a request body asked for: chat `top_logprobs`, completions `logprobs`."""
    if "messages" in body:
        return int(body.get("top_logprobs") or 0) if body.get("logprobs") else 0
    value = body.get("logprobs")
    return 0 if isinstance(value, bool) or value is None else int(value)


def make_client(config: ClientConfig) -> Connection:
    return Connection(config)


def _openai_client(config: ClientConfig) -> AsyncOpenAI:
    """Up to 1,000 connections: no limit below any sane concurrency. Retries are kveval's
    own, and redirects are not followed: a request goes to the endpoint and nowhere else."""
    from openai import AsyncOpenAI, DefaultAioHttpClient

    from kveval.run.http import basic_auth

    auth = basic_auth(config.base_url)
    return AsyncOpenAI(
        base_url=redact_url(config.base_url),
        default_headers={"Authorization": auth} if auth else None,
        api_key=config.api_key or "not-needed",
        timeout=config.timeout,
        max_retries=0,
        http_client=DefaultAioHttpClient(follow_redirects=False),
    )


Span = tuple[int, int]  # teacher forcing: the answer's characters in the echoed text


def parse_reply(data: Any, latency_s: float, k: int = 0, span: Span | None = None) -> Reply:
    """A completions or chat completions response body -> Reply (an error when malformed)."""
    try:
        choice = data["choices"][0]
        message = choice.get("message")
        text, reasoning = _message(message) if message is not None else (choice["text"], None)
    except (KeyError, IndexError, TypeError, AttributeError):
        text = reasoning = 0  # neither a text nor null: malformed
    if not all(value is None or isinstance(value, str) for value in (text, reasoning)):
        return Reply(text=None, latency_s=latency_s,
                     error=f"malformed response: {one_line(str(data))[:200]}")
    usage = data.get("usage")
    usage = usage_counts(writable(usage)) if isinstance(usage, dict) else None
    reason = choice.get("finish_reason")
    logprobs: dict[str, Any] | None = None
    try:
        if span is not None:
            text, logprobs = text[span[0]:span[1]], _forced(choice, text, span, k)
        elif k:
            logprobs = compact(choice.get("logprobs"), k)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        return Reply(text=None, latency_s=latency_s,
                     error=f"malformed log-probabilities: {one_line(str(exc))[:200]}")
    return Reply(text=text, finish_reason=reason if isinstance(reason, str) else None,
                 usage=usage, latency_s=latency_s, logprobs=logprobs, reasoning=reasoning)


def checked(reply: Reply) -> Reply:
    """One check in: a reply, free-running or forced, by any method, checked as reading its
    record would check it (formats/checks.py); one that would fail is an error reply
    naming the reason, so nothing the reader refuses is written. runner.to_record applies
    it to every reply, and `kveval check` to every reply it reports on."""
    if reply.error is not None:
        return reply
    problem = record_problem(reply.meta, reply.logprobs)
    if problem is None:
        return reply
    what = "log-probabilities" if problem.startswith("logprobs") else "reply"
    return Reply(text=None, latency_s=reply.latency_s,
                 error=f"malformed {what}: {one_line(problem)[:200]}")


def _forced(choice: Any, text: str, span: Span, k: int) -> dict[str, Any]:
    """Teacher forcing: the answer's log-probabilities in an echo of prompt + answer."""
    if not isinstance(choice.get("logprobs"), dict) or len(text) < span[1]:
        raise ValueError("the server did not echo the prompt with its log-probabilities")
    return answer_logprobs(choice["logprobs"], text[span[0]:span[1]], text[span[1]:], k)


def _message(message: Any) -> tuple[Any, Any]:
    """A chat message's answer and thinking. A null content stays None (a reasoning server
    whose budget ran out while thinking), never "". vLLM's and SGLang's reasoning parsers
    send the thinking as `reasoning_content`; newer vLLM and Ollama as `reasoning`."""
    reasoning = message.get("reasoning_content")
    return message.get("content"), message.get("reasoning") if reasoning is None else reasoning


def _masked(reply: Reply, secrets: tuple[str, ...]) -> Reply:
    """A key that the server echoed is masked before it can be written or printed."""
    if not secrets:
        return reply
    return dataclasses.replace(
        reply, text=reply.text and mask(reply.text, secrets),
        error=reply.error and mask(reply.error, secrets),
        reasoning=reply.reasoning and mask(reply.reasoning, secrets))


async def _attempt(conn: Connection, body: dict[str, Any]) -> Any:
    """One POST, bounded as a whole by --timeout."""
    path = "/chat/completions" if "messages" in body else "/completions"
    return await asyncio.wait_for(conn.http.post(path, body), conn.config.timeout)


def resending(conn: Connection, why: str, attempt: int) -> None:
    """A request sent again is said as it happens (above the progress bar) and counted."""
    from tqdm import tqdm

    conn.resent.append(why)
    tqdm.write(f"note: a request failed ({why}); sending it again (attempt {attempt + 2} of "
               f"{conn.config.retries + 1})", file=sys.stderr)


async def send(conn: Connection, body: dict[str, Any], span: Span | None = None) -> Reply:
    """Send one request with retries; a failure after them becomes an error Reply.
    `span`: teacher forcing, the answer's characters in the echoed text."""
    start = time.perf_counter()
    for attempt in range(conn.config.retries + 1):
        try:
            data = await _attempt(conn, body)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a described error item
            failure = classify(exc, conn.config.timeout)
        else:
            reply = parse_reply(data, round(time.perf_counter() - start, 4), asked_k(body), span)
            return _masked(reply, conn.config.secrets)
        if not failure.retry or attempt == conn.config.retries:
            break
        resending(conn, failure.message, attempt)
        await asyncio.sleep(failure.wait if failure.wait is not None else backoff(attempt))
    reply = Reply(text=None, latency_s=round(time.perf_counter() - start, 4),
                  error=failure.message)
    return _masked(reply, conn.config.secrets)
