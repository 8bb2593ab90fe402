"""What changed between two runs' answers, and whether it is more than the noise floor.

Runs are paired by (task, item_id). Per task: how many answers are identical, the mean
shared-prefix ratio and the median position of the first difference. The ratio of a pair is
its common prefix length over the longer output, in characters, with two empty outputs
scored 1 (identical), averaged over pairs. The widely copied FP8 KV-cache tutorial script
computes another figure: it divides by the length of the first file's answer and scores two
empty answers 0. Given a noise run (the baseline setup restarted), the candidate's drift is tested
against the noise run's on the same items: an exact McNemar test on the per-item indicator
"identical to the baseline", noise vs candidate.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kveval.errors import IncomparableError, UsageError
from kveval.formats.records import ItemRecord, Run, RunHeader
from kveval.judge.stats import mcnemar_exact

ALPHA = 0.05  # drift beyond the noise floor: exact McNemar p below this
ANSWERS_TASK = "answers"  # the task name given to the tutorial's JSON array of answers


@dataclass(frozen=True)
class Side:
    """One run as judged: a kveval run file, or the tutorial's JSON array of answers."""

    label: str
    path: str
    items: tuple[ItemRecord, ...]
    header: RunHeader | None = None  # None for an array of answers
    truncated_tail: bool = False  # the run file's last line was cut short and skipped
    is_answer_array: bool = False

    @property
    def errors(self) -> int:
        return sum(not item.ok for item in self.items)


def side_from_run(run: Run) -> Side:
    return Side(
        label=run.header.label or run.path.stem,
        path=str(run.path),
        items=tuple(run.items),
        header=run.header,
        truncated_tail=run.truncated_tail,
    )


def side_from_answers(path: str, answers: Sequence[str]) -> Side:
    """The tutorial's format: answers paired by position, as item ids "0", "1", ..."""
    items = tuple(
        ItemRecord(task=ANSWERS_TASK, item_id=str(i), prompt_sha256="", request={},
                   status="ok", output=text)
        for i, text in enumerate(answers)
    )
    label = os.path.splitext(os.path.basename(path))[0]
    return Side(label=label, path=path, items=items, is_answer_array=True)


def check_same_format(sides: Iterable[Side]) -> None:
    """Arrays of answers pair only with arrays; run files only with run files."""
    sides = list(sides)
    if len({side.is_answer_array for side in sides}) > 1:
        arrays = ", ".join(s.path for s in sides if s.is_answer_array)
        raise UsageError(f"cannot pair a JSON array of answers ({arrays}) with kveval run files; "
                         "give all arrays or all run files")


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


@dataclass(frozen=True, slots=True)
class Pair:
    """The same item answered in the baseline and in another run."""

    base: ItemRecord
    other: ItemRecord

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
    def identical(self) -> bool:
        return self.base_text == self.other_text

    @property
    def prefix_ratio(self) -> float:
        return prefix_ratio(self.base_text, self.other_text)

    @property
    def first_difference(self) -> int | None:
        """Character position of the first difference; None when the answers are identical."""
        return None if self.identical else shared_prefix_length(self.base_text, self.other_text)


@dataclass(frozen=True)
class Pairing:
    pairs: tuple[Pair, ...]  # answered (status ok) in both runs
    only_base: int  # items only the baseline has
    only_other: int  # items only the other run has
    with_errors: int  # items in both runs, left out because at least one is an error


def pair_sides(base: Side, other: Side) -> Pairing:
    """Pair by (task, item_id); a pair whose prompts differ makes the runs incomparable."""
    others = {item.key: item for item in other.items}
    found = ((item, others.get(item.key)) for item in base.items)
    both = [(a, b) for a, b in found if b is not None]
    mismatched = [a.key for a, b in both if a.prompt_sha256 != b.prompt_sha256]
    if mismatched:
        task, item_id = mismatched[0]
        raise IncomparableError(
            f"{len(mismatched)} paired item(s) have different prompts in {base.path} and "
            f"{other.path} (prompt_sha256 differs), e.g. {task} {item_id}"
        )
    pairs = tuple(Pair(a, b) for a, b in both if a.ok and b.ok)
    return Pairing(
        pairs=pairs,
        only_base=len(base.items) - len(both),
        only_other=len(others) - len(both),
        with_errors=len(both) - len(pairs),
    )


@dataclass(frozen=True)
class Drift:
    """One run's answers against the baseline's, on a set of pairs."""

    pairs: int
    identical: int
    mean_prefix_ratio: float | None  # None without pairs
    median_first_difference: float | None  # None when no answer changed

    @property
    def changed(self) -> int:
        return self.pairs - self.identical


def drift(pairs: Sequence[Pair]) -> Drift:
    firsts = [p.first_difference for p in pairs if p.first_difference is not None]
    return Drift(
        pairs=len(pairs),
        identical=len(pairs) - len(firsts),
        mean_prefix_ratio=statistics.fmean(p.prefix_ratio for p in pairs) if pairs else None,
        median_first_difference=float(statistics.median(firsts)) if firsts else None,
    )


@dataclass(frozen=True)
class NoiseTest:
    """Candidate vs noise run on the items all three runs answered."""

    items: int
    candidate_changed: int  # answers differing from the baseline's
    noise_changed: int
    candidate_only: int  # changed by the candidate but not by the noise run
    noise_only: int  # changed by the noise run but not by the candidate
    p_value: float  # exact McNemar on candidate_only vs noise_only

    @property
    def drifts_more(self) -> bool:
        """The candidate changes more answers than the noise run does, beyond chance."""
        return self.candidate_only > self.noise_only and self.p_value < ALPHA


def noise_test(candidate: Sequence[Pair], noise: Sequence[Pair]) -> NoiseTest:
    noise_same = {p.key: p.identical for p in noise}
    shared = [(not p.identical, not noise_same[p.key]) for p in candidate if p.key in noise_same]
    cand_only = sum(c and not n for c, n in shared)
    noise_only = sum(n and not c for c, n in shared)
    return NoiseTest(
        items=len(shared),
        candidate_changed=sum(c for c, _ in shared),
        noise_changed=sum(n for _, n in shared),
        candidate_only=cand_only,
        noise_only=noise_only,
        p_value=mcnemar_exact(cand_only, noise_only),
    )


@dataclass(frozen=True)
class TaskDrift:
    task: str
    candidate: Drift
    noise: Drift | None
    test: NoiseTest | None
    diverged: tuple[Pair, ...]  # the most diverged candidate pairs, most diverged first


@dataclass(frozen=True)
class Comparison:
    base: Side
    candidate: Side
    noise: Side | None
    pairing: Pairing
    noise_pairing: Pairing | None
    tasks: tuple[TaskDrift, ...]


def most_diverged(pairs: Sequence[Pair], count: int) -> tuple[Pair, ...]:
    changed = [p for p in pairs if not p.identical]
    return tuple(sorted(changed, key=lambda p: (p.prefix_ratio, p.key))[:count])


def by_task(pairs: Iterable[Pair]) -> dict[str, list[Pair]]:
    grouped: dict[str, list[Pair]] = {}
    for pair in pairs:
        grouped.setdefault(pair.key[0], []).append(pair)
    return grouped


def _task_drift(task: str, cand: list[Pair], noise: list[Pair] | None, show: int) -> TaskDrift:
    return TaskDrift(
        task=task,
        candidate=drift(cand),
        noise=drift(noise) if noise is not None else None,
        test=noise_test(cand, noise) if noise is not None else None,
        diverged=most_diverged(cand, show),
    )


def _pair_or_fail(base: Side, other: Side) -> Pairing:
    pairing = pair_sides(base, other)
    if not pairing.pairs:
        raise IncomparableError(f"no paired items: {base.path} and {other.path} share no "
                                "answered (task, item_id)")
    return pairing


def compare_sides(base: Side, candidate: Side, noise: Side | None = None,
                  show: int = 0) -> Comparison:
    """Drift of the candidate (and the noise run) from the baseline, task by task."""
    check_same_format([base, candidate] + ([noise] if noise else []))
    pairing = _pair_or_fail(base, candidate)
    noise_pairing = _pair_or_fail(base, noise) if noise else None
    noise_tasks = by_task(noise_pairing.pairs) if noise_pairing else {}
    tasks = tuple(
        _task_drift(task, pairs, noise_tasks.get(task), show)  # no noise pairs, no test
        for task, pairs in by_task(pairing.pairs).items()
    )
    return Comparison(base, candidate, noise, pairing, noise_pairing, tasks)
