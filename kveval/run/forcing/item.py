"""One teacher-forced item's exchange with the server, by the method method.py chose (one
module per method: decoding.py, prompt_logprobs.py, sglang.py; echo through client.send).

Every method ends in the same record: the baseline's answer as the output, with the
baseline's own `finish_reason` and usage (the item stands for that answer, not for the
scoring requests), and per answer position the baseline token's log-probability (null where
it fell outside a top-K that is all the server reports) and the top-K under this server.
`meta.teacher_forced` says how the answer's tokens were matched and how many requests it took.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kveval.masking import mask
from kveval.run.client import Connection, Reply, send
from kveval.run.forcing import decoding, prompt_logprobs, sglang
from kveval.run.forcing.decoding import SlotPool
from kveval.run.forcing.scores import Scored
from kveval.run.forcing.token_ids import (
    EXACT,
    RETOKENIZED,
    UNCHECKED,
    ForcedFailure,
    Tokenizer,
    same_tokens,
)
from kveval.run.logprobs import from_legacy
from kveval.safe import one_line

# What reading a server's reply of the wrong shape raises (a rank of 'first' or Infinity,
# an id of 'abc', a piece of [104, 'x']): each an error item, never a traceback.
MALFORMED = (ForcedFailure, ValueError, TypeError, KeyError, IndexError, AttributeError,
             OverflowError, RecursionError)


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
            return await decoding.score(self, conn, prompt, ids, pieces, last_only)
        if self.method == "sglang_generate":
            return await sglang.score(self, conn, prompt, ids)
        return await prompt_logprobs.score(self, conn, prompt, ids)

