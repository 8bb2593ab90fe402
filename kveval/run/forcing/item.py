"""One teacher-forced item's exchange with the server, by the method run/forcing/method.py chose.

Every method ends in the same record: the baseline's answer as the output, with the
baseline's own `finish_reason` and usage (the item stands for that answer, not for the
scoring requests), and per answer position the baseline token's log-probability (null where
it fell outside a top-K that is all the server reports) and the top-K under this server.
`meta.teacher_forced` says how the answer's tokens were matched and how many requests it took.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kveval.masking import mask
from kveval.run.client import Connection, Reply, send
from kveval.run.forcing.token_ids import (
    EXACT,
    RETOKENIZED,
    UNCHECKED,
    ForcedFailure,
    Tokenizer,
    post_json,
    same_tokens,
)
from kveval.run.logprobs import from_legacy, outcomes
from kveval.safe import one_line

# one scored position: the answer token's text, its log-probability (None: outside the
# top-K), and the top-K {text: log-probability}, two ids of one text summed (logprobs.outcomes)
Scored = tuple[str, float | None, dict[str, float]]
# What reading a server's reply of the wrong shape raises (a rank of 'first' or Infinity,
# an id of 'abc', a piece of [104, 'x']): each an error item, never a traceback.
MALFORMED = (ForcedFailure, ValueError, TypeError, KeyError, IndexError, AttributeError,
             OverflowError, RecursionError)


class SlotPool:
    """llama-server's slots, one item at a time on each, so an item's positions reuse the
    prefix its slot holds. None slots: the server picks (it prefers the best cached match)."""

    def __init__(self, slots: int | None) -> None:
        self.slots = slots
        self._free: asyncio.Queue[int] | None = None

    @contextlib.asynccontextmanager
    async def take(self) -> AsyncIterator[int | None]:
        if self.slots is None:
            yield None
            return
        if self._free is None:
            self._free = asyncio.Queue()
            for slot in range(self.slots):
                self._free.put_nowait(slot)
        slot = await self._free.get()
        try:
            yield slot
        finally:
            self._free.put_nowait(slot)


@dataclass(frozen=True)
class Answer:
    """What the record keeps of the baseline's answer."""

    text: str
    tokens: list[str] | None  # the baseline's own tokens, where it recorded them
    finish_reason: str | None
    usage: dict[str, Any] | None
    texts: list[str] | None = None  # their texts as the baseline recorded them, if other


@dataclass(frozen=True)
class Forced:
    """One item: its prompt, the baseline's answer, and how to score it on this server."""

    tokenizer: Tokenizer
    base_url: str  # .../v1, credentials removed
    prompt: str | None
    messages: Sequence[Any] | None
    answer: Answer
    k: int
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    pool: SlotPool | None = None
    echo: tuple[dict[str, Any], tuple[int, int]] | None = None  # echo: the body and the span

    @property
    def method(self) -> str:
        return self.tokenizer.method.name

    async def exchange(self, conn: Connection) -> Reply:
        return await self._run(conn, last_only=False)

    async def probe(self, conn: Connection) -> Reply:
        """The pre-flight request: the item's longest position only."""
        return await self._run(conn, last_only=True)

    async def _run(self, conn: Connection, last_only: bool) -> Reply:
        """The item's reply; a request that failed, or a reply of any shape kveval cannot
        read, is an error reply naming the reason (the runner then checks what the reader
        would refuse: client.checked)."""
        start = time.perf_counter()
        if self.echo is not None:
            return self._as_answer(await send(conn, *self.echo), {"requests": 1})
        try:
            scored, meta = await self._scored(conn, last_only)
            logprobs = self._logprobs(scored, meta)
        except MALFORMED as exc:
            why = str(exc) if isinstance(exc, ForcedFailure) else f"malformed reply ({exc!r})"
            return Reply(text=None, latency_s=round(time.perf_counter() - start, 4),
                         error=mask(one_line(why)[:300], conn.config.secrets))
        reply = Reply(text=self.answer.text, latency_s=round(time.perf_counter() - start, 4),
                      logprobs=logprobs)
        return self._as_answer(reply, meta)

    def _logprobs(self, scored: list[Scored], meta: dict[str, Any]) -> dict[str, Any]:
        texts = self.answer.texts
        if meta["tokens"] == EXACT and texts is not None and len(texts) == len(scored):
            scored = [(text, own, top) for text, (_, own, top) in zip(texts, scored, strict=True)]
        return from_legacy({"tokens": [s[0] for s in scored],
                            "token_logprobs": [s[1] for s in scored],
                            "top_logprobs": [s[2] for s in scored]}, self.k, keep_unknown=True)

    def _as_answer(self, reply: Reply, meta: dict[str, Any]) -> Reply:
        if reply.error is not None:
            return reply
        forced = {"method": self.method, **meta}
        return Reply(text=self.answer.text, finish_reason=self.answer.finish_reason,
                     usage=self.answer.usage, latency_s=reply.latency_s, logprobs=reply.logprobs,
                     meta={"teacher_forced": forced})

    async def _scored(self, conn: Connection, last_only: bool
                      ) -> tuple[list[Scored], dict[str, Any]]:
        tok, recorded = self.tokenizer, self.answer.tokens
        prompt = await tok.prompt(conn, self.prompt, self.messages)
        if recorded is not None and not tok.llama:
            return await self._checked(conn, prompt, recorded, last_only)
        ids, pieces, match = await tok.answer(conn, self.answer.text, recorded)
        scored, requests = await self._score(conn, prompt, ids, pieces, last_only)
        return scored, {"tokens": match, "positions": len(scored), "requests": requests}

    async def _checked(self, conn: Connection, prompt: list[int], recorded: Sequence[str],
                       last_only: bool) -> tuple[list[Scored], dict[str, Any]]:
        """vLLM and SGLang answer ids without pieces: each way's ids (token_ids.py) in
        turn, until a scoring reply's tokens are the baseline's."""
        tok, requests, match = self.tokenizer, 0, RETOKENIZED
        scored: list[Scored] = []
        for way, ids in await tok.ways(conn, self.answer.text, recorded):
            scored, n = await self._score(conn, prompt, ids, None, last_only)
            requests += n
            if last_only:
                match = UNCHECKED
                break
            if same_tokens([s[0] for s in scored], recorded):
                match = EXACT
                break
            tok.refute(way)
        return scored, {"tokens": match, "positions": len(scored), "requests": requests}

    async def _score(self, conn: Connection, prompt: list[int], ids: list[int],
                     pieces: list[str] | None, last_only: bool) -> tuple[list[Scored], int]:
        if not ids:
            raise ForcedFailure("the answer has no tokens")
        if self.method == "forced_decoding":
            return await self._decode(conn, prompt, ids, pieces, last_only)
        if self.method == "sglang_generate":
            return sglang_scored(await post_json(conn, self.tokenizer.root + "/generate",
                                                 self._sglang_body(prompt, ids)), ids), 1
        return vllm_scored(await post_json(conn, self.base_url + "/completions",
                                           self._vllm_body(prompt, ids)), ids, self.k), 1

    async def _decode(self, conn: Connection, prompt: list[int], ids: list[int],
                      pieces: list[str] | None, last_only: bool) -> tuple[list[Scored], int]:
        """Forced decoding: one request per position, in order, on one slot."""
        positions = [len(ids) - 1] if last_only else range(len(ids))
        scored: list[Scored] = []
        async with (self.pool or SlotPool(None)).take() as slot:
            for i in positions:
                body = self._decode_body(prompt + ids[:i], slot)
                data = await post_json(conn, self.tokenizer.root + "/completion", body)
                scored.append(decoded(data, ids[i], pieces[i] if pieces else None))
        return scored, len(scored)

    def _decode_body(self, prompt: list[int], slot: int | None) -> dict[str, Any]:
        body = {**self.extra, "prompt": prompt, "n_predict": 1, "n_probs": self.k,
                "temperature": 0.0, "cache_prompt": True}
        if slot is not None:
            body["id_slot"] = slot
        if self.seed is not None:
            body["seed"] = self.seed
        return body

    def _sglang_body(self, prompt: list[int], ids: list[int]) -> dict[str, Any]:
        sampling = {"max_new_tokens": 1, "temperature": 0.0}
        return {**self.extra, "input_ids": prompt + ids, "sampling_params": sampling,
                "return_logprob": True, "logprob_start_len": max(len(prompt) - 1, 0),
                "top_logprobs_num": self.k, "return_text_in_logprobs": True}

    def _vllm_body(self, prompt: list[int], ids: list[int]) -> dict[str, Any]:
        body = {**self.extra, "model": self.tokenizer.model, "prompt": prompt + ids,
                "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": self.k}
        if self.seed is not None:
            body["seed"] = self.seed
        return body


# ---------------------------------------------------------------- the replies


def _float(value: Any) -> float:
    """A log-probability: a number, not NaN, not +infinity (-infinity is a probability of 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ForcedFailure(f"a log-probability that is not a number: {str(value)[:40]}")
    if math.isnan(value) or value == math.inf:
        raise ForcedFailure(f"a log-probability of {value}")
    return float(value)


def decoded(data: Any, want: int, piece: str | None) -> Scored:
    """llama-server's /completion reply with n_probs: the first generated position's top-K
    (log-probabilities of the raw logits, before any sampler), and the forced token's."""
    try:
        first = data["completion_probabilities"][0]
        tops = first["top_logprobs"]
        top = outcomes((str(t["token"]), _float(t["logprob"])) for t in tops)
        own = next((_float(t["logprob"]) for t in tops if t["id"] == want), None)
        text = piece if piece is not None else next(
            (str(t["token"]) for t in tops if t["id"] == want), "")
    except (KeyError, IndexError, TypeError) as exc:
        raise ForcedFailure(f"the server answered no top-K log-probabilities ({exc!r})") from None
    return text, own, top


def vllm_scored(data: Any, ids: list[int], k: int) -> list[Scored]:
    """vLLM's `prompt_logprobs`: per prompt position {token id: {logprob, rank,
    decoded_token}} holding the top-K and the prompt's own token."""
    try:
        rows = data["choices"][0]["prompt_logprobs"][-len(ids):]
        if len(rows) != len(ids):
            raise ForcedFailure("the server returned fewer prompt log-probabilities than tokens")
        return [_vllm_position(row, want, k) for row, want in zip(rows, ids, strict=True)]
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ForcedFailure(f"the server returned no prompt log-probabilities ({exc!r})") from None


def _vllm_position(row: dict[str, Any], want: int, k: int) -> Scored:
    """The prompt's own token is listed beside the top-K when it ranks below them."""
    own = row[str(want)]
    top = outcomes((str(e["decoded_token"]), _float(e["logprob"])) for e in row.values()
                   if int(e["rank"]) <= k)
    return str(own["decoded_token"]), _float(own["logprob"]), top


def sglang_scored(data: Any, ids: list[int]) -> list[Scored]:
    """SGLang's /generate meta_info: `input_token_logprobs` as [logprob, id, text] and
    `input_top_logprobs` as lists of them, from `logprob_start_len` on."""
    try:
        meta = data["meta_info"]
        own = meta["input_token_logprobs"][-len(ids):]
        tops = meta["input_top_logprobs"][-len(ids):]
        if len(own) != len(ids) or [int(o[1]) for o in own] != ids:
            raise ForcedFailure("the input log-probabilities are not the answer's tokens")
        return [(str(o[2]), _float(o[0]), outcomes((str(t[2]), _float(t[0]))
                                                   for t in top or ()))
                for o, top in zip(own, tops, strict=True)]
    except (KeyError, IndexError, TypeError) as exc:
        raise ForcedFailure(f"the server returned no input log-probabilities ({exc!r})") from None
