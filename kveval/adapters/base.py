"""What every task adapter is: pure functions that build items and score answers."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

Message = dict[str, str]
# Counts the served model's tokens of a chat request's messages (chat template included).
TokenCounter = Callable[[Sequence[Message]], int]


@dataclass(frozen=True)
class TaskSpec:
    """A task's resolved settings: built-in defaults, then the suite file, then the command line."""

    name: str  # the task name as run and recorded, e.g. "gsm8k"
    adapter: str  # the adapter that builds and scores it (usually the same as name)
    version: int = 1
    api: str = "completions"  # "completions" or "chat"
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    temperature: float = 0.0
    limit: int | None = None
    data: str | None = None  # a path, or None for the adapter's default source
    params: dict[str, Any] = field(default_factory=dict)  # adapter-specific: shots, lengths, ...

    def to_header(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "adapter": self.adapter,
            "version": self.version,
            "api": self.api,
            "max_tokens": self.max_tokens,
            "stop": list(self.stop),
            "temperature": self.temperature,
            "limit": self.limit,
            "data": self.data,
            "params": self.params,
        }


@dataclass(frozen=True)
class Item:
    """One request to send: a prompt (completions API) or messages (chat API)."""

    task: str
    item_id: str
    prompt: str | None = None
    messages: tuple[Message, ...] | None = None
    reference: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    max_tokens: int | None = None  # this item's own answer budget; None: the spec's
    # The text whose sha256 names the prompt when another tool defines it (lm-eval hashes
    # its own JSON of the chat messages); None: kveval's own rule below.
    hash_body: str | None = None

    @property
    def prompt_sha256(self) -> str:
        if self.hash_body is not None:
            return hashlib.sha256(self.hash_body.encode("utf-8")).hexdigest()
        body = self.prompt if self.prompt is not None else json.dumps(
            list(self.messages or ()), ensure_ascii=False, sort_keys=True
        )
        return hashlib.sha256(body.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Score:
    """What an adapter makes of one answer."""

    extracted: str | None
    correct: bool | None  # None: the task has no ground truth
    correct_strict: bool | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. the evidence error class


@dataclass(frozen=True)
class BuildContext:
    """What an adapter may use to build items; all I/O happened before this was made."""

    data: Any = None  # loaded task data (e.g. GSM8K splits, parsed prompt file)
    count_tokens: TokenCounter | None = None  # the server's tokenizer, or a calibrated estimate
    max_context: int | None = None  # the server's context limit in tokens, when it says


class Adapter(Protocol):
    name: str
    description: str  # one line for `kveval tasks`: what the adapter measures

    def build(self, spec: TaskSpec, ctx: BuildContext) -> list[Item]: ...

    def score(self, item: Item, output: str) -> Score: ...
