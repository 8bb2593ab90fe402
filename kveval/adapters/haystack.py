"""The haystack: seeded synthetic prose, fitted to a length in the server's own tokens.

The prose comes from kveval's own word lists and sentence templates, driven by
`random.Random(seed)` with a string seed, so the same seed gives byte-identical text on
every machine and Python version. It holds no digits at all, so any number in a prompt is
one the task put there. A stream of sentences grows on demand and is shared by every
length: the 4k haystack of a trial is the start of its 128k haystack.

Also here, shared by the long-context adapters: the length x depth x trial grid they
build, and sizing every cell's filler so the measured prompt lands within 2% below its
target length.
"""

from __future__ import annotations

import bisect
import functools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kveval.adapters.base import BuildContext, Message, TaskSpec, TokenCounter
from kveval.errors import UsageError

ADJECTIVES = (
    "quiet", "narrow", "ancient", "gentle", "crooked", "bright", "hollow", "patient", "distant",
    "humble", "rusty", "silent", "restless", "tidy", "weathered", "modest", "stubborn", "faded",
    "careful", "sturdy", "lonely", "busy", "curious", "heavy", "slender", "broad", "muddy",
    "windy", "golden", "pale", "steep", "shallow", "crowded", "empty", "fragrant", "polished",
    "wooden", "plain", "noisy", "drowsy", "cheerful", "solemn", "clumsy", "eager", "frosty",
    "rugged", "humid", "dusty", "simple", "familiar", "stately", "spare", "tangled", "smooth",
)
NOUNS = (
    "river", "lantern", "orchard", "bridge", "harbor", "meadow", "cottage", "village", "market",
    "garden", "workshop", "window", "ladder", "basket", "wagon", "chapel", "library", "courtyard",
    "kettle", "blanket", "fence", "hillside", "valley", "pathway", "tower", "fountain", "barn",
    "staircase", "ferry", "canal", "forest", "quarry", "mill", "bakery", "tavern", "lighthouse",
    "cellar", "balcony", "hedge", "pond", "shed", "cart", "loom", "anvil", "satchel", "compass",
    "letter", "notebook", "teapot", "rooftop", "doorway", "attic", "shelter", "granary",
)
PEOPLE = (
    "the baker", "the weaver", "a traveler", "the ferryman", "an old shepherd", "the carpenter",
    "the schoolteacher", "a young clerk", "the innkeeper", "the gardener", "a tired courier",
    "the potter", "the blacksmith", "a quiet scholar", "the fisherman", "the miller",
    "the librarian", "a wandering poet", "the mapmaker", "the tailor", "a cautious merchant",
    "the bellringer", "the stonemason", "the beekeeper", "a patient nurse", "the glassblower",
)
TRANSITIVE = (
    ("carry", "carried"), ("paint", "painted"), ("mend", "mended"), ("visit", "visited"),
    ("describe", "described"), ("sweep", "swept"), ("study", "studied"), ("follow", "followed"),
    ("measure", "measured"), ("polish", "polished"), ("guard", "guarded"), ("admire", "admired"),
    ("repair", "repaired"), ("sketch", "sketched"), ("clean", "cleaned"), ("search", "searched"),
    ("open", "opened"), ("leave", "left"), ("find", "found"), ("build", "built"),
    ("remember", "remembered"), ("notice", "noticed"), ("watch", "watched"), ("move", "moved"),
)
INTRANSITIVE = (
    "waited", "wandered", "rested", "lingered", "listened", "hurried", "paused", "worked",
    "sang", "slept", "laughed", "walked", "stayed", "returned", "whistled", "settled",
    "dozed", "gathered", "spoke", "traveled",
)
ADVERBS = (
    "slowly", "quietly", "carefully", "patiently", "gladly", "calmly", "briefly", "gently",
    "eagerly", "rarely", "often", "happily", "steadily", "softly", "politely", "boldly",
)
PREPOSITIONS = (
    "near", "beside", "behind", "across", "inside", "beyond", "below", "above", "around",
    "along", "under", "past",
)
TIMES = (
    "in the morning", "after the rain", "before dusk", "during the long winter", "at noon",
    "on a cold evening", "late at night", "in early spring", "after the harvest",
    "before the market opened", "when the bells rang", "at first light", "in the autumn",
    "after supper", "during the storm", "on a bright afternoon",
)
CONNECTIVES = (
    "and", "while", "because", "although", "so", "until", "since", "after",
)
THINGS_SAID = (
    "the weather would change", "the road was longer than it looked",
    "the old ways were the best", "nobody had kept the keys", "the water was too cold",
    "a letter had gone missing", "the festival would return", "the roof needed work",
    "the map was wrong", "the lamps burned too bright", "the season had come early",
    "the stories were mostly true",
)

TEMPLATES = (
    "The {adj} {noun} stood {prep} the {noun2} {time}.",
    "{Person} {past} the {adj} {noun} {adverb}.",
    "{Time}, {person} {intrans} {prep} the {adj} {noun}.",
    "In the {adj} {noun}, {person} kept {a_adj2} {noun2} for visitors.",
    "When the {noun} grew {adj}, {person} {past} the {noun2}.",
    "It was said that {saying}.",
    "{Person} {intrans} {adverb} {conn} {person2} {past} the {noun}.",
    "Nobody could {base} the {adj} {noun} {time}.",
    "{A_adj} {noun} lay {prep} the {noun2}, and {person} {past} it {adverb}.",
    "Most days {person} {intrans} {prep} the {noun} {time}.",
    "{Person} once told {person2} that {saying}.",
    "There was {a_adj} {noun} {prep} the {adj2} {noun2}.",
    "The {noun} seemed {adj} {time}, {conn} {person} {intrans} {adverb}.",
    "Some believed that {person} would {base} the {noun} {time}.",
)


def _article(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _capital(text: str) -> str:
    return text[0].upper() + text[1:]


def _plain(word: str) -> str:
    return word


def _capital_article(word: str) -> str:
    return _capital(_article(word))


# Each placeholder of TEMPLATES: the words it draws from, and how a drawn word is shaped.
_SLOTS: dict[str, tuple[Sequence[str], Callable[[str], str]]] = {
    "adj": (ADJECTIVES, _plain), "adj2": (ADJECTIVES, _plain),
    "a_adj": (ADJECTIVES, _article), "a_adj2": (ADJECTIVES, _article),
    "A_adj": (ADJECTIVES, _capital_article),
    "noun": (NOUNS, _plain), "noun2": (NOUNS, _plain),
    "person": (PEOPLE, _plain), "person2": (PEOPLE, _plain), "Person": (PEOPLE, _capital),
    "past": (tuple(past for _, past in TRANSITIVE), _plain),
    "base": (tuple(base for base, _ in TRANSITIVE), _plain),
    "intrans": (INTRANSITIVE, _plain), "adverb": (ADVERBS, _plain),
    "prep": (PREPOSITIONS, _plain), "time": (TIMES, _plain), "Time": (TIMES, _capital),
    "conn": (CONNECTIVES, _plain), "saying": (THINGS_SAID, _plain),
}


class _Draws(dict[str, str]):
    """Fills a template's placeholders in the order it names them, one draw each."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self._random = rng.random

    def __missing__(self, key: str) -> str:
        words, shape = _SLOTS[key]
        self[key] = value = shape(words[int(self._random() * len(words))])
        return value


def _sentence(rng: random.Random) -> str:
    template = TEMPLATES[int(rng.random() * len(TEMPLATES))]
    return template.format_map(_Draws(rng))


class Prose:
    """A seeded stream of sentences joined by single spaces; it grows on demand.

    The text is a pure function of the seed: asking for more sentences never changes the
    ones already made.
    """

    def __init__(self, seed: str) -> None:
        self._rng = random.Random(seed)
        self._sentences: list[str] = []
        self._ends: list[int] = [0]  # _ends[k]: characters of the first k sentences, joined

    def _grow(self, count: int) -> None:
        while len(self._sentences) < count:
            sentence = _sentence(self._rng)
            gap = 1 if self._sentences else 0
            self._sentences.append(sentence)
            self._ends.append(self._ends[-1] + gap + len(sentence))

    def sentences(self, start: int, stop: int) -> list[str]:
        self._grow(stop)
        return self._sentences[start:stop]

    def chars(self, count: int) -> int:
        """Characters of the first `count` sentences, joined by spaces."""
        self._grow(count)
        return self._ends[count]

    def count_for(self, chars: float) -> int:
        """The number of sentences whose joined length is closest to `chars` (at least 0)."""
        if chars <= 0:
            return 0
        while self._ends[-1] < chars:
            mean = self._ends[-1] / len(self._sentences) if self._sentences else 64.0
            self._grow(len(self._sentences) + int((chars - self._ends[-1]) / mean) + 16)
        k = bisect.bisect_left(self._ends, chars)
        if k > 0 and chars - self._ends[k - 1] < self._ends[k] - chars:
            return k - 1
        return k

    def boundary(self, count: int, fraction: float) -> int:
        """The sentence boundary (0..count) nearest `fraction` of the first `count` sentences."""
        self._grow(count)
        goal = fraction * self._ends[count]
        k = bisect.bisect_left(self._ends, goal, 0, count + 1)
        if k > 0 and (k > count or goal - self._ends[k - 1] <= self._ends[k] - goal):
            return k - 1
        return min(k, count)


@functools.lru_cache(maxsize=32)
def prose(seed: str) -> Prose:
    """The shared stream for a seed (pure: the same seed always gives the same text)."""
    return Prose(seed)


def weave(stream: Prose, count: int, inserts: Sequence[tuple[float, str]]) -> str:
    """The first `count` sentences with each (depth fraction, sentence) inserted at the
    nearest sentence boundary; inserts at the same boundary keep their given order."""
    placed = sorted(
        ((stream.boundary(count, fraction), order, text)
         for order, (fraction, text) in enumerate(inserts)),
    )
    parts: list[str] = []
    start = 0
    for k, _, text in placed:
        parts.extend(stream.sentences(start, k))
        parts.append(text)
        start = k
    parts.extend(stream.sentences(start, count))
    return " ".join(parts)


# ---------------------------------------------------------------- sizing in tokens


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A rough count for building without a server: 4 characters a token, 8 per message."""
    return sum(8 + len(m.get("content", "")) // 4 for m in messages)


@dataclass(frozen=True)
class Fit:
    count: int  # filler sentences
    tokens: int  # the measured prompt at that count


def token_window(target: int, tolerance: float) -> tuple[int, int]:
    """The accepted measured lengths: within `tolerance` below the target, never above it."""
    return math.ceil(target * (1.0 - tolerance)), target


def fit_filler(
    measure: Callable[[int], int],
    stream: Prose,
    target: int,
    start: int | None = None,
    tolerance: float = 0.02,
    max_calls: int = 12,
) -> Fit:
    """The filler size whose measured prompt lands in [target*(1-tolerance), target].

    `measure(n)` counts the whole prompt built with n filler sentences (one call to the
    server's tokenizer). Secant steps on characters -> tokens aim at the middle of the
    window; a warm `start` (the size that fit a sibling item) usually needs one call.
    When no size fits (sentences too coarse, or the task alone exceeds the target) the
    largest size not above the target is returned, or 0.
    """
    low, high = token_window(target, tolerance)
    aim = (low + high) / 2
    seen: dict[int, int] = {}
    n = 0 if start is None else max(start, 0)
    for _ in range(max_calls):
        seen[n] = tokens = measure(n)
        if low <= tokens <= high:
            return Fit(n, tokens)
        below = max((k for k, t in seen.items() if t < low), default=None)
        above = min((k for k, t in seen.items() if t > high), default=None)
        if above is not None and (above == 0 or (below is not None and above - below <= 1)):
            break
        n = _next_guess(stream, seen, aim, below, above)
    fitting = [k for k, t in seen.items() if t <= high]
    best = max(fitting) if fitting else 0
    return Fit(best, seen[best] if best in seen else measure(best))


def _next_guess(stream: Prose, seen: dict[int, int], aim: float,
                below: int | None, above: int | None) -> int:
    """Interpolate (or extrapolate) tokens over characters; stay strictly inside the bracket."""
    other: int | None
    if below is not None and above is not None:
        ref, other = below, above
    else:
        ordered = sorted(seen, key=lambda k: abs(seen[k] - aim))
        ref = ordered[0]
        other = ordered[1] if len(ordered) > 1 else None
    slope = 0.25  # tokens per character of English-like prose, until two points say more
    if other is not None and stream.chars(other) != stream.chars(ref):
        measured = (seen[other] - seen[ref]) / (stream.chars(other) - stream.chars(ref))
        slope = measured if measured > 0 else slope
    guess = stream.count_for(stream.chars(ref) + (aim - seen[ref]) / slope)
    lo = below + 1 if below is not None else 0
    hi = above - 1 if above is not None else max(guess, lo)
    guess = min(max(guess, lo), hi)
    while guess in seen and lo <= hi:  # never measure the same size twice
        guess = guess + 1 if seen[guess] < aim else guess - 1
        if guess < lo or guess > hi:
            return (lo + hi) // 2
    return guess


# ---------------------------------------------------------------- the length x depth grid

DEFAULT_LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768)
DEFAULT_DEPTHS = (0, 10, 25, 50, 75, 90, 100)
DEFAULT_TRIALS = 3
DEFAULT_SEED = 1234
TOLERANCE = 0.02  # the prompt lands within 2% of its target length, never above it
# Sizing aims within 1.5%: a calibrated counter's estimates (kveval.run.tokens) then still land
# within 2% of what the server counts.
SIZING_WINDOW = 0.015
_UNITS = {"": 1, "k": 1024, "m": 1024 * 1024}


def parse_lengths(text: str) -> list[int]:
    """"4k,16k,128k,3000" -> [4096, 16384, 131072, 3000] (k = 1024); repeats dropped."""
    lengths: list[int] = []
    parts = [part.strip().lower() for part in str(text).split(",")]
    for part in parts:
        unit = part[-1:] if part[-1:] in ("k", "m") else ""
        number = part[: len(part) - len(unit)].strip()
        try:
            value = float(number) * _UNITS[unit] if number else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 1 or value != int(value):
            raise UsageError(f"lengths {text!r}: {part!r} is not a length in tokens "
                             "(e.g. 4k,16k,128k,3000; k = 1024)")
        if int(value) not in lengths:
            lengths.append(int(value))
    return lengths


def parse_depths(text: str) -> list[float]:
    """"0,25,50" -> [0, 25, 50]: percents of the document from its start."""
    try:
        depths = [float(part) for part in str(text).split(",")]
    except ValueError:
        raise UsageError(f"depths {text!r}: expected percents such as 0,25,50,75,100") from None
    return [_depth(d, text) for d in depths]


def _depth(value: Any, where: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100:
        raise UsageError(f"depths {where!r}: each depth is a percent from 0 to 100")
    return float(value)


def _lengths_param(value: Any) -> list[int]:
    if isinstance(value, str):
        return parse_lengths(value)
    if not isinstance(value, (list, tuple)) or not value:
        raise UsageError(f"lengths {value!r}: expected a list such as [4096, 16384] or \"4k,16k\"")
    found: list[int] = []
    for entry in value:
        if isinstance(entry, bool) or not isinstance(entry, (int, str)):
            raise UsageError(f"lengths {value!r}: {entry!r} is not a length in tokens")
        found += parse_lengths(str(entry))
    return found


def _depths_param(value: Any) -> list[float]:
    if isinstance(value, str):
        return parse_depths(value)
    if not isinstance(value, (list, tuple)) or not value:
        raise UsageError(f"depths {value!r}: expected a list of percents such as [0, 50, 100]")
    return [_depth(entry, value) for entry in value]


def _positive_int(params: dict[str, Any], key: str, default: int) -> int:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{key} = {value!r}: expected a whole number of at least 1")
    return value


@dataclass(frozen=True)
class Cell:
    """One item's place in the grid: target length in tokens, depth in percent, trial."""

    length: int
    depth: float
    trial: int

    @property
    def label(self) -> str:
        depth = f"{self.depth:g}"
        return f"L{self.length}/D{depth}/T{self.trial}"

    @property
    def depth_value(self) -> int | float:
        """The depth as recorded: 50 rather than 50.0 when whole."""
        return int(self.depth) if self.depth == int(self.depth) else self.depth


@dataclass(frozen=True)
class Grid:
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    trials: int
    seed: int | str

    @classmethod
    def from_spec(cls, spec: TaskSpec) -> Grid:
        params = spec.params
        lengths = _lengths_param(params.get("lengths", list(DEFAULT_LENGTHS)))
        depths = _depths_param(params.get("depths", list(DEFAULT_DEPTHS)))
        seed = params.get("seed", DEFAULT_SEED)
        if isinstance(seed, bool) or not isinstance(seed, (int, str)):
            raise UsageError(f"seed = {seed!r}: expected a whole number")
        return cls(tuple(sorted(set(lengths))), tuple(sorted(set(depths))),
                   _positive_int(params, "trials", DEFAULT_TRIALS), seed)

    def fits(self, length: int, spec: TaskSpec, max_context: int | None) -> bool:
        return max_context is None or length <= max_context - spec.max_tokens

    def cells(self, spec: TaskSpec, max_context: int | None) -> list[Cell]:
        """Every cell whose length fits the server, by length, depth and trial; spec.limit
        keeps the first N."""
        cells = [Cell(length, depth, trial) for length in self.lengths
                 if self.fits(length, spec, max_context)
                 for depth in self.depths for trial in range(self.trials)]
        return cells if spec.limit is None else cells[: spec.limit]

    def stream(self, trial: int) -> Prose:
        return prose(f"{self.seed}/haystack/T{trial}")

    def rng(self, variant: str, cell: Cell) -> random.Random:
        """The seeded source of a cell's own content (keys, values, records)."""
        return random.Random(f"{self.seed}/{variant}/{cell.label}")


def skipped_lengths(spec: TaskSpec, ctx: BuildContext) -> list[int]:
    """The lengths above the server's context minus the answer budget: not built."""
    grid = Grid.from_spec(spec)
    return [n for n in grid.lengths if not grid.fits(n, spec, ctx.max_context)]


# ---------------------------------------------------------------- sizing a whole grid

Layout = Callable[[int], tuple[Message, ...]]  # filler sentences -> the request's messages


@dataclass(frozen=True)
class Sized:
    cell: Cell
    messages: tuple[Message, ...]
    fit: Fit


def size_grid(
    jobs: Sequence[tuple[Cell, Prose, Layout]],
    count: TokenCounter | None,
    task: str,
) -> list[Sized]:
    """Fit each cell's filler to its length; a cell starts from its trial's last fit at the
    same length (or the previous length, scaled), so most cells cost one count."""
    counter = count or estimate_tokens
    last: dict[tuple[int, int], int] = {}
    sized: list[Sized] = []
    for cell, stream, layout in jobs:
        start = _warm_start(last, cell)
        fit = fit_filler(_measure(counter, layout), stream, cell.length, start, SIZING_WINDOW)
        if fit.tokens > cell.length:
            raise UsageError(f"{task}: length {cell.length} is too short: the task's own text "
                             f"takes {fit.tokens} tokens")
        last[(cell.length, cell.trial)] = fit.count
        sized.append(Sized(cell, layout(fit.count), fit))
    return sized


def _measure(counter: TokenCounter, layout: Layout) -> Callable[[int], int]:
    return lambda n: counter(layout(n))


def _warm_start(last: dict[tuple[int, int], int], cell: Cell) -> int | None:
    if (cell.length, cell.trial) in last:
        return last[(cell.length, cell.trial)]
    shorter = [length for length, trial in last if trial == cell.trial and length < cell.length]
    if not shorter:
        return None
    nearest = max(shorter)
    return round(last[(nearest, cell.trial)] * cell.length / nearest)
