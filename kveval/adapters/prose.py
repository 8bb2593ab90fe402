"""Seeded synthetic prose: the filler of the long-context adapters' documents.

The prose comes from kveval's own word lists and sentence templates, driven by
`random.Random(seed)` with a string seed, so the same seed gives byte-identical text on
every machine and Python version. It holds no digits at all, so any number in a prompt is
one the task put there. A stream of sentences grows on demand and is shared by every
length: the 4k haystack of a trial is the start of its 128k haystack.
"""

from __future__ import annotations

import bisect
import functools
import random
from collections.abc import Callable, Sequence

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
