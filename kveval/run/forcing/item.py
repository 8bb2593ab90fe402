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
from typing import Any

from kveval.run.client import Connection, Reply, send
from kveval.run.forcing import decoding, document, prompt_logprobs, sglang
from kveval.run.forcing.document import Document
from kveval.run.forcing.forced import Forced
from kveval.run.forcing.scores import Scored, compact_scored
from kveval.run.forcing.token_ids import (
    EXACT,
    MALFORMED,
    RETOKENIZED,
    UNCHECKED,
    ForcedFailure,
    failed,
    same_tokens,
)


async def exchange(item: Forced | Document, conn: Connection) -> Reply:
    """The item's reply: every answer position scored (a document's: every position)."""
    if isinstance(item, Document):
        return await document.exchange(item, conn)
    return await _run(item, conn, last_only=False)


async def probe(item: Forced | Document, conn: Connection) -> Reply:
    """The pre-flight request: the item's longest position only."""
    if isinstance(item, Document):
        return await document.exchange(item, conn, last_only=True)
    return await _run(item, conn, last_only=True)


async def _run(item: Forced, conn: Connection, last_only: bool) -> Reply:
    """The item's reply; a request that failed, or a reply of any shape kveval cannot
    read, is an error reply naming the reason (the runner then checks what the reader
    would refuse: client.checked)."""
    start = time.perf_counter()
    if item.echo is not None:
        return _as_answer(item, await send(conn, *item.echo), {"requests": 1})
    try:
        scored, meta = await _scored(item, conn, last_only)
        logprobs = _logprobs(item, scored, meta)
    except MALFORMED as exc:
        return failed(exc, start, conn)
    reply = Reply(text=item.answer.text, latency_s=round(time.perf_counter() - start, 4),
                  logprobs=logprobs)
    return _as_answer(item, reply, meta)


def _logprobs(item: Forced, scored: list[Scored], meta: dict[str, Any]) -> dict[str, Any]:
    texts = item.answer.texts
    if meta["tokens"] == EXACT and texts is not None and len(texts) == len(scored):
        scored = [(text, own, top) for text, (_, own, top) in zip(texts, scored, strict=True)]
    return compact_scored(scored, item.k)


def _as_answer(item: Forced, reply: Reply, meta: dict[str, Any]) -> Reply:
    if reply.error is not None:
        return reply
    forced = {"method": item.method, **meta}
    return Reply(text=item.answer.text, finish_reason=item.answer.finish_reason,
                 usage=item.answer.usage, latency_s=reply.latency_s, logprobs=reply.logprobs,
                 meta={"teacher_forced": forced})


async def _scored(item: Forced, conn: Connection, last_only: bool
                  ) -> tuple[list[Scored], dict[str, Any]]:
    tok, recorded = item.tokenizer, item.answer.tokens
    prompt = await tok.prompt(conn, item.prompt, item.messages)
    if recorded is not None and not tok.llama:
        return await _checked(item, conn, prompt, recorded, last_only)
    ids, pieces, match = await tok.answer(conn, item.answer.text, recorded)
    scored, requests = await _score(item, conn, prompt, ids, pieces, last_only)
    return scored, {"tokens": match, "positions": len(scored), "requests": requests}


async def _checked(item: Forced, conn: Connection, prompt: list[int], recorded: Sequence[str],
                   last_only: bool) -> tuple[list[Scored], dict[str, Any]]:
    """vLLM and SGLang answer ids without pieces: each way's ids (token_ids.py) in
    turn, until a scoring reply's tokens are the baseline's."""
    tok, requests, match = item.tokenizer, 0, RETOKENIZED
    scored: list[Scored] = []
    for way, ids in await tok.ways(conn, item.answer.text, recorded):
        scored, n = await _score(item, conn, prompt, ids, None, last_only)
        requests += n
        if last_only:
            match = UNCHECKED
            break
        if same_tokens([s[0] for s in scored], recorded):
            match = EXACT
            break
        tok.refute(way)
    return scored, {"tokens": match, "positions": len(scored), "requests": requests}


async def _score(item: Forced, conn: Connection, prompt: list[int], ids: list[int],
                 pieces: list[str] | None, last_only: bool) -> tuple[list[Scored], int]:
    if not ids:
        raise ForcedFailure("the answer has no tokens")
    if item.method == "forced_decoding":
        return await decoding.score(item, conn, prompt, ids, pieces, last_only)
    if item.method == "sglang_generate":
        return await sglang.score(item, conn, prompt, ids)
    return await prompt_logprobs.score(item, conn, prompt, ids)

