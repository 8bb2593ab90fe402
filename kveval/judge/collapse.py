"""Collapse: answers cut at max_tokens, empty answers, runaway length and repetition.

An FP8 KV cache can fail by collapse as well as by wrong answers (outputs that grow to the
token limit, "????////", empty replies). Per task and run: how many answers were truncated
(`finish_reason: length`, whatever the text; a reasoning server's `output: null` cut by its
budget is truncated, never an empty answer), how many are empty (no text, not truncated), the
mean output length, and a repetition score: the share of an answer's word 4-grams (words split
at white space) that repeat an earlier 4-gram of the same answer, averaged over the task's
first 1,000 answers (the same items in every run; the score costs a few microseconds an
answer, and compare reads runs of 100,000).

The gate's collapse test: the candidate's count of truncated-or-empty answers against the
noise floor's (the same tests as drift), or against the baseline's on the paired items when no
noise run is given (exact one-sided McNemar).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from kveval.formats.records import ItemRecord

NGRAM = 4  # words per n-gram in the repetition score
REPETITION_SAMPLE = 1000  # answers per task the repetition score averages over


def truncated(item: ItemRecord) -> bool:
    return item.finish_reason == "length"


def collapsed(item: ItemRecord) -> bool:
    """Cut at max_tokens or empty: the answers the gate's collapse test counts."""
    return truncated(item) or not (item.output or "").strip()


def repetition(text: str, n: int = NGRAM) -> float:
    """Share of the word n-grams that repeat an earlier one in the same text (0 to 1)."""
    words = text.split()
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
    cut = list(map(truncated, items))
    return Collapse(
        answers=len(items),
        truncated=sum(cut),
        empty=sum(not c and not t.strip() for c, t in zip(cut, texts, strict=True)),
        mean_length=sum(map(len, texts)) / len(texts) if texts else None,
        repetition=(statistics.fmean(repetition(t) for t in texts[:REPETITION_SAMPLE])
                    if texts else None),
    )


def length_ratio(candidate: Collapse, baseline: Collapse) -> float | None:
    """The candidate's mean output length over the baseline's."""
    if not baseline.mean_length or candidate.mean_length is None:
        return None
    return candidate.mean_length / baseline.mean_length


@dataclass(frozen=True)
class TaskCollapse:
    """Collapse figures of the runs compared on one task's paired items."""

    baseline: Collapse
    candidate: Collapse
    noise: tuple[Collapse, ...]  # one per noise run, on its pairs with the baseline
    candidate_only: int  # paired items collapsed in the candidate but not in the reference
    reference_only: int  # ... and the other way round; the reference is the first noise run,
    # or the baseline without one

    @property
    def length_ratio(self) -> float | None:
        return length_ratio(self.candidate, self.baseline)


def discordant(candidate: Sequence[ItemRecord], reference: Sequence[ItemRecord]) -> tuple[int, int]:
    """(collapsed only in the candidate, collapsed only in the reference), item by item."""
    mine, theirs = list(map(collapsed, candidate)), list(map(collapsed, reference))
    if len(mine) != len(theirs):
        raise ValueError("discordant() needs the same items in both runs")
    return (sum(m and not t for m, t in zip(mine, theirs, strict=True)),
            sum(t and not m for m, t in zip(mine, theirs, strict=True)))
