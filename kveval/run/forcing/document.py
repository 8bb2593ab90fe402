"""A document forced from its first token (the context task), by the method the server offers.

The document is tokenized once by the server's own tokenizer and cut to the item's tokens;
its first token is the prompt and every later one is scored: vLLM's `prompt_logprobs` and
SGLang's /generate in one request, llama-server's forced decoding one request per position on
one slot (each reads the prefix the slot holds and evaluates one token), the embedded engine
by one echo. The record holds the forced text as its output, per position the document's
token, its log-probability and the top-K, and in `meta.teacher_forced` the method, the
positions, the requests and a hash of the token ids, so that every run is seen to force the
same tokens (judge/positions.py compares the token texts position by position too).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

from kveval.run.client import Connection, Reply
from kveval.run.forcing import decoding, prompt_logprobs, sglang
from kveval.run.forcing.forced import Forced
from kveval.run.forcing.scores import Scored, compact_scored, logprob
from kveval.run.forcing.token_ids import MALFORMED, ForcedFailure, failed, post_json
from kveval.run.logprobs import shift_of


@dataclass(frozen=True)
class Document:
    """One document to force: what every method needs (`forced`) and its cut in tokens."""

    forced: Forced  # the tokenizer, endpoint, K, seed, extra keys and slot pool of the run
    text: str
    tokens: int  # the document's first `tokens` tokens are forced (all where it is shorter)

    @property
    def method(self) -> str:
        return self.forced.method

    @property
    def tokenizer(self) -> Any:
        return self.forced.tokenizer


async def exchange(doc: Document, conn: Connection, last_only: bool = False) -> Reply:
    """The document's reply: every position after the first scored, or an error reply;
    `last_only`: the pre-flight's request: on llama-server the longest position alone (a
    context too short for it is one line before anything is sent), elsewhere the first two
    tokens (a one-request method would prefill the document twice; its context is known
    from the server's max_model_len, and the adapter cut the document to fit)."""
    start = time.perf_counter()
    try:
        if doc.forced.echo is not None:
            scored, meta = await _echoed(doc, conn)
        else:
            scored, meta = await _scored(doc, conn, last_only)
    except MALFORMED as exc:
        return failed(exc, start, conn)
    logprobs = compact_scored(scored, doc.forced.k)
    return Reply(text="".join(s[0] for s in scored), finish_reason=None,
                 latency_s=round(time.perf_counter() - start, 4), logprobs=logprobs,
                 meta={"teacher_forced": {"method": doc.forced.method, **meta}})


async def _scored(doc: Document, conn: Connection, last_only: bool
                  ) -> tuple[list[Scored], dict[str, Any]]:
    item = doc.forced
    ids, pieces = await item.tokenizer.text(conn, doc.text, special=True)
    ids = ids[: 2 if last_only and item.method != "forced_decoding" else doc.tokens]
    if len(ids) < 2:
        raise ForcedFailure("the document has fewer than two tokens: nothing to score")
    prompt, scored_ids = ids[:1], ids[1:]
    if item.method == "forced_decoding":
        scored, requests = await decoding.score(item, conn, prompt, scored_ids,
                                                pieces[1: len(ids)] if pieces else None,
                                                last_only)
    elif item.method == "sglang_generate":
        scored, requests = await sglang.score(item, conn, prompt, scored_ids)
    else:
        scored, requests = await prompt_logprobs.score(item, conn, prompt, scored_ids)
    return scored, {"positions": len(scored), "requests": requests, "ids": ids_hash(ids)}


def ids_hash(ids: list[int]) -> str:
    """The forced token ids' fingerprint: equal across runs exactly where the ids are."""
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()[:16]


async def _echoed(doc: Document, conn: Connection) -> tuple[list[Scored], dict[str, Any]]:
    """The echo of the document (the embedded engine): its tokens that the prompt holds,
    each after the first scored by the distribution that precedes it (run/logprobs.py's
    alignment check), the first `tokens` of them."""
    body = doc.forced.echo[0] if doc.forced.echo else {}
    data = await post_json(conn, doc.forced.base_url + "/completions", body)
    lp = data["choices"][0]["logprobs"]
    tokens, offsets = [str(t) for t in lp["tokens"]], lp["text_offset"]
    count = min(sum(1 for o in offsets if int(o) < len(doc.text)), doc.tokens)
    tops = [top or {} for top in lp["top_logprobs"]]
    shift = shift_of(tokens[:count], tops[:count])
    scored = [(tokens[i], lp["token_logprobs"][i] if shift == 0 else tops[i - 1].get(tokens[i]),
               {str(t): logprob(v) for t, v in tops[i - shift].items()})
              for i in range(1, count)]
    return scored, {"positions": len(scored), "requests": 1}
