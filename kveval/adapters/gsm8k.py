"""GSM8K, 8-shot, greedy: prompts as lm-evaluation-harness builds them, two extractions.

`correct` is the flexible match (the last number in the answer), robust to chat models
that drop the `#### N` format; `correct_strict` is the `#### N` match beside it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from kveval.adapters.base import BuildContext, Item, Message, Score, TaskSpec
from kveval.adapters.text import strip_thinking

_STRICT = re.compile(r"#### \$?(-?[0-9.,]+)")
_NUMBER = re.compile(r"-?\$?[0-9][0-9,]*(?:\.[0-9]+)?|-?\$?\.[0-9]+")


@dataclass(frozen=True)
class Gsm8kData:
    """The two splits, each a list of {"question", "answer"} dicts, and where they came from."""

    train: Sequence[Mapping[str, str]]
    test: Sequence[Mapping[str, str]]
    source: str


def normalize_number(text: str | None) -> Decimal | None:
    """'$1,000.00', '1000' and '1000.' are one number; None when text is no number."""
    if text is None:
        return None
    cleaned = text.strip().replace(",", "").replace("$", "").rstrip(".")
    if not cleaned or cleaned in {"-", "."}:
        return None
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def same_number(a: str | None, b: str | None) -> bool:
    x, y = normalize_number(a), normalize_number(b)
    return x is not None and y is not None and x == y


def extract_strict(output: str) -> str | None:
    """The number after the first `#### `, as the reference answers give it."""
    match = _STRICT.search(strip_thinking(output))
    return match.group(1) if match else None


def extract_flexible(output: str) -> str | None:
    """The last number in the answer (thinking removed), as lm-evaluation-harness does."""
    numbers = _NUMBER.findall(strip_thinking(output))
    for candidate in reversed(numbers):
        if normalize_number(candidate) is not None:
            return candidate.replace("$", "")
    return None


def reference_answer(worked: str) -> str:
    """The final answer of a GSM8K worked solution (the text after '####')."""
    return worked.split("####")[-1].strip().replace(",", "")


def shots(train: Sequence[Mapping[str, str]], n: int, seed: int | None) -> list[Mapping[str, str]]:
    """The first n train items, or n sampled with random.Random(seed) when a seed is given."""
    if seed is None:
        return list(train[:n])
    import random

    return random.Random(seed).sample(list(train), n)


def completion_prompt(exemplars: Sequence[Mapping[str, str]], question: str) -> str:
    parts = [f"Question: {s['question']}\nAnswer: {s['answer']}\n\n" for s in exemplars]
    return "".join(parts) + f"Question: {question}\nAnswer:"


def chat_messages(exemplars: Sequence[Mapping[str, str]], question: str) -> tuple[Message, ...]:
    messages: list[Message] = []
    for s in exemplars:
        messages.append({"role": "user", "content": f"Question: {s['question']}"})
        messages.append({"role": "assistant", "content": f"Answer: {s['answer']}"})
    messages.append({"role": "user", "content": f"Question: {question}"})
    return tuple(messages)


class Gsm8k:
    name = "gsm8k"
    description = "grade-school maths, 8-shot, greedy: accuracy (flexible and strict `#### N`)"

    def build(self, spec: TaskSpec, ctx: BuildContext) -> list[Item]:
        data: Gsm8kData = ctx.data
        params: dict[str, Any] = spec.params
        exemplars = shots(data.train, int(params.get("shots", 8)), params.get("shot_seed"))
        split = params.get("split", "test")
        rows = data.test if spec.limit is None else data.test[: spec.limit]
        return [self._item(spec, exemplars, split, i, row) for i, row in enumerate(rows)]

    def _item(self, spec: TaskSpec, exemplars: Sequence[Mapping[str, str]], split: str,
              index: int, row: Mapping[str, str]) -> Item:
        question = row["question"]
        common: dict[str, Any] = {
            "task": spec.name,
            "item_id": f"{spec.name}/{split}/{index:04d}",
            "reference": reference_answer(row["answer"]),
            "meta": {"index": index},
        }
        if spec.api == "chat":
            return Item(messages=chat_messages(exemplars, question), **common)
        return Item(prompt=completion_prompt(exemplars, question), **common)

    def score(self, item: Item, output: str) -> Score:
        flexible = extract_flexible(output)
        strict = extract_strict(output)
        return Score(
            extracted=flexible,
            correct=same_number(flexible, item.reference),
            correct_strict=same_number(strict, item.reference),
            meta={"extracted_strict": strict},
        )


ADAPTER = Gsm8k()
