"""Long copy: reproduce one numbered paragraph of a long document, word for word.

A study of FP8 KV caches found short tasks unchanged while long verbatim copying began to
substitute single words past some length, which breaks citations in RAG answers. The
document is the haystack's prose cut into numbered paragraphs of five sentences; the asked
paragraph is a passage of about `copy_lengths` tokens of its own seeded prose, placed at the
cell's depth. The grid is document length x passage length x depth x trial.

Scores: `correct` is an exact copy (the same words in the same order; whitespace aside);
`similarity` is difflib's SequenceMatcher ratio over words (2 x matched words / all words:
one substituted word in 100 gives 0.99) and is the item's graded `score`; `first_error_word`
is the 0-based word position of the first difference; `substituted_words`, `missing_words`
and `extra_words` count the edit. Each item's answer budget is sized from its passage.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

from kveval.adapters.base import BuildContext, Item, Message, Score, TaskSpec, TokenCounter
from kveval.adapters.haystack import (
    Cell,
    Grid,
    Layout,
    Sized,
    estimate_tokens,
    fit_filler,
    parse_lengths,
    size_grid,
)
from kveval.adapters.prose import Prose, prose
from kveval.adapters.text import strip_thinking
from kveval.errors import UsageError

DEFAULT_COPY_LENGTHS = (64, 512)
PARAGRAPH_SENTENCES = 5  # sentences in each filler paragraph
PASSAGE_TOLERANCE = 0.15  # the passage lands within 15% below its target length
BUDGET_FACTOR, BUDGET_EXTRA = 1.25, 32  # answer budget: 1.25 x the passage's tokens + 32

_INTRO = ("Below is a long document of numbered paragraphs. Read it, then follow the "
          "instruction after it.")
_QUESTION = ("Copy paragraph {number} of the document exactly as it is written, word for "
             "word. Write only the text of the paragraph, without its number.")


# ---------------------------------------------------------------- building


@dataclass(frozen=True)
class Passage:
    text: str
    sentences: int
    tokens: int  # the passage alone, in the server's tokens


@dataclass(frozen=True)
class Document:
    """One cell's document: the asked passage at a depth among filler paragraphs."""

    passage: Passage
    depth: float  # percent

    def paragraphs(self, stream: Prose, filler: int) -> tuple[list[str], int]:
        """The document's paragraphs and the asked one's index."""
        chunks = [" ".join(stream.sentences(i, min(i + PARAGRAPH_SENTENCES, filler)))
                  for i in range(0, filler, PARAGRAPH_SENTENCES)]
        at = round(self.depth / 100 * len(chunks))
        return chunks[:at] + [self.passage.text] + chunks[at:], at

    def messages(self, stream: Prose, filler: int) -> tuple[Message, ...]:
        paragraphs, at = self.paragraphs(stream, filler)
        document = "\n\n".join(f"[{n}] {text}" for n, text in enumerate(paragraphs, start=1))
        question = _QUESTION.format(number=at + 1)
        content = f"{_INTRO}\n\n<document>\n{document}\n</document>\n\n{question}"
        return ({"role": "user", "content": content},)


def passage_tokens(counter: TokenCounter) -> TokenCounter:
    """A passage's own tokens: the message's count less an empty message's."""
    empty = counter([{"role": "user", "content": ""}])
    return lambda messages: counter(messages) - empty


def make_passage(stream: Prose, target: int, counter: TokenCounter) -> Passage:
    own = passage_tokens(counter)

    def measure(n: int) -> int:
        return own([{"role": "user", "content": " ".join(stream.sentences(0, n))}])

    fit = fit_filler(measure, stream, target, None, PASSAGE_TOLERANCE)
    count = max(fit.count, 1)
    return Passage(" ".join(stream.sentences(0, count)), count, measure(count))


def answer_budget(tokens: int, cap: int) -> int:
    return min(cap, math.ceil(tokens * BUDGET_FACTOR) + BUDGET_EXTRA)


def copy_lengths(spec: TaskSpec) -> tuple[int, ...]:
    value = spec.params.get("copy_lengths", list(DEFAULT_COPY_LENGTHS))
    text = value if isinstance(value, str) else ",".join(map(str, value)) \
        if isinstance(value, (list, tuple)) and value else ""
    if not text or isinstance(value, bool):
        raise UsageError(f"{spec.name}: copy_lengths = {value!r}: expected passage lengths "
                         "in tokens such as [64, 512]")
    return tuple(sorted(parse_lengths(text)))


@dataclass(frozen=True)
class CopyCell:
    cell: Cell
    copy_length: int

    @property
    def label(self) -> str:
        c = self.cell
        return f"L{c.length}/P{self.copy_length}/D{c.depth:g}/T{c.trial}"


def fits(length: int, copy_length: int, spec: TaskSpec, max_context: int | None) -> bool:
    budget = answer_budget(copy_length, spec.max_tokens)
    return max_context is None or length + budget <= max_context


def cells(spec: TaskSpec, max_context: int | None) -> list[CopyCell]:
    grid = Grid.from_spec(spec)
    found = [CopyCell(Cell(length, depth, trial), size) for length in grid.lengths
             for size in copy_lengths(spec) if fits(length, size, spec, max_context)
             for depth in grid.depths for trial in range(grid.trials)]
    return found if spec.limit is None else found[: spec.limit]


# ---------------------------------------------------------------- scoring


def clean(output: str, number: int | None) -> str:
    """The answer without thinking, outer whitespace, or a leading "[3]" / "Paragraph 3:"."""
    text = strip_thinking(output).strip()
    if number is not None:
        label = re.compile(rf"^(?:\[\s*{number}\s*\]|paragraph\s+{number}\s*[:.)-])\s*", re.I)
        text = label.sub("", text, count=1)
    return text


def word_diff(expected: Sequence[str], got: Sequence[str]) -> dict[str, Any]:
    """Word-level SequenceMatcher figures of an answer against the passage."""
    matcher = SequenceMatcher(None, list(expected), list(got), autojunk=False)
    substituted = missing = extra = 0
    first = None
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        first = i1 if first is None else first
        common = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        substituted += common
        missing += (i2 - i1) - common
        extra += (j2 - j1) - common
    return {"similarity": round(matcher.ratio(), 6), "first_error_word": first,
            "substituted_words": substituted, "missing_words": missing,
            "extra_words": extra}


class Copy:
    name = "copy"
    description = ("reproduce paragraph k of a long document verbatim: exact copies, word "
                   "similarity, first error, substituted words by length")

    def build(self, spec: TaskSpec, ctx: BuildContext) -> list[Item]:
        grid, counter = Grid.from_spec(spec), ctx.count_tokens or estimate_tokens
        chosen = cells(spec, ctx.max_context)
        passages = {c: make_passage(prose(f"{grid.seed}/copy/{c.label}"), c.copy_length, counter)
                    for c in chosen}
        items: list[Item] = []
        for size in copy_lengths(spec):
            mine = [c for c in chosen if c.copy_length == size]
            jobs = [(c.cell, grid.stream(c.cell.trial), self._layout(passages[c], c.cell.depth,
                                                                     grid.stream(c.cell.trial)))
                    for c in mine]
            sized = size_grid(jobs, ctx.count_tokens, spec.name)
            items += [self._item(spec, c, passages[c], s) for c, s in zip(mine, sized, strict=True)]
        return items

    @staticmethod
    def _layout(passage: Passage, depth: float, stream: Prose) -> Layout:
        layout = Document(passage, depth)
        return lambda n: layout.messages(stream, n)

    @staticmethod
    def _item(spec: TaskSpec, where: CopyCell, passage: Passage, sized: Sized) -> Item:
        cell = sized.cell
        stream = Grid.from_spec(spec).stream(cell.trial)
        paragraphs, at = Document(passage, cell.depth).paragraphs(stream, sized.fit.count)
        meta = {
            "target_tokens": cell.length, "measured_tokens": sized.fit.tokens,
            "depth": cell.depth_value, "trial": cell.trial, "copy_tokens": where.copy_length,
            "passage_tokens": passage.tokens, "passage_words": len(passage.text.split()),
            "paragraph": at + 1, "paragraphs": len(paragraphs),
            "position": round(at / max(len(paragraphs) - 1, 1), 4),
            "filler_sentences": sized.fit.count,
        }
        return Item(task=spec.name, item_id=f"{spec.name}/{where.label}", messages=sized.messages,
                    reference=passage.text, meta=meta,
                    max_tokens=answer_budget(passage.tokens, spec.max_tokens))

    def score(self, item: Item, output: str) -> Score:
        expected = (item.reference or "").split()
        text = clean(output, item.meta.get("paragraph"))
        diff = word_diff(expected, text.split())
        exact = text.split() == expected
        return Score(extracted=text, correct=exact, meta={"score": diff["similarity"], **diff})

    def skipped_lengths(self, spec: TaskSpec, ctx: BuildContext) -> list[int]:
        shortest = min(copy_lengths(spec))
        return [n for n in Grid.from_spec(spec).lengths
                if not fits(n, shortest, spec, ctx.max_context)]


ADAPTER = Copy()
