"""One teacher-forced item: its prompt, the baseline's answer, and what every method
(decoding.py, prompt_logprobs.py, sglang.py; echo through client.send) needs to score it.
item.py sends it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kveval.run.forcing.slots import SlotPool
from kveval.run.forcing.token_ids import Tokenizer


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
