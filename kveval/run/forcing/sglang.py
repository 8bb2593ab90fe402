"""SGLang's native `/generate`: the prompt and the answer's ids as `input_ids`, one new token,
with the input positions' log-probabilities and top-K from the answer's first position on."""

from __future__ import annotations

from typing import Any

from kveval.run.client import Connection
from kveval.run.forcing.forced import Forced
from kveval.run.forcing.scores import Scored, logprob
from kveval.run.forcing.token_ids import ForcedFailure, post_json
from kveval.run.logprobs import outcomes


async def score(item: Forced, conn: Connection, prompt: list[int], ids: list[int]
                ) -> tuple[list[Scored], int]:
    data = await post_json(conn, item.tokenizer.root + "/generate", _body(item, prompt, ids))
    return sglang_scored(data, ids), 1


def _body(item: Forced, prompt: list[int], ids: list[int]) -> dict[str, Any]:
    sampling = {"max_new_tokens": 1, "temperature": 0.0}
    return {**item.extra, "input_ids": prompt + ids, "sampling_params": sampling,
            "return_logprob": True, "logprob_start_len": max(len(prompt) - 1, 0),
            "top_logprobs_num": item.k, "return_text_in_logprobs": True}


def sglang_scored(data: Any, ids: list[int]) -> list[Scored]:
    """SGLang's /generate meta_info: `input_token_logprobs` as [logprob, id, text] and
    `input_top_logprobs` as lists of them, from `logprob_start_len` on."""
    try:
        meta = data["meta_info"]
        own = meta["input_token_logprobs"][-len(ids):]
        tops = meta["input_top_logprobs"][-len(ids):]
        if len(own) != len(ids) or [int(o[1]) for o in own] != ids:
            raise ForcedFailure("the input log-probabilities are not the answer's tokens")
        return [(str(o[2]), logprob(o[0]), outcomes((str(t[2]), logprob(t[0]))
                                                    for t in top or ()))
                for o, top in zip(own, tops, strict=True)]
    except (KeyError, IndexError, TypeError) as exc:
        raise ForcedFailure(f"the server returned no input log-probabilities ({exc!r})") from None
