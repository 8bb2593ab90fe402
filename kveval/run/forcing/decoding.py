"""llama-server's forced decoding: one `/completion` request per answer position, each
prompt the last one's plus the forced token, on one slot so each reuses the prefix it holds.

Each request also biases the forced token to be the one generated (`logit_bias`, applied by
the sampler after the log-probabilities are taken from the raw logits): llama-server then
reports that token's own log-probability from the whole vocabulary, so a position whose
forced token falls outside the top-K still has it (a broken cache pushes most of them out)."""

from __future__ import annotations

from typing import Any

from kveval.run.client import Connection
from kveval.run.forcing.forced import Forced
from kveval.run.forcing.scores import Scored, logprob
from kveval.run.forcing.slots import SlotPool
from kveval.run.forcing.token_ids import ForcedFailure, post_json
from kveval.run.logprobs import outcomes


async def score(item: Forced, conn: Connection, prompt: list[int], ids: list[int],
                pieces: list[str] | None, last_only: bool) -> tuple[list[Scored], int]:
    """Forced decoding: one request per position, in order, on one slot."""
    positions = [len(ids) - 1] if last_only else range(len(ids))
    scored: list[Scored] = []
    async with (item.pool or SlotPool(None)).take() as slot:
        for i in positions:
            body = _body(item, prompt + ids[:i], slot, ids[i])
            data = await post_json(conn, item.tokenizer.root + "/completion", body)
            scored.append(decoded(data, ids[i], pieces[i] if pieces else None))
    return scored, len(scored)


FORCE_BIAS = 1000.0  # added to the forced token's logit by the sampler alone


def _body(item: Forced, prompt: list[int], slot: int | None, want: int) -> dict[str, Any]:
    body = {**item.extra, "prompt": prompt, "n_predict": 1, "n_probs": item.k,
            "temperature": 0.0, "cache_prompt": True, "logit_bias": [[want, FORCE_BIAS]]}
    if slot is not None:
        body["id_slot"] = slot
    if item.seed is not None:
        body["seed"] = item.seed
    return body


def decoded(data: Any, want: int, piece: str | None) -> Scored:
    """llama-server's /completion reply with n_probs: the first generated position's top-K
    (log-probabilities of the raw logits, before any sampler), and the forced token's."""
    try:
        first = data["completion_probabilities"][0]
        tops = first["top_logprobs"]
        top = outcomes((str(t["token"]), logprob(t["logprob"])) for t in tops)
        own = next((logprob(t["logprob"]) for t in tops if t["id"] == want), None)
        if own is None and first.get("id") == want and "logprob" in first:
            own = logprob(first["logprob"])  # generated under the bias: its raw probability
        text = piece if piece is not None else next(
            (str(t["token"]) for t in tops if t["id"] == want), "")
    except (KeyError, IndexError, TypeError) as exc:
        raise ForcedFailure(f"the server answered no top-K log-probabilities ({exc!r})") from None
    return text, own, top
