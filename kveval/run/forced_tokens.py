"""Token ids for teacher forcing, from the server's own tokenizer, over the run's connection.

The prompt is tokenized as the server's own API would (a completions prompt with its special
tokens, a chat item rendered by the server's chat template); the answer's ids must be the
baseline's own tokens. Tokenizing the answer text alone usually gives them; where the pieces
differ from the tokens the baseline recorded (a model may generate a split that tokenizing
the text would not), each recorded token is tokenized on its own, which gives the exact ids
when every one is a single token. Otherwise the item is marked `retokenized`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kveval.adapters.base import Message
from kveval.run.client import Connection
from kveval.run.failures import backoff, classify
from kveval.run.forcing import Method

EXACT, RETOKENIZED, UNCHECKED = "exact", "retokenized", "unchecked"


class ForcedFailure(Exception):
    """A teacher-forcing request that failed or was answered in a shape kveval cannot read."""


async def post_json(conn: Connection, url: str, body: dict[str, Any]) -> Any:
    """POST with kveval's retries and --timeout (as client.send does), to any path."""
    timeout = conn.config.timeout
    for attempt in range(conn.config.retries + 1):
        try:
            call = conn.client.post(url, body=body, cast_to=object)
            return await asyncio.wait_for(call, timeout)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a described error
            failure = classify(exc, timeout)
        if not failure.retry or attempt == conn.config.retries:
            raise ForcedFailure(failure.message)
        await asyncio.sleep(failure.wait if failure.wait is not None else backoff(attempt))
    raise AssertionError("unreachable")


def _piece(value: Any) -> str:
    """llama-server's piece: text, or the bytes of a token that is not valid UTF-8 alone."""
    if isinstance(value, list):
        return bytes(int(b) & 0xFF for b in value).decode("utf-8", "ignore")
    if not isinstance(value, str):
        raise ForcedFailure("the tokenizer answered a piece that is not text")
    return value


def _ids(data: Any) -> list[int]:
    tokens = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
        raise ForcedFailure("the tokenizer answered no token ids")
    return tokens


@dataclass(frozen=True)
class Tokenizer:
    """The server's /tokenize (and chat template) behind one interface."""

    method: Method
    root: str  # the server's root URL, beside /v1
    model: str

    @property
    def llama(self) -> bool:
        return self.method.name == "forced_decoding"

    async def text(self, conn: Connection, text: str, special: bool
                   ) -> tuple[list[int], list[str] | None]:
        """Ids (and llama-server's pieces) of a text; `special`: as a prompt is tokenized,
        with BOS and special tokens parsed; else as plain answer text."""
        if self.llama:
            body = {"content": text, "add_special": special, "parse_special": special,
                    "with_pieces": True}
            tokens = (await post_json(conn, self.root + "/tokenize", body) or {}).get("tokens")
            if not isinstance(tokens, list) or not all(isinstance(t, dict) for t in tokens):
                raise ForcedFailure("the tokenizer answered no {id, piece} objects")
            ids = _ids({"tokens": [t.get("id") for t in tokens]})
            return ids, [_piece(t.get("piece")) for t in tokens]
        body = {"model": self.model, "prompt": text, "add_special_tokens": special}
        return _ids(await post_json(conn, self.root + "/tokenize", body)), None

    async def prompt(self, conn: Connection, prompt: str | None,
                     messages: Sequence[Message] | None) -> list[int]:
        """The prompt's ids, as the server's completions or chat API would make them."""
        if prompt is not None:
            return (await self.text(conn, prompt, special=True))[0]
        if self.llama:
            rendered = await post_json(conn, self.root + "/apply-template",
                                       {"messages": list(messages or ())})
            text = rendered.get("prompt") if isinstance(rendered, dict) else None
            if not isinstance(text, str):
                raise ForcedFailure("/apply-template answered no prompt")
            return (await self.text(conn, text, special=True))[0]
        body = {"model": self.model, "messages": list(messages or ()),
                "add_generation_prompt": True}
        return _ids(await post_json(conn, self.root + "/tokenize", body))

    async def answer(self, conn: Connection, answer: str, recorded: Sequence[str] | None
                     ) -> tuple[list[int], list[str] | None, str]:
        """The answer's ids, their pieces where known, and how they match the baseline's
        recorded tokens: exact, retokenized, or unchecked (llama-server alone answers the
        pieces; elsewhere they are checked against the scoring request's reply)."""
        ids, pieces = await self.text(conn, answer, special=False)
        if recorded is None:
            return ids, pieces, RETOKENIZED
        if pieces is None:
            return ids, None, UNCHECKED
        if pieces == list(recorded):
            return ids, pieces, EXACT
        own = await self.each(conn, recorded)
        return (own, list(recorded), EXACT) if own is not None else (ids, pieces, RETOKENIZED)

    async def each(self, conn: Connection, recorded: Sequence[str]) -> list[int] | None:
        """Each recorded token tokenized alone: the exact ids when each is one token."""
        ids = []
        for piece in recorded:
            one, pieces = await self.text(conn, piece, special=False)
            if len(one) != 1 or (pieces is not None and pieces != [piece]):
                return None
            ids.append(one[0])
        return ids


def recorded_tokens(logprobs: dict[str, Any] | None, answer: str) -> list[str] | None:
    """The baseline's own answer tokens, where its log-probabilities spell the answer."""
    tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        return None
    return tokens if tokens and "".join(tokens) == answer else None
