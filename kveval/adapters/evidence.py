"""Evidence location: many similar experiment records in a long document; give one's value.

Each record has an ordinal, a letter code and a measured value such as 0.7342; the values
share their leading digits and differ in one or two others, so a slip of attention or of
precision yields a plausible wrong number. The asked record sits at the cell's depth, the
others evenly through the document, all padded with the haystack's prose to the target
length. The question names the record by ordinal ("the third experiment") or by code.

An answer is classed: `exact`; `wrong_record` (another record's value: an attention
failure); `corrupted` (a number in no record, with its digit edit distance to the true
value: a precision failure); `no_answer`.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from kveval.adapters.base import BuildContext, Item, Message, Score, TaskSpec
from kveval.adapters.haystack import Cell, Grid, Layout, Sized, size_grid
from kveval.adapters.haystack import skipped_lengths as skipped_lengths
from kveval.adapters.needle import edit_distance, position
from kveval.adapters.prose import Prose, weave
from kveval.adapters.text import strip_thinking
from kveval.errors import UsageError

ORDINALS = (
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
    "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth",
    "seventeenth", "eighteenth", "nineteenth", "twentieth", "twenty-first", "twenty-second",
    "twenty-third", "twenty-fourth",
)
TEAMS = (
    "harbor", "orchard", "north wing", "river", "lantern", "hillside", "workshop", "east annex",
    "meadow", "tower", "courtyard", "cellar",
)
QUANTITIES = (
    "reflectance", "damping ratio", "yield fraction", "absorption coefficient",
    "purity index", "transfer efficiency", "retention ratio", "clarity score",
)
RECORD_TEMPLATES = (
    "Report on the {ordinal} experiment, code {code}: the {team} team measured a {quantity} "
    "of {value}.",
    "Notebook entry for the {ordinal} experiment ({code}): after careful calibration the "
    "{team} team recorded a {quantity} of {value}.",
    "The {ordinal} experiment, filed under code {code}, gave a {quantity} of {value} "
    "according to the {team} team.",
)
_SYLLABLES = tuple(c + v for c in "BDFGKLMNPRSTVZ" for v in "AEIOU")
DEFAULT_RECORDS = 10
DEFAULT_ASK = ("ordinal", "code")
ORDINAL, CODE = "ordinal", "code"

_INTRO = ("Below is a long document: a laboratory notebook with notes and experiment "
          "reports. Read it, then answer the question after it.")
_QUESTIONS = {
    ORDINAL: "What value did the {ordinal} experiment measure? Answer with the number only.",
    CODE: "What value did the experiment with code {code} measure? Answer with the number only.",
}
# 0.7342, .7342, 0,7342 (decimal comma), or a plain whole number.
_NUMBER = re.compile(r"(?<![\w.,])(?:\d+[.,]\d+|[.,]\d+|\d+)(?![\w])")


@dataclass(frozen=True)
class Record:
    ordinal: str
    code: str
    value: str
    fraction: float  # depth in the document, 0..1

    def sentence(self, template: str, team: str, quantity: str) -> str:
        return template.format(ordinal=self.ordinal, code=self.code, value=self.value,
                               team=team, quantity=quantity)


@dataclass(frozen=True)
class Plan:
    """A cell's records in document order, the asked one, and how the question names it."""

    records: tuple[Record, ...]
    sentences: tuple[str, ...]
    target: int  # index into records
    ask: str

    @property
    def asked(self) -> Record:
        return self.records[self.target]

    def question(self) -> str:
        return _QUESTIONS[self.ask].format(ordinal=self.asked.ordinal, code=self.asked.code)


def record_values(rng: random.Random, count: int) -> list[str]:
    """`count` distinct values 0.dddd sharing the first digit; each differs from a base in
    one or two of the last three digits; no trailing zero."""
    base = [rng.randrange(1, 10), rng.randrange(10), rng.randrange(10), rng.randrange(1, 10)]
    values = ["0." + "".join(map(str, base))]
    while len(values) < count:
        digits = list(base)
        for place in rng.sample((1, 2, 3), rng.choice((1, 2))):
            choices = [d for d in range(1 if place == 3 else 0, 10) if d != base[place]]
            digits[place] = rng.choice(choices)
        value = "0." + "".join(map(str, digits))
        if value not in values:
            values.append(value)
    rng.shuffle(values)
    return values


def record_codes(rng: random.Random, count: int) -> list[str]:
    codes: list[str] = []
    while len(codes) < count:
        code = "".join(rng.choices(_SYLLABLES, k=2)) + "-" + "".join(rng.choices(_SYLLABLES, k=2))
        if code not in codes:
            codes.append(code)
    return codes


def make_plan(rng: random.Random, count: int, depth: float, ask: str) -> Plan:
    """The asked record at `depth` percent; the others evenly spaced through the document."""
    fractions = sorted([(depth / 100, 0)] + [((j + 0.5) / (count - 1), 1)
                                              for j in range(count - 1)])
    target = fractions.index((depth / 100, 0))
    values, codes = record_values(rng, count), record_codes(rng, count)
    records = tuple(Record(ORDINALS[i], codes[i], values[i], fraction)
                    for i, (fraction, _) in enumerate(fractions))
    sentences = tuple(r.sentence(rng.choice(RECORD_TEMPLATES), rng.choice(TEAMS),
                                 rng.choice(QUANTITIES)) for r in records)
    return Plan(records, sentences, target, ask)


def messages(plan: Plan, stream: Prose, filler: int) -> tuple[Message, ...]:
    inserts = [(r.fraction, s) for r, s in zip(plan.records, plan.sentences, strict=True)]
    document = weave(stream, filler, inserts)
    content = f"{_INTRO}\n\n<document>\n{document}\n</document>\n\n{plan.question()}"
    return ({"role": "user", "content": content},)


# ---------------------------------------------------------------- scoring


def _canonical(text: str) -> str | None:
    """"0,7342" / ".7342" / "0.73420" -> "0.7342"; None when not a number."""
    try:
        number = Decimal(text.replace(",", "."))
    except InvalidOperation:
        return None
    return f"{number.normalize():f}"


def extract_value(output: str) -> str | None:
    """The answer's first decimal number (canonical), else its first number, else None."""
    found = _NUMBER.findall(strip_thinking(output))
    decimal = [n for n in found if "." in n or "," in n]
    chosen = (decimal or found or [None])[0]
    return _canonical(chosen) if chosen is not None else None


def classify(extracted: str | None, value: str, values: list[str]) -> dict[str, Any]:
    if extracted is None:
        return {"evidence_class": "no_answer", "edit_distance": None}
    if Decimal(extracted) == Decimal(value):
        return {"evidence_class": "exact", "edit_distance": 0}
    kind = "wrong_record" if any(Decimal(extracted) == Decimal(v) for v in values) else "corrupted"
    return {"evidence_class": kind, "edit_distance": edit_distance(extracted, value)}


# ---------------------------------------------------------------- the adapter


def _records(spec: TaskSpec) -> int:
    count = spec.params.get("records", DEFAULT_RECORDS)
    if isinstance(count, bool) or not isinstance(count, int) or not 2 <= count <= len(ORDINALS):
        raise UsageError(f"{spec.name}: records = {count!r}: expected 2 to {len(ORDINALS)}")
    return count


def _asks(spec: TaskSpec) -> tuple[str, ...]:
    asks = spec.params.get("ask", list(DEFAULT_ASK))
    asks = [asks] if isinstance(asks, str) else asks
    if not isinstance(asks, list) or not asks or any(a not in _QUESTIONS for a in asks):
        raise UsageError(f"{spec.name}: ask = {asks!r}: expected a list of "
                         f"{' and/or '.join(map(repr, _QUESTIONS))}")
    return tuple(asks)


class Evidence:
    name = "evidence"
    description = ("one record's value among near-identical records in a long document: "
                   "exact, wrong_record, corrupted, no_answer")

    def build(self, spec: TaskSpec, ctx: BuildContext) -> list[Item]:
        grid, count, asks = Grid.from_spec(spec), _records(spec), _asks(spec)
        plans = {cell: make_plan(grid.rng("evidence", cell), count, cell.depth,
                                 asks[cell.trial % len(asks)])
                 for cell in grid.cells(spec, ctx.max_context)}
        jobs = [(cell, grid.stream(cell.trial), self._layout(plan, grid.stream(cell.trial)))
                for cell, plan in plans.items()]
        sized = size_grid(jobs, ctx.count_tokens, spec.name)
        return [self._item(spec, plans[s.cell], s) for s in sized]

    @staticmethod
    def _layout(plan: Plan, stream: Prose) -> Layout:
        return lambda n: messages(plan, stream, n)

    @staticmethod
    def _item(spec: TaskSpec, plan: Plan, sized: Sized) -> Item:
        cell: Cell = sized.cell
        asked = plan.asked
        content = sized.messages[-1]["content"]
        meta = {
            "target_tokens": cell.length, "measured_tokens": sized.fit.tokens,
            "depth": cell.depth_value, "trial": cell.trial, "variant": plan.ask,
            "record": plan.target + 1, "records": len(plan.records), "ordinal": asked.ordinal,
            "code": asked.code, "values": [r.value for r in plan.records],
            "position": position(content, plan.sentences[plan.target]),
            "filler_sentences": sized.fit.count,
        }
        return Item(task=spec.name, item_id=f"{spec.name}/{cell.label}",
                    messages=sized.messages, reference=asked.value, meta=meta)

    def score(self, item: Item, output: str) -> Score:
        value = item.reference or ""
        extracted = extract_value(output)
        meta = classify(extracted, value, list(item.meta.get("values", [])))
        return Score(extracted=extracted, correct=meta["evidence_class"] == "exact", meta=meta)

    def skipped_lengths(self, spec: TaskSpec, ctx: BuildContext) -> list[int]:
        return skipped_lengths(spec, ctx)


ADAPTER = Evidence()
