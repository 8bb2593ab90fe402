"""vLLM's `prompt_logprobs`: the prompt and the answer's ids in one completions request of one
output token; the reply scores every prompt position, the answer's among them."""

from __future__ import annotations

from typing import Any

from kveval.run.client import Connection
from kveval.run.forcing.forced import Forced
from kveval.run.forcing.scores import Scored, logprob
from kveval.run.forcing.token_ids import ForcedFailure, post_json
from kveval.run.logprobs import outcomes


async def score(item: Forced, conn: Connection, prompt: list[int], ids: list[int]
                ) -> tuple[list[Scored], int]:
    data = await post_json(conn, item.base_url + "/completions", _body(item, prompt, ids))
    return vllm_scored(data, ids, item.k), 1


def _body(item: Forced, prompt: list[int], ids: list[int]) -> dict[str, Any]:
    body = {**item.extra, "model": item.tokenizer.model, "prompt": prompt + ids,
            "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": item.k}
    if item.seed is not None:
        body["seed"] = item.seed
    return body


def vllm_scored(data: Any, ids: list[int], k: int) -> list[Scored]:
    """vLLM's `prompt_logprobs`: per prompt position {token id: {logprob, rank,
    decoded_token}} holding the top-K and the prompt's own token."""
    try:
        rows = data["choices"][0]["prompt_logprobs"][-len(ids):]
        if len(rows) != len(ids):
            raise ForcedFailure("the server returned fewer prompt log-probabilities than tokens")
        return [_position(row, want, k) for row, want in zip(rows, ids, strict=True)]
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ForcedFailure(f"the server returned no prompt log-probabilities ({exc!r})") from None


def _position(row: dict[str, Any], want: int, k: int) -> Scored:
    """The prompt's own token is listed beside the top-K when it ranks below them."""
    own = row[str(want)]
    top = outcomes((str(e["decoded_token"]), logprob(e["logprob"])) for e in row.values()
                   if int(e["rank"]) <= k)
    return str(own["decoded_token"]), logprob(own["logprob"]), top
