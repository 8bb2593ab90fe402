"""llama-server's idle-slot cache, seen: whether starting a task copies every idle slot's KV
cache to the server's host-memory prompt cache.

By default (`--cache-idle-slots`, with `--cache-ram` above 0, both defaults) llama-server
saves each idle slot to its prompt cache whenever it starts a task (tools/server/
server-context.cpp). Forced decoding starts one task per answer token, and between two of an
item's requests its slot is idle, so every step copies the other slots' KV: on an H200 (16
slots, SmolLM2-135M, 23,938 positions) one forced pass took 332.4 s with the default flags and
81.5 s with `--no-cache-idle-slots` (4.1x). Neither /props nor /slots says which a server does,
so it is seen: slot 0 takes a prompt A, slot 1 another task (a caching server now saves A),
then slot 1 is given A and a few tokens more. Losing its own context, slot 1 loads the best
match from the prompt cache: its reply's `timings.cache_n` holds A's length where A had been
saved, 0 where it had not. With one slot no slot is ever idle while another works.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kveval.run.client import Connection
from kveval.run.forcing.token_ids import ForcedFailure, post_json

FLAG = "--no-cache-idle-slots"
MEASURED = "4.1x"
# Both texts begin with the probe's own time stamp, so no state an earlier probe left in the
# prompt cache matches them.
TEXT_A = "Probe {}: " + "The quick brown fox jumps over the lazy dog. " * 8
TEXT_B = "Hello {}, how are you today?"


@dataclass(frozen=True)
class IdleCache:
    caches: bool | None  # None: could not tell (one slot, or the replies said nothing)
    why: str

    @property
    def advice(self) -> str | None:
        """What to tell a user about to force on this server; None: nothing."""
        if not self.caches:
            return None
        return (f"this llama-server copies its idle slots' KV cache to the prompt cache at "
                f"every task start, and forced decoding starts one task per answer token: "
                f"restart it with {FLAG} (measured {MEASURED} faster on an H200)")


def _body(prompt: list[int], slot: int) -> dict[str, Any]:
    return {"prompt": prompt, "n_predict": 1, "id_slot": slot, "cache_prompt": True,
            "temperature": 0.0}


async def _ids(conn: Connection, root: str, text: str) -> list[int]:
    data = await post_json(conn, root + "/tokenize", {"content": text})
    tokens = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(tokens, list) or not tokens or not all(type(t) is int for t in tokens):
        raise ForcedFailure("/tokenize answered no token ids")
    return tokens


def _cached(reply: Any) -> int | None:
    timings = reply.get("timings") if isinstance(reply, dict) else None
    value = timings.get("cache_n") if isinstance(timings, dict) else None
    return value if type(value) is int else None


async def idle_cache(conn: Connection, root: str, slots: int | None) -> IdleCache:
    """Whether the llama-server at `root` (beside /v1) caches idle slots (see above)."""
    if slots is None or slots < 2:
        return IdleCache(None, "one slot (or an unknown count): no slot is idle while "
                               "another works")
    stamp = time.time_ns()
    try:
        a = await _ids(conn, root, TEXT_A.format(stamp))
        b = await _ids(conn, root, TEXT_B.format(stamp))
        await post_json(conn, root + "/completion", _body(a, 0))
        await post_json(conn, root + "/completion", _body(b, 1))
        reply = await post_json(conn, root + "/completion", _body(a + b[:3], 1))
    except ForcedFailure as exc:
        return IdleCache(None, f"the probe failed: {exc}")
    cached = _cached(reply)
    if cached is None:
        return IdleCache(None, "the reply held no timings.cache_n")
    if cached > len(a) // 2:
        return IdleCache(True, f"slot 1 loaded slot 0's {len(a)} tokens from the prompt cache")
    return IdleCache(False, f"slot 1 found {cached} of slot 0's {len(a)} tokens cached")
