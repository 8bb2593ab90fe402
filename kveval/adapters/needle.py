"""Needle in a haystack: one sentence with a key and a 7-digit number, hidden at a depth.

`needle` hides one such sentence; `needle-multikey` adds distractor needles with other
keys and values, because a single needle saturates and hides gradual damage. The grid is
length x depth x trial (kveval.adapters.haystack); lengths are the served model's tokens.
An answer is scored by the 7-digit number in it, and classed: `exact`, `wrong_key` (the
value of a distractor), `corrupted` (any other number, with its digit edit distance to
the value) or `no_answer`.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from kveval.adapters.base import BuildContext, Item, Message, Score, TaskSpec
from kveval.adapters.haystack import Cell, Grid, Layout, Sized, size_grid
from kveval.adapters.haystack import parse_lengths as parse_lengths
from kveval.adapters.haystack import skipped_lengths as skipped_lengths
from kveval.adapters.prose import Prose, weave
from kveval.adapters.text import strip_thinking
from kveval.errors import UsageError

KEY_ADJECTIVES = (
    "amber", "azure", "crimson", "copper", "silver", "ivory", "scarlet", "violet", "cobalt",
    "emerald", "jade", "saffron", "indigo", "ochre", "pewter", "russet", "teal", "umber",
    "bronze", "coral", "maroon", "olive", "slate", "topaz",
)
KEY_NOUNS = (
    "falcon", "otter", "heron", "badger", "lynx", "marten", "osprey", "walrus", "gecko",
    "ibis", "jackal", "kestrel", "lemur", "magpie", "narwhal", "ocelot", "panther", "quail",
    "raven", "salmon", "tapir", "vulture", "wombat", "yak",
)
DEFAULT_DISTRACTORS = 4
SINGLE, MULTIKEY = "single", "multikey"

_INTRO = {
    SINGLE: "Below is a long document. Somewhere in it is a sentence that gives a special "
            "magic number. Read the document, then answer the question after it.",
    MULTIKEY: "Below is a long document. Several sentences in it give special magic numbers, "
              "each for a different key. Read the document, then answer the question after it.",
}
_QUESTION = ("What is the special magic number for {key} mentioned in the document? "
             "Answer with the number only.")
# A run of digits, or digits grouped in threes by commas or spaces ("1,234,567").
_NUMBER = re.compile(r"(?<![\d,])\d{1,3}(?:[,\u00a0\u202f ]\d{3})+(?!\d)|\d+")


def needle_sentence(key: str, value: str) -> str:
    return f"The special magic number for {key} is {value}."


@dataclass(frozen=True)
class Plan:
    """What one cell hides: the asked key and value, and distractors with their depths."""

    key: str
    value: str
    distractors: tuple[tuple[str, str, float], ...] = ()  # key, value, depth fraction

    def inserts(self, depth: float) -> list[tuple[float, str]]:
        return [(depth / 100, needle_sentence(self.key, self.value))] + [
            (fraction, needle_sentence(key, value)) for key, value, fraction in self.distractors
        ]


def make_plan(rng: random.Random, distractors: int) -> Plan:
    keys: list[str] = []
    values: list[str] = []
    while len(keys) < distractors + 1:
        key = f"{rng.choice(KEY_ADJECTIVES)}-{rng.choice(KEY_NOUNS)}"
        value = str(rng.randrange(1_000_000, 10_000_000))
        if key not in keys and value not in values:
            keys.append(key)
            values.append(value)
    others = tuple((k, v, rng.random()) for k, v in zip(keys[1:], values[1:], strict=True))
    return Plan(keys[0], values[0], others)


def messages(plan: Plan, cell: Cell, stream: Prose, filler: int, variant: str,
             ) -> tuple[Message, ...]:
    document = weave(stream, filler, plan.inserts(cell.depth))
    question = _QUESTION.format(key=plan.key)
    content = f"{_INTRO[variant]}\n\n<document>\n{document}\n</document>\n\n{question}"
    return ({"role": "user", "content": content},)


def position(content: str, sentence: str) -> float:
    """Where the sentence sits in the document between the tags: 0 first, 1 last."""
    start = content.index("<document>\n") + len("<document>\n")
    end = content.index("\n</document>")
    rest = end - start - len(sentence)
    return round((content.index(sentence, start) - start) / rest, 4) if rest > 0 else 0.0


# ---------------------------------------------------------------- scoring


def extract_number(output: str) -> str | None:
    """The answer's 7-digit number (digits only), else its first number, else None."""
    found = [re.sub(r"\D", "", m) for m in _NUMBER.findall(strip_thinking(output))]
    return next((n for n in found if len(n) == 7), found[0] if found else None)


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance between two strings (here: digit strings)."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        current = [i]
        for j, y in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def classify(extracted: str | None, value: str, others: list[str]) -> dict[str, Any]:
    if extracted is None:
        return {"needle_class": "no_answer", "edit_distance": None}
    if extracted == value:
        return {"needle_class": "exact", "edit_distance": 0}
    kind = "wrong_key" if extracted in others else "corrupted"
    return {"needle_class": kind, "edit_distance": edit_distance(extracted, value)}


# ---------------------------------------------------------------- the adapter


class Needle:
    """The adapter; one instance per variant. (A plain class: the Adapter protocol wants
    writable `name` and `description` attributes.)"""

    def __init__(self, name: str, description: str, variant: str = SINGLE,
                 default_distractors: int = 0) -> None:
        self.name = name
        self.description = description
        self.variant = variant
        self.default_distractors = default_distractors

    def _distractors(self, spec: TaskSpec) -> int:
        count = spec.params.get("distractors", self.default_distractors)
        if self.variant == SINGLE:
            return 0
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 50:
            raise UsageError(f"{spec.name}: distractors = {count!r}: expected 1 to 50")
        return count

    def build(self, spec: TaskSpec, ctx: BuildContext) -> list[Item]:
        grid = Grid.from_spec(spec)
        distractors = self._distractors(spec)
        plans = {cell: make_plan(grid.rng(self.variant, cell), distractors)
                 for cell in grid.cells(spec, ctx.max_context)}
        jobs = [(cell, grid.stream(cell.trial), self._layout(plan, cell, grid.stream(cell.trial)))
                for cell, plan in plans.items()]
        sized = size_grid(jobs, ctx.count_tokens, spec.name)
        return [self._item(spec, plans[s.cell], s) for s in sized]

    def _layout(self, plan: Plan, cell: Cell, stream: Prose) -> Layout:
        return lambda n: messages(plan, cell, stream, n, self.variant)

    def _item(self, spec: TaskSpec, plan: Plan, sized: Sized) -> Item:
        cell = sized.cell
        content = sized.messages[-1]["content"]
        meta = {
            "target_tokens": cell.length, "measured_tokens": sized.fit.tokens,
            "depth": cell.depth_value, "trial": cell.trial, "variant": self.variant,
            "key": plan.key, "position": position(content, needle_sentence(plan.key, plan.value)),
            "filler_sentences": sized.fit.count,
            "distractors": [{"key": k, "value": v} for k, v, _ in plan.distractors],
        }
        return Item(task=spec.name, item_id=f"{spec.name}/{cell.label}",
                    messages=sized.messages, reference=plan.value, meta=meta)

    def score(self, item: Item, output: str) -> Score:
        value = item.reference or ""
        others = [d["value"] for d in item.meta.get("distractors", [])]
        extracted = extract_number(output)
        return Score(extracted=extracted, correct=extracted == value,
                     meta=classify(extracted, value, others))

    def skipped_lengths(self, spec: TaskSpec, ctx: BuildContext) -> list[int]:
        return skipped_lengths(spec, ctx)


ADAPTER = Needle(
    name="needle",
    description="a 7-digit number hidden at a depth of a long context: accuracy by length x "
                "depth",
)
MULTIKEY_ADAPTER = Needle(
    name="needle-multikey",
    description="the needle among distractor needles (other keys, other numbers): gradual "
                "long-context damage",
    variant=MULTIKEY,
    default_distractors=DEFAULT_DISTRACTORS,
)
