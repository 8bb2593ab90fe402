"""Pairs: the same item answered by two runs, matched by (task, item_id), and how far their
answers agree (identical, shared-prefix ratio, first difference).

The shared-prefix ratio of a pair is its common prefix over the longer answer, in
characters, with two empty answers scored 1 (identical); drift averages it over pairs. The
widely copied FP8 KV-cache tutorial script computes another figure: it divides by the length
of the first file's answer and scores two empty answers 0."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter

import msgspec

from kveval.errors import IncomparableError
from kveval.formats.records import ItemRecord
from kveval.judge.sides import Side

KEY = attrgetter("task", "item_id")  # a record's key, made in C
_TASK, _ID, _BASE_TASK = attrgetter("task"), attrgetter("item_id"), attrgetter("base.task")


def shared_prefix_length(a: str, b: str) -> int:
    """Characters the two texts share from the start: a binary search on slices compared in
    C (os.path.commonprefix walks character by character in Python)."""
    if a == b:
        return len(a)
    low, high = 0, min(len(a), len(b))  # a[:low] == b[:low]; the answer is at most high
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def prefix_ratio(a: str, b: str) -> float:
    """Common prefix length over the longer text; two empty texts are identical (1.0).
    Not the tutorial's figure, which divides by the first text's length and gives 0 there."""
    longest = max(len(a), len(b))
    return shared_prefix_length(a, b) / longest if longest else 1.0


class Pair(msgspec.Struct, frozen=True, gc=False):
    """The same item answered in the baseline and in another run; how far the answers
    agree is worked out once, when the pair is made (`Pair.of`). A msgspec Struct: built in
    C, and without the collector's bookkeeping (it refers to records only)."""

    base: ItemRecord
    other: ItemRecord
    identical: bool
    shared: int  # characters the two answer texts share from the start

    @classmethod
    def of(cls, base: ItemRecord, other: ItemRecord) -> Pair:
        a, b = base.output, other.output
        if a is None or b is None:
            return cls(base, other, False, shared_prefix_length(a or "", b or ""))
        if a == b:
            return cls(base, other, True, len(a))
        return cls(base, other, False, shared_prefix_length(a, b))

    @property
    def key(self) -> tuple[str, str]:
        return self.base.key

    @property
    def base_text(self) -> str:
        return self.base.output or ""

    @property
    def other_text(self) -> str:
        return self.other.output or ""

    @property
    def answered(self) -> bool:
        """Both runs gave an answer text; `output: null` (a reasoning server cut at its token
        budget) is no answer, so it never counts as identical to another null."""
        return self.base.output is not None and self.other.output is not None

    @property
    def prefix_ratio(self) -> float:
        """Common prefix over the longer answer (prefix_ratio); 0 without both answers."""
        a, b = self.base.output, self.other.output
        if a is None or b is None:
            return 0.0
        longest = max(len(a), len(b))
        return self.shared / longest if longest else 1.0

    @property
    def first_difference(self) -> int | None:
        """Character position of the first difference; None when the answers are identical."""
        return None if self.identical else self.shared


@dataclass(frozen=True)
class Pairing:
    pairs: tuple[Pair, ...]  # answered (status ok) in both runs
    only_base: int  # items only the baseline has
    only_other: int  # items only the other run has
    with_errors: int  # items in both runs, left out because at least one is an error


def matched(base: Sequence[ItemRecord], other: Sequence[ItemRecord],
            ) -> tuple[list[ItemRecord | None], int]:
    """The other run's record of each of the baseline's (task, item_id), None where it has
    none, and how many items it holds; keyed by item_id alone where both hold one task."""
    key = _ID if len(set(map(_TASK, base)) | set(map(_TASK, other))) == 1 else KEY
    others = dict(zip(map(key, other), other, strict=True))
    return list(map(others.get, map(key, base))), len(others)


def pair_sides(base: Side, other: Side) -> Pairing:
    """Pair by (task, item_id); a pair whose prompts differ makes the runs incomparable."""
    theirs, held = matched(base.items, other.items)
    mismatched = [a.key for a, b in zip(base.items, theirs, strict=True)
                  if b is not None and a.prompt_sha256 != b.prompt_sha256]
    if mismatched:
        task, item_id = mismatched[0]
        raise IncomparableError(
            f"{len(mismatched)} paired item(s) have different prompts in {base.path} and "
            f"{other.path} (prompt_sha256 differs), e.g. {task} {item_id}"
        )
    pairs = tuple(Pair.of(a, b) for a, b in zip(base.items, theirs, strict=True)
                  if b is not None and a.status == "ok" and b.status == "ok")
    both = len(theirs) - theirs.count(None)
    return Pairing(pairs=pairs, only_base=len(base.items) - both, only_other=held - both,
                   with_errors=both - len(pairs))


def most_diverged(pairs: Sequence[Pair], count: int) -> tuple[Pair, ...]:
    if count == 0:
        return ()
    changed = [p for p in pairs if not p.identical]
    return tuple(sorted(changed, key=lambda p: (p.prefix_ratio, p.key))[:count])


def by_task(pairs: Iterable[Pair]) -> dict[str, list[Pair]]:
    pairs = list(pairs)
    tasks = set(map(_BASE_TASK, pairs))
    if len(tasks) == 1:  # most runs: one task
        return {tasks.pop(): pairs}
    grouped: dict[str, list[Pair]] = {}
    for pair in pairs:
        grouped.setdefault(pair.base.task, []).append(pair)
    return grouped
