"""Collapse: answers cut at max_tokens, empty answers, runaway length and repetition.

An FP8 KV cache can fail by collapse as well as by wrong answers (outputs that grow to the
token limit, "????////", empty replies). Per task and run: how many answers were truncated
(`finish_reason: length`, whatever the text; a reasoning server's `output: null` cut by its
budget is truncated, never an empty answer), how many are empty (no text, not truncated), the
mean output length, and a repetition score: the share of an answer's word 4-grams (words split
at white space) that repeat an earlier 4-gram of the same answer, averaged over the task's
first 1,000 answers (the same items in every run; the score costs a few microseconds an
answer, and compare reads runs of 100,000).

The gate's collapse checks, truncated answers and empty answers each on its own: the
candidate's count against the pool of the baseline and every noise run on the items all of
them answered (judge/floor.py: item by item, and with the runs' spread); without a noise run
the pool is the baseline alone, and the item-by-item part is the exact one-sided McNemar test.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from kveval.formats.records import ItemRecord
from kveval.judge.floor import CountTest, own_count_test

NGRAM = 4  # words per n-gram in the repetition score
REPETITION_SAMPLE = 1000  # answers per task the repetition score averages over
REPETITION_CHARS = 1 << 20  # characters of an answer the score reads: ~250,000 tokens


def truncated(item: ItemRecord) -> bool:
    return item.finish_reason == "length"


def empty(item: ItemRecord) -> bool:
    """No answer text and not cut at max_tokens."""
    return not truncated(item) and not (item.output or "").strip()


def repetition(text: str, n: int = NGRAM) -> float:
    """Share of the word n-grams that repeat an earlier one in the same text (0 to 1), in
    its first REPETITION_CHARS characters: past any answer budget, and a 100 MB answer of
    words then costs what a 1 MB one does (its n-grams whole took 6.5 GB and 45 s)."""
    words = text[:REPETITION_CHARS].split()
    grams = list(zip(*(words[i:] for i in range(n)), strict=False))
    return 1 - len(set(grams)) / len(grams) if grams else 0.0


@dataclass(frozen=True)
class Collapse:
    """One run's answers to one task (status ok items only)."""

    answers: int
    truncated: int
    empty: int
    mean_length: float | None  # characters; None without answers
    repetition: float | None  # mean repetition score; None without answers

    @property
    def collapsed(self) -> int:
        return self.truncated + self.empty


def collapse_of(items: Sequence[ItemRecord]) -> Collapse:
    texts = [item.output or "" for item in items]
    return Collapse(
        answers=len(items),
        truncated=sum(cut_flags(items)),
        empty=sum(empty_flags(items)),
        mean_length=sum(map(len, texts)) / len(texts) if texts else None,
        repetition=(statistics.fmean(repetition(t) for t in texts[:REPETITION_SAMPLE])
                    if texts else None),
    )


def cut_flags(items: Sequence[ItemRecord]) -> list[bool]:
    """`truncated` of each item, in one pass."""
    return [item.finish_reason == "length" for item in items]


def empty_flags(items: Sequence[ItemRecord]) -> list[bool]:
    """`empty` of each item, in one pass."""
    return [item.finish_reason != "length" and not (item.output or "").strip()
            for item in items]


def length_ratio(candidate: Collapse, baseline: Collapse) -> float | None:
    """The candidate's mean output length over the baseline's."""
    if not baseline.mean_length or candidate.mean_length is None:
        return None
    return candidate.mean_length / baseline.mean_length


@dataclass(frozen=True)
class TaskCollapse:
    """Collapse figures of the runs compared on one task's shared items, and the candidate's
    truncated and empty answers tested against the pool (the baseline and the noise runs)."""

    baseline: Collapse
    candidate: Collapse
    noise: tuple[Collapse, ...]  # one per noise run
    truncated_test: CountTest
    empty_test: CountTest

    @property
    def length_ratio(self) -> float | None:
        return length_ratio(self.candidate, self.baseline)


def flags(runs: Sequence[Sequence[ItemRecord]],
          which: Callable[[Sequence[ItemRecord]], list[bool]]) -> np.ndarray:
    """Runs x items: which of each run's answers are truncated (`cut_flags`) or empty
    (`empty_flags`)."""
    return np.array([which(run) for run in runs], dtype=bool).reshape(len(runs), -1)


def task_collapse(pool: Sequence[Sequence[ItemRecord]], candidate: Sequence[ItemRecord],
                  ) -> TaskCollapse:
    """`pool`: the baseline's and each noise run's records of the items the candidate's
    records hold, in the same order."""
    tests = [own_count_test(flags([candidate], which)[0], flags(pool, which))
             for which in (cut_flags, empty_flags)]
    return TaskCollapse(collapse_of(pool[0]), collapse_of(candidate),
                        tuple(collapse_of(run) for run in pool[1:]), *tests)
