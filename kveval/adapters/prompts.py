"""A user's own prompts at temperature 0: no ground truth, answers exist to be compared."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kveval.adapters.base import BuildContext, Item, Message, Score, TaskSpec
from kveval.adapters.text import strip_thinking


@dataclass(frozen=True)
class PromptEntry:
    """One prompt from a prompt file: an id and either a prompt text or chat messages."""

    id: str
    prompt: str | None = None
    messages: tuple[Message, ...] | None = None


@dataclass(frozen=True)
class PromptData:
    entries: Sequence[PromptEntry]
    source: str


class Prompts:
    name = "prompts"
    description = "your own prompt file at temperature 0: no ground truth, drift vs baseline"

    def build(self, spec: TaskSpec, ctx: BuildContext) -> list[Item]:
        data: PromptData = ctx.data
        entries = data.entries if spec.limit is None else data.entries[: spec.limit]
        return [self._item(spec, entry) for entry in entries]

    def _item(self, spec: TaskSpec, entry: PromptEntry) -> Item:
        item_id = f"{spec.name}/{entry.id}"
        if entry.messages is not None:
            return Item(task=spec.name, item_id=item_id, messages=entry.messages)
        text = entry.prompt or ""
        if spec.api == "chat":
            return Item(task=spec.name, item_id=item_id,
                        messages=({"role": "user", "content": text},))
        return Item(task=spec.name, item_id=item_id, prompt=text)

    def score(self, item: Item, output: str) -> Score:
        return Score(extracted=strip_thinking(output).strip(), correct=None)


ADAPTER = Prompts()
