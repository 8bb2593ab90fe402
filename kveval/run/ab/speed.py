"""`kveval ab --speed`: a short fixed streaming load on a server while it is up.

The usual serving benchmark's shape (vLLM's `bench serve` with random prompts): prompts of
random words, each its own from the first word (no shared prefix to cache), sized to
`prompt_tokens` by the server's own count of one probe prompt; `output_tokens` out
(`ignore_eos`, so every answer is as long); `requests` of them at each number of concurrent
users. Streamed, so each request gives its time to first token (TTFT) and its time per
output token after the first (TPOT); the level's output tokens per second is its tokens over
its wall time. The suite's `[speed]` table sizes it (`prompt_tokens`, `output_tokens`,
`requests`, `concurrency`), bounded where the suite is read (run/schema.py: a prompt of at most
MAX_PROMPT_TOKENS, so a load is never a MemoryError): `kveval ab` checks it with the rest of
the suite before any server starts, and `load_size` reads it where a load is measured.
Prompts are made as their requests are sent (memory for the users in flight only), and each
level stops sending after LEVEL_S (the requests not sent count as failed). Every
count a reply's usage holds is bounded (formats/numbers.py): one that is not a count is
unknown, never a TypeError.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kveval.formats.figures import Load
from kveval.formats.numbers import count
from kveval.run.client import ClientConfig, Connection, make_client
from kveval.run.interrupt import run as run_async
from kveval.safe import one_line

LETTERS = "etaoinshrdlucmfwypvbgk"
PROBE_WORDS = 400
STALE_TRIES = 2
STALE_S = 1.0  # a failure this soon after sending is a closed connection, not the server
LEVEL_S = 3600.0  # one level's sending stops after this long
NOT_SENT = f"not sent: the level ran past its {LEVEL_S:g} s cap"


@dataclass(frozen=True)
class LoadSize:
    prompt_tokens: int = 4096
    output_tokens: int = 256
    requests: int = 96
    concurrency: tuple[int, ...] = (1, 32)

    @classmethod
    def of(cls, table: dict[str, Any]) -> LoadSize:
        base = cls()
        return cls(int(table.get("prompt_tokens", base.prompt_tokens)),
                   int(table.get("output_tokens", base.output_tokens)),
                   int(table.get("requests", base.requests)),
                   tuple(table.get("concurrency", base.concurrency)))


def load_size(suite: str | Path | None) -> LoadSize:
    """The suite's `[speed]` load, checked and bounded as the suite is read (one line,
    UsageError, for a bad one); the default load without a suite."""
    from kveval.run.tasks import read_suite

    return LoadSize.of(read_suite(str(suite)).speed) if suite else LoadSize()


@dataclass(frozen=True)
class Sample:
    ttft_s: float | None
    tpot_s: float | None
    output_tokens: int
    prompt_tokens: int | None
    error: str | None = None


def words(rng: random.Random, count: int) -> str:
    return " ".join("".join(rng.choice(LETTERS) for _ in range(rng.randint(2, 8)))
                    for _ in range(count))


def _body(model: str, prompt: str, out: int) -> dict[str, Any]:
    return {"model": model, "prompt": prompt, "max_tokens": out, "temperature": 0.0,
            "extra_body": {"ignore_eos": True}}


async def _words_per_token(conn: Connection, model: str) -> float:
    """How many of these words the server counts per token (one short request)."""
    reply = await conn.client.completions.create(
        **_body(model, words(random.Random(0), PROBE_WORDS), 1))
    tokens = count(getattr(reply.usage, "prompt_tokens", None), 1)
    return min(max(PROBE_WORDS / tokens, 0.1), 4.0) if tokens else 0.5  # words are 1-10 tokens


async def _stream(conn: Connection, body: dict[str, Any]) -> Sample:
    started = time.perf_counter()
    first = None
    chunks = 0
    usage = None
    stream = await conn.client.completions.create(
        **body, stream=True, stream_options={"include_usage": True})
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].text:
            first = first or time.perf_counter()
            chunks += 1
        usage = chunk.usage or usage
    ended = time.perf_counter()
    tokens = count(getattr(usage, "completion_tokens", None), 1) or chunks
    tpot = (ended - first) / (tokens - 1) if first is not None and tokens > 1 else None
    return Sample(None if first is None else first - started, tpot, tokens,
                  count(getattr(usage, "prompt_tokens", None), 1))


async def _attempt(conn: Connection, body: dict[str, Any], tries: int) -> Sample:
    """One request; a connection the server had closed (a kept-alive one, refused at once)
    is tried again, `tries` more times."""
    sent = time.perf_counter()
    try:
        return await _stream(conn, body)
    except Exception as exc:  # noqa: BLE001 - a failed request is counted, not fatal
        if tries > 0 and time.perf_counter() - sent < STALE_S:
            return await _attempt(conn, body, tries - 1)
        return Sample(None, None, 0, None, one_line(str(exc))[:300] or type(exc).__name__)


async def _one(conn: Connection, body: Any, gate: asyncio.Semaphore, until: float) -> Sample:
    """One request, its prompt made once its user is free (`body()`); none after `until`."""
    async with gate:
        if time.monotonic() > until:
            return Sample(None, None, 0, None, NOT_SENT)
        return await _attempt(conn, body(), STALE_TRIES)


def _pct(values: Sequence[float], q: float) -> float | None:
    import numpy as np

    return float(np.percentile(values, q)) if values else None


def summarize(users: int, samples: Sequence[Sample], wall_s: float) -> Load:
    ok = [s for s in samples if s.error is None]
    ttft = [s.ttft_s for s in ok if s.ttft_s is not None]
    tpot = [s.tpot_s for s in ok if s.tpot_s is not None]
    out = sum(s.output_tokens for s in ok)
    prompts = [s.prompt_tokens for s in ok if s.prompt_tokens]
    errors = [s.error for s in samples if s.error is not None]
    return Load(users, len(samples), len(errors), wall_s,
                sum(prompts) / len(prompts) if prompts else None,
                out / len(ok) if ok else None, out / wall_s if out and wall_s > 0 else None,
                _pct(ttft, 50), _pct(ttft, 95), _pct(tpot, 50), _pct(tpot, 95),
                errors[0] if errors else None)


async def _level(conn: Connection, model: str, size: LoadSize, users: int,
                 per_token: float) -> Load:
    many = max(1, round(size.prompt_tokens * per_token))

    def body(i: int) -> Any:
        return lambda: _body(model, words(random.Random(users * 1_000_003 + i), many),
                             size.output_tokens)

    gate = asyncio.Semaphore(users)
    started, until = time.perf_counter(), time.monotonic() + LEVEL_S
    samples = await asyncio.gather(*(_one(conn, body(i), gate, until)
                                     for i in range(size.requests)))
    return summarize(users, samples, time.perf_counter() - started)


async def _load(config: ClientConfig, model: str, size: LoadSize) -> tuple[Load, ...]:
    conn = make_client(config)
    try:
        per_token = await _words_per_token(conn, model)
        return tuple([await _level(conn, model, size, users, per_token)
                      for users in size.concurrency])
    finally:
        await conn.client.close()


def measure(base_url: str, model: str, api_key: str | None, size: LoadSize,
            timeout: float = 600.0) -> tuple[Load, ...]:
    """The load at each concurrency, in order; a failed request is counted in `errors`."""
    return run_async(_load(ClientConfig(base_url, api_key, timeout, 0), model, size))
