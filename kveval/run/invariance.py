"""Batch invariance, seen: whether one request gives the same log-probabilities answered alone
and answered inside a batch of others.

A server whose arithmetic does not change with what it batches (vLLM with
`VLLM_BATCH_INVARIANT=1`, SGLang's deterministic inference, llama-server with one slot, the
embedded engine, which answers one request at a time) repeats a forced run bit for bit: its
restarts' floor is 0, and one noise run shows it. Where the kernels change with the batch,
every restart moves each distribution a little, and the floor has a spread that takes three
noise runs to measure (judge/kl_power.py). The request is sent alone twice (the two must
agree, or nothing is repeatable), then again among BATCH - 1 others sent at the same moment.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kveval.run.client import Connection, Reply, send
from kveval.run.logprobs import request_keys

BATCH = 4
TOKENS = 8
ASKED = "Write one sentence about the sea."
OTHERS = ("Name three colours.", "Count from one to ten.", "What is a prime number?")


@dataclass(frozen=True)
class Invariance:
    identical: bool | None  # None: could not tell
    positions: int  # positions compared (while both had the same tokens)
    largest: float  # the largest change of a listed log-probability there, nats
    why: str


def _body(api: str, model: str, text: str, k: int) -> dict[str, Any]:
    chat = api == "chat"
    source = {"messages": [{"role": "user", "content": text}]} if chat else {"prompt": text}
    return {"model": model, **source, "max_tokens": TOKENS, "temperature": 0.0,
            **request_keys(chat, k)}


def difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[int, float, bool]:
    """(positions compared, largest change of a listed log-probability, whether every
    compared position lists the same tokens with the same values)."""
    same, largest, count = True, 0.0, 0
    for i, (token, other) in enumerate(zip(a["tokens"], b["tokens"], strict=False)):
        count += 1
        mine = dict(zip(a["top_tokens"][i], a["top_logprobs"][i], strict=False))
        theirs = dict(zip(b["top_tokens"][i], b["top_logprobs"][i], strict=False))
        same = same and mine == theirs
        largest = max([largest, *(abs(v - theirs[t]) for t, v in mine.items() if t in theirs)])
        if token != other:
            break
    return count, largest, same and list(a["tokens"]) == list(b["tokens"])


def _logprobs(reply: Reply) -> Mapping[str, Any] | None:
    return reply.logprobs if reply.error is None and reply.logprobs else None


async def batch_invariance(conn: Connection, api: str, model: str, k: int) -> Invariance:
    """The same request alone, alone again, and inside a batch of BATCH (see above)."""
    asked = _body(api, model, ASKED, k)
    alone, again = await send(conn, asked), await send(conn, asked)
    others = [send(conn, _body(api, model, text, k)) for text in OTHERS[: BATCH - 1]]
    batch = await asyncio.gather(*others[:1], send(conn, asked), *others[1:])
    first, repeat, inside = _logprobs(alone), _logprobs(again), _logprobs(batch[1])
    if first is None or repeat is None or inside is None:
        failed = next((r.error for r in (alone, again, batch[1]) if r.error), None)
        return Invariance(None, 0, 0.0, "a probe request returned no log-probabilities"
                          + (f" ({failed})" if failed else ""))
    count, largest, same = difference(first, repeat)
    if not same:
        return Invariance(False, count, largest, "the same request sent alone twice "
                                                 "differed")
    count, largest, same = difference(first, inside)
    if same:
        return Invariance(True, count, 0.0, f"identical alone and inside a batch of {BATCH}")
    return Invariance(False, count, largest, f"inside a batch of {BATCH} it differed by up "
                                             f"to {largest:.2g} nats")
