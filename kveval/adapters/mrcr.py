"""Multi-round co-reference (MRCR), in the style of openai/mrcr.

A long chat history of user asks for short pieces ("Write a riddle about lanterns.") with
the assistant's answers pre-written from the haystack's seeded prose. Several asks
(`needles`, default 4) share one form and topic; the final ask names one of them by order and
requires a random prefix: "Prepend 7kq2LmX9aB to the 3rd riddle about lanterns." The asked
piece sits at the cell's depth of the conversation; its siblings at seeded depths. The grid
is length x depth x trial; lengths are the served model's tokens.

Scored as openai/mrcr grades: 0 when the answer does not start with the prefix, else
difflib's SequenceMatcher ratio (characters, default settings) of the rest against the
asked piece. This is the item's `score`; `correct` is a ratio of 1 (an exact piece).
Thinking blocks and outer whitespace are dropped first, and whitespace right after the
prefix is ignored. `mrcr_class`: `exact`, `wrong_piece` (closer to a sibling piece than to
the asked one: an attention failure), `partial` or `no_prefix`.
"""

from __future__ import annotations

import functools
import math
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

from kveval.adapters.base import BuildContext, Item, Message, Score, TaskSpec, TokenCounter
from kveval.adapters.haystack import (
    SIZING_WINDOW,
    Cell,
    Grid,
    Layout,
    Sized,
    estimate_tokens,
    size_grid,
)
from kveval.adapters.haystack import skipped_lengths as skipped_lengths
from kveval.adapters.prose import Prose, prose
from kveval.adapters.text import strip_thinking
from kveval.errors import UsageError

FORMS = ("poem", "riddle", "note", "story")
TOPICS = (
    "tapirs", "lanterns", "harbors", "otters", "kettles", "lighthouses", "badgers", "orchards",
    "ferries", "owls", "bridges", "herons",
)
DEFAULT_NEEDLES = 4
PIECE_SENTENCES = 3
PREFIX_LENGTH = 10
TAIL_SENTENCES = 2 * PIECE_SENTENCES  # words for topping up come from at most these sentences
_PREFIX_ALPHABET = string.ascii_letters + string.digits
_FINAL = ("Prepend {prefix} to the {order} {form} about {topic}. Do not include any other "
          "text in your answer.")


def ordinal(n: int) -> str:
    """1 -> 1st, 2 -> 2nd, 11 -> 11th, 23 -> 23rd"""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def ask(form: str, topic: str) -> str:
    return f"Write a {form} about {topic}."


def piece(form: str, sentences: list[str]) -> str:
    """A piece's text: a poem is one sentence a line; a riddle ends with its question."""
    if form == "poem":
        return "\n".join(sentences)
    if form == "riddle":
        return " ".join(sentences) + " What am I?"
    return " ".join(sentences)


# ---------------------------------------------------------------- building

COMBOS = tuple((form, topic) for form in FORMS for topic in TOPICS)


@functools.lru_cache(maxsize=32)
def _draws(seed: str, count: int) -> tuple[int, ...]:
    rng = random.Random(seed)
    return tuple(int(rng.random() * len(COMBOS)) for _ in range(count))


def filler_combos(seed: str, turns: int, avoid: tuple[str, str]) -> list[tuple[str, str]]:
    """The filler asks' form and topic: seeded per trial, never the asked combination.
    (Drawn in blocks of 1024, so a longer conversation starts as the shorter one.)"""
    draws = _draws(seed, 1024 * (turns // 1024 + 1))[:turns]
    skip = COMBOS.index(avoid)
    return [COMBOS[(d + 1) % len(COMBOS)] if d == skip else COMBOS[d] for d in draws]


@dataclass(frozen=True)
class Plan:
    """A cell's asked form and topic, its sibling pieces with their depths, the prefix."""

    form: str
    topic: str
    pieces: tuple[str, ...]  # in the order drawn; pieces[0] is the asked one
    fractions: tuple[float, ...]  # depth of each piece in the conversation, 0..1
    prefix: str

    def placed(self, turns: int) -> list[tuple[int, int]]:
        """(turn boundary, piece index) in conversation order."""
        return sorted((round(f * turns), i) for i, f in enumerate(self.fractions))

    def order(self, turns: int) -> int:
        """The asked piece's 1-based order among its siblings in the conversation."""
        return [i for _, i in self.placed(turns)].index(0) + 1


def make_plan(rng: random.Random, depth: float, needles: int, texts: Prose) -> Plan:
    form, topic = COMBOS[int(rng.random() * len(COMBOS))]
    pieces = tuple(piece(form, texts.sentences(PIECE_SENTENCES * i, PIECE_SENTENCES * (i + 1)))
                   for i in range(needles))
    fractions = (depth / 100,) + tuple(rng.random() for _ in range(needles - 1))
    prefix = "".join(rng.choice(_PREFIX_ALPHABET) for _ in range(PREFIX_LENGTH))
    return Plan(form, topic, pieces, fractions, prefix)


def conversation(plan: Plan, stream: Prose, combos_seed: str, filler: int, words: int = 0,
                 ) -> tuple[Message, ...]:
    """Filler turns of PIECE_SENTENCES sentences each (the last one with the first `words`
    words of the sentences after them: a new turn can cost more tokens than the 2% window),
    the plan's pieces woven in, then the final ask."""
    turns = -(-filler // PIECE_SENTENCES)
    combos = filler_combos(combos_seed, turns, (plan.form, plan.topic))
    fillers = [(form, topic, piece(form, stream.sentences(
        PIECE_SENTENCES * j, min(PIECE_SENTENCES * (j + 1), filler))))
        for j, (form, topic) in enumerate(combos)]
    if words and fillers:
        form, topic, text = fillers[-1]
        tail = " ".join(" ".join(stream.sentences(filler, filler + TAIL_SENTENCES)).split()[:words])
        fillers[-1] = (form, topic, f"{text} {tail}")
    for at, index in reversed(plan.placed(turns)):
        fillers.insert(at, (plan.form, plan.topic, plan.pieces[index]))
    messages: list[Message] = []
    for form, topic, text in fillers:
        messages += [{"role": "user", "content": ask(form, topic)},
                     {"role": "assistant", "content": text}]
    final = _FINAL.format(prefix=plan.prefix, order=ordinal(plan.order(turns)), form=plan.form,
                          topic=plan.topic)
    return (*messages, {"role": "user", "content": final})


WordsLayout = Callable[[int, int], tuple[Message, ...]]  # filler sentences, words -> messages


@dataclass(frozen=True)
class TopUp:
    messages: tuple[Message, ...]
    tokens: int
    words: int  # words of the next sentence added to the last filler piece


def top_up(sized: Sized, layout: WordsLayout, counter: TokenCounter, stream: Prose) -> TopUp:
    """A prompt that fell short of the sizing window, filled up word by word: the most
    words of the next sentences that keep it at or below its target."""
    target, count = sized.cell.length, sized.fit.count
    if sized.fit.tokens >= math.ceil(target * (1 - SIZING_WINDOW)) or count == 0:
        return TopUp(sized.messages, sized.fit.tokens, 0)
    words = len(" ".join(stream.sentences(count, count + TAIL_SENTENCES)).split())
    low, high, best = 0, words, sized.fit.tokens
    while low < high:
        middle = (low + high + 1) // 2
        tokens = counter(layout(count, middle))
        if tokens <= target:
            low, best = middle, tokens
        else:
            high = middle - 1
    return TopUp(layout(count, low), best, low)


def _needles(spec: TaskSpec) -> int:
    count = spec.params.get("needles", DEFAULT_NEEDLES)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 16:
        raise UsageError(f"{spec.name}: needles = {count!r}: expected 1 to 16")
    return count


# ---------------------------------------------------------------- scoring


def grade(output: str, prefix: str, expected: str) -> float:
    """openai/mrcr's grade: 0 without the prefix, else the SequenceMatcher ratio of the rest."""
    text = strip_thinking(output).strip()
    if not text.startswith(prefix):
        return 0.0
    return SequenceMatcher(None, text[len(prefix):].lstrip(), expected).ratio()


def classify(output: str, prefix: str, expected: str, siblings: list[str]) -> dict[str, Any]:
    ratio = grade(output, prefix, expected)
    if not strip_thinking(output).strip().startswith(prefix):
        kind = "no_prefix"
    elif ratio == 1.0:
        kind = "exact"
    elif any(grade(output, prefix, other) > ratio for other in siblings):
        kind = "wrong_piece"
    else:
        kind = "partial"
    return {"score": round(ratio, 6), "mrcr_class": kind}


class Mrcr:
    name = "mrcr"
    description = ("multi-round co-reference: repeat the k-th of several similar pieces in a "
                   "long chat, with a prefix (openai/mrcr's difflib grade)")

    def build(self, spec: TaskSpec, ctx: BuildContext) -> list[Item]:
        grid, needles = Grid.from_spec(spec), _needles(spec)
        plans = {cell: make_plan(grid.rng("mrcr", cell), cell.depth, needles,
                                 prose(f"{grid.seed}/mrcr/{cell.label}"))
                 for cell in grid.cells(spec, ctx.max_context)}
        layouts = {cell: self._words(plan, grid, cell) for cell, plan in plans.items()}
        jobs = [(cell, grid.stream(cell.trial), self._layout(layouts[cell])) for cell in plans]
        sized = size_grid(jobs, ctx.count_tokens, spec.name)
        counter = ctx.count_tokens or estimate_tokens
        items = []
        for s in sized:
            topped = top_up(s, layouts[s.cell], counter, grid.stream(s.cell.trial))
            items.append(self._item(spec, plans[s.cell], s, topped))
        return items

    @staticmethod
    def _words(plan: Plan, grid: Grid, cell: Cell) -> WordsLayout:
        stream, seed = grid.stream(cell.trial), f"{grid.seed}/mrcr/asks/T{cell.trial}"
        return lambda n, words: conversation(plan, stream, seed, n, words)

    @staticmethod
    def _layout(words: WordsLayout) -> Layout:
        return lambda n: words(n, 0)

    @staticmethod
    def _item(spec: TaskSpec, plan: Plan, sized: Sized, topped: TopUp) -> Item:
        cell = sized.cell
        turns = -(-sized.fit.count // PIECE_SENTENCES)
        placed = plan.placed(turns)
        at = next(k for k, (_, i) in enumerate(placed) if i == 0)
        meta = {
            "target_tokens": cell.length, "measured_tokens": topped.tokens,
            "depth": cell.depth_value, "trial": cell.trial, "form": plan.form,
            "topic": plan.topic, "order": plan.order(turns), "needles": len(plan.pieces),
            "prefix": plan.prefix, "asks": turns + len(plan.pieces),
            "position": round((placed[at][0] + at) / max(turns + len(plan.pieces) - 1, 1), 4),
            "siblings": list(plan.pieces[1:]), "filler_sentences": sized.fit.count,
            "filler_words": topped.words,
        }
        return Item(task=spec.name, item_id=f"{spec.name}/{cell.label}",
                    messages=topped.messages, reference=plan.pieces[0], meta=meta)

    def score(self, item: Item, output: str) -> Score:
        prefix, expected = str(item.meta.get("prefix", "")), item.reference or ""
        meta = classify(output, prefix, expected, list(item.meta.get("siblings", [])))
        text = strip_thinking(output).strip()
        return Score(extracted=text, correct=meta["mrcr_class"] == "exact", meta=meta)

    def skipped_lengths(self, spec: TaskSpec, ctx: BuildContext) -> list[int]:
        return skipped_lengths(spec, ctx)


ADAPTER = Mrcr()
