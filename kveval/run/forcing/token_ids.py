"""Token ids for teacher forcing, from the server's own tokenizer, over the run's connection.

The prompt is tokenized as the server's own API would (a completions prompt with its special
tokens, a chat item rendered by the server's chat template); the answer's ids must be the
baseline's own tokens. Two ways give them: tokenizing the answer text, and tokenizing each
recorded token on its own, which gives the exact ids when every one is a single token (a
model may generate a split, "\n" + "\n", that tokenizing the text would not: "\n\n").
llama-server answers pieces with its ids, so the text's ids are checked before any scoring
request, and each token alone is tried where they differ. vLLM and SGLang answer ids only:
each token alone is tried first (one small cached request per distinct token), the scoring
reply's tokens check it, and the text's ids are tried only where that check fails; a run
whose tokenizer refutes the first way (a SentencePiece model prefixes a space to a text
alone) tries the text first from then on. An item whose tokens still differ is marked
`retokenized`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kveval.adapters.base import Message
from kveval.run.client import Connection, Reply
from kveval.run.failures import backoff, classify
from kveval.run.forcing.method import Method

EXACT, RETOKENIZED, UNCHECKED = "exact", "retokenized", "unchecked"


class ForcedFailure(Exception):
    """A teacher-forcing request that failed or was answered in a shape kveval cannot read."""


# What reading a server's reply of the wrong shape raises (a rank of 'first' or Infinity,
# an id of 'abc', a piece of [104, 'x']): each an error item, never a traceback.
MALFORMED = (ForcedFailure, ValueError, TypeError, KeyError, IndexError, AttributeError,
             OverflowError, RecursionError)


def failed(exc: BaseException, started: float, conn: Connection) -> Reply:
    """The error reply of a forced exchange that raised one of MALFORMED, naming why."""
    from kveval.masking import mask
    from kveval.safe import one_line

    why = str(exc) if isinstance(exc, ForcedFailure) else f"malformed reply ({exc!r})"
    return Reply(text=None, latency_s=round(time.perf_counter() - started, 4),
                 error=mask(one_line(why)[:300], conn.config.secrets))


async def post_json(conn: Connection, url: str, body: dict[str, Any]) -> Any:
    """POST with kveval's retries and --timeout (as client.send does), to any path."""
    timeout = conn.config.timeout
    for attempt in range(conn.config.retries + 1):
        try:
            return await asyncio.wait_for(conn.http.post(url, body), timeout)
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
    singles: dict[str, int | None] = field(default_factory=dict, compare=False)  # piece -> id
    refuted: dict[str, int] = field(default_factory=dict, compare=False)  # way -> times

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
        if same_tokens(pieces, recorded):
            return ids, pieces, EXACT
        own = await self.each(conn, recorded)
        return (own, list(recorded), EXACT) if own is not None else (ids, pieces, RETOKENIZED)

    async def ways(self, conn: Connection, answer: str, recorded: Sequence[str]
                   ) -> list[tuple[str, list[int]]]:
        """The distinct ids of the two ways, by name, the one to try first first: each
        recorded token alone, unless this run's replies refuted it more often than the
        text's ids."""
        order = ("text", "each") if self.refuted.get("each", 0) > self.refuted.get("text", 0) \
            else ("each", "text")
        found: list[tuple[str, list[int]]] = []
        for way in order:
            ids = (await self.each(conn, recorded, quiet=True) if way == "each"
                   else (await self.text(conn, answer, special=False))[0])
            if ids is not None and all(ids != other for _, other in found):
                found.append((way, ids))
        return found

    def refute(self, way: str) -> None:
        """A scoring reply showed that this way's ids were not the baseline's tokens."""
        self.refuted[way] = self.refuted.get(way, 0) + 1

    async def each(self, conn: Connection, recorded: Sequence[str], quiet: bool = False
                   ) -> list[int] | None:
        """Each recorded token tokenized alone: the exact ids when each is one token.
        `quiet`: a failed request means None (another way is tried), not a failure."""
        ids = []
        for piece in recorded:
            if piece not in self.singles:
                try:
                    one, pieces = await self.text(conn, piece, special=False)
                except ForcedFailure:
                    if quiet:
                        return None
                    raise
                alone = len(one) == 1 and (pieces is None or pieces == [piece])
                self.singles[piece] = one[0] if alone else None
            token = self.singles[piece]
            if token is None:
                return None
            ids.append(token)
        return ids


def same_tokens(pieces: Sequence[str], recorded: Sequence[str]) -> bool:
    """Whether the server's pieces are the baseline's tokens. A server may hold back a
    token's text while it could begin a stop string and send it with the next token (the
    baseline then records "" and " <<2" for " <<" and "2"): so the tokens are the same when
    there are as many, and the recorded text so far is always a prefix of the pieces' text
    so far, and both end alike."""
    if len(pieces) != len(recorded):
        return False
    mine = theirs = ""
    for piece, token in zip(pieces, recorded, strict=True):
        mine, theirs = mine + piece, theirs + token
        if not mine.startswith(theirs):
            return False
    return mine == theirs


def recorded_tokens(logprobs: dict[str, Any] | None, answer: str) -> list[str] | None:
    """The baseline's own answer tokens, where its log-probabilities spell the answer.

    At temperature 0 each generated token is its position's top-1, whose text is the token's
    own even where the server held the text back (see same_tokens); so the top-1s are used
    where they spell the answer, else the recorded texts. Positions after the answer (an
    end-of-text token some servers list, text "") are not the answer's."""
    if not isinstance(logprobs, dict):
        return None
    tops = logprobs.get("top_tokens")
    firsts = [row[0] if isinstance(row, list) and row else None for row in tops or ()]
    for tokens in (firsts, logprobs.get("tokens")):
        if isinstance(tokens, list) and all(isinstance(t, str) for t in tokens):
            spelled = _spelling(tokens, answer)
            if spelled:
                return spelled
    return None


def _spelling(tokens: list[str], answer: str) -> list[str] | None:
    """The shortest head of `tokens` that spells `answer`."""
    text = ""
    for n, token in enumerate(tokens):
        text += token
        if len(text) >= len(answer):
            return tokens[: n + 1] if text == answer else None
    return None
