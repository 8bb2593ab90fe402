"""Async requests to the endpoint through the openai client, with its retries and timeouts.

This is the only module that sends completions. The openai package is imported when a
client is made, never at start-up, so `kveval --help` stays fast.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kveval.adapters.base import Item, TaskSpec
from kveval.run.logprobs import answer_logprobs, compact, request_keys

if TYPE_CHECKING:
    from openai import AsyncOpenAI


@dataclass(frozen=True)
class ClientConfig:
    base_url: str
    api_key: str | None
    timeout: float = 600.0
    retries: int = 3


@dataclass(frozen=True)
class Reply:
    """One answer, or the error that stopped it after the client's retries."""

    text: str | None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    latency_s: float = 0.0
    error: str | None = None
    logprobs: dict[str, Any] | None = None  # compact, see run/logprobs.py


def build_request(item: Item, spec: TaskSpec, model: str, seed: int | None,
                  extra_body: dict[str, Any] | None) -> dict[str, Any]:
    """The request body for an item: temperature is always sent, explicitly."""
    body: dict[str, Any] = {"model": model}
    if item.messages is not None:
        body["messages"] = list(item.messages)
    else:
        body["prompt"] = item.prompt
    body["max_tokens"] = spec.max_tokens
    body["temperature"] = spec.temperature
    if spec.stop:
        body["stop"] = list(spec.stop)
    if seed is not None:
        body["seed"] = seed
    if logprobs_k(spec):
        body.update(request_keys(item.messages is not None, logprobs_k(spec)))
    if extra_body:
        body["extra_body"] = extra_body
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


def make_client(config: ClientConfig) -> AsyncOpenAI:
    """The openai client keeps up to 1,000 connections: no limit below any sane concurrency."""
    from openai import AsyncOpenAI, DefaultAioHttpClient

    from kveval.run.endpoint import basic_auth, redact

    auth = basic_auth(config.base_url)
    return AsyncOpenAI(
        base_url=redact(config.base_url),
        default_headers={"Authorization": auth} if auth else None,
        api_key=config.api_key or "not-needed",
        timeout=config.timeout,
        max_retries=config.retries,
        http_client=DefaultAioHttpClient(),
    )


def _describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    message = " ".join(str(message).split())[:500]
    return f"HTTP {status}: {message}" if status else f"{type(exc).__name__}: {message}"


def request_payload(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON sent: the recorded body with its extra_body merged in, as the openai client does."""
    payload = {k: v for k, v in body.items() if k != "extra_body"}
    payload.update(body.get("extra_body") or {})
    return payload


Span = tuple[int, int]  # teacher forcing: the answer's characters in the echoed text


def parse_reply(data: Any, latency_s: float, k: int = 0, span: Span | None = None) -> Reply:
    """A completions or chat completions response body -> Reply (an error when malformed)."""
    try:
        choice = data["choices"][0]
        message = choice.get("message")
        text = (message.get("content") or "") if message is not None else choice["text"]
    except (KeyError, IndexError, TypeError, AttributeError):
        return Reply(text=None, latency_s=latency_s,
                     error=f"malformed response: {str(data)[:200]}")
    usage = data.get("usage")
    logprobs: dict[str, Any] | None = None
    try:
        if span is not None:
            text, logprobs = text[span[0]:span[1]], _forced(choice, text, span, k)
        elif k:
            logprobs = compact(choice.get("logprobs"), k)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        return Reply(text=None, latency_s=latency_s,
                     error=f"malformed log-probabilities: {str(exc)[:200]}")
    return Reply(text=text, finish_reason=choice.get("finish_reason"),
                 usage=usage if isinstance(usage, dict) else None, latency_s=latency_s,
                 logprobs=logprobs)


def _forced(choice: Any, text: str, span: Span, k: int) -> dict[str, Any]:
    """Teacher forcing: the answer's log-probabilities in an echo of prompt + answer."""
    if not isinstance(choice.get("logprobs"), dict) or len(text) < span[1]:
        raise ValueError("the server did not echo the prompt with its log-probabilities")
    return answer_logprobs(choice["logprobs"], text[span[0]:span[1]], text[span[1]:], k)


async def send(client: AsyncOpenAI, body: dict[str, Any], span: Span | None = None) -> Reply:
    """Send one request; a failure after the client's retries becomes an error Reply.

    The openai client's generic `post` keeps its retries and timeouts but skips building
    typed response models, which costs more than the request itself at high rates.
    """
    import openai

    path = "/chat/completions" if "messages" in body else "/completions"
    start = time.perf_counter()
    try:
        data = await client.post(path, body=request_payload(body), cast_to=object)
    except openai.OpenAIError as exc:
        return Reply(text=None, latency_s=round(time.perf_counter() - start, 4),
                     error=_describe(exc))
    return parse_reply(data, round(time.perf_counter() - start, 4), asked_k(body), span)
