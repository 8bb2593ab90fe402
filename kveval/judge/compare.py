"""What changed between two runs' answers, and whether it is more than the noise floor.

Runs are paired by (task, item_id). Per task: how many answers are identical, the mean
shared-prefix ratio and the median position of the first difference (judge/pairs.py: a
pair's common prefix over the longer output, in characters, two empty outputs scored 1,
averaged over pairs; not the widely copied FP8 KV-cache tutorial's figure, which divides by
the first file's answer and scores two empty answers 0). Given noise runs (the baseline's setup
restarted), the candidate's changed answers are tested against the pool of the baseline and
every noise run, on the items all of them answered (judge/floor.py): item by item, and with
the spread between the runs once there are two noise runs or more. Drift is measured on the
answer (`output`); a reasoning server's `reasoning` text is compared apart. Candidate repeats
(more runs of the candidate's setup) show its own instability. Every task also gets its
collapse figures and tests (judge/collapse.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from kveval.errors import IncomparableError
from kveval.judge.collapse import TaskCollapse, task_collapse
from kveval.judge.floor import CountTest, changed_test
from kveval.judge.pairs import (
    Pair,
    Pairing,
    by_task,
    most_diverged,
    pair_sides,
    prefix_ratio,
    shared_prefix_length,
)
from kveval.judge.sides import (
    ANSWERS_TASK,
    Side,
    check_same_format,
    check_tasks,
    side_from_answers,
    side_from_run,
)

__all__ = ["ANSWERS_TASK", "Pair", "Pairing", "Side", "by_task", "check_same_format",
           "check_tasks", "most_diverged", "pair_sides", "prefix_ratio", "shared_prefix_length",
           "side_from_answers", "side_from_run"]


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
    firsts = [p.shared for p in pairs if not p.identical]  # the first differences
    ratios = [p.prefix_ratio for p in pairs]
    return Drift(
        pairs=len(pairs),
        identical=len(pairs) - len(firsts),
        mean_prefix_ratio=math.fsum(ratios) / len(ratios) if ratios else None,
        median_first_difference=float(statistics.median(firsts)) if firsts else None,
    )


@dataclass(frozen=True)
class TaskDrift:
    task: str
    candidate: Drift
    noise: Drift | None  # the first noise run
    changed: CountTest | None  # the candidate's changed answers against the pool
    diverged: tuple[Pair, ...]  # the most diverged candidate pairs, most diverged first
    noise_runs: tuple[Drift, ...] = ()  # every noise run against the baseline
    between_noise: tuple[Drift, ...] = ()  # the noise runs against each other
    instability: tuple[Drift, ...] = ()  # each candidate repeat against the candidate
    reasoning: Drift | None = None  # the reasoning text, where a run recorded one
    collapse: TaskCollapse | None = None


@dataclass(frozen=True)
class Comparison:
    base: Side
    candidate: Side
    pairing: Pairing
    tasks: tuple[TaskDrift, ...]
    noises: tuple[Side, ...] = ()  # every noise run
    repeats: tuple[Side, ...] = ()  # more runs of the candidate's setup
    noise_pairings: tuple[Pairing, ...] = ()  # every noise run's, in the order of `noises`

    @property
    def noise(self) -> Side | None:
        """The first noise run."""
        return self.noises[0] if self.noises else None


def _pair_or_fail(base: Side, other: Side) -> Pairing:
    pairing = pair_sides(base, other)
    if not pairing.pairs:
        raise IncomparableError(f"no paired items: {base.path} and {other.path} share no "
                                "answered (task, item_id)")
    return pairing


def compare_sides(base: Side, candidate: Side, noise: Side | None = None, show: int = 0, *,
                  noises: Sequence[Side] = (), repeats: Sequence[Side] = (),
                  skip: Sequence[str] = ()) -> Comparison:
    """Drift of the candidate (and each noise run) from the baseline, task by task. `noise`
    and `noises` together are the noise runs; `repeats` are more runs of the candidate's
    setup; tasks in `skip` need not be in every run."""
    all_noise = ([noise] if noise else []) + list(noises)
    check_same_format([base, candidate, *all_noise, *repeats])
    pairing = _pair_or_fail(base, candidate)
    noise_pairings = [_pair_or_fail(base, n) for n in all_noise]
    roles = [("candidate", candidate)] + [(f"noise run {n.label}", n) for n in all_noise]
    for role, other in roles + [(f"candidate repeat {r.label}", r) for r in repeats]:
        check_tasks(base, other, role, skip)
    runs = RunPairs(by_task(pairing.pairs), [by_task(p.pairs) for p in noise_pairings],
                    [by_task(_pair_or_fail(candidate, r).pairs) for r in repeats],
                    [[by_task(_pair_or_fail(a, b).pairs) for b in all_noise[i + 1:]]
                     for i, a in enumerate(all_noise)])
    tasks = tuple(task_drift(task, runs, show) for task in runs.candidate)
    return Comparison(base, candidate, pairing, tasks, tuple(all_noise), tuple(repeats),
                      tuple(noise_pairings))


@dataclass(frozen=True)
class RunPairs:
    """Each run's pairs, by task: candidate, noise runs and candidate repeats against the
    baseline (repeats against the candidate), and each noise run against the later ones."""

    candidate: dict[str, list[Pair]]
    noise: list[dict[str, list[Pair]]]
    repeats: list[dict[str, list[Pair]]]
    between: list[list[dict[str, list[Pair]]]]


def task_drift(task: str, runs: RunPairs, show: int = 0) -> TaskDrift:
    cand = runs.candidate[task]
    noise = [n.get(task, []) for n in runs.noise]
    between = [other.get(task, []) for row in runs.between for other in row]
    noise_runs = tuple(drift(pairs) for pairs in noise)
    return TaskDrift(
        task=task,
        candidate=drift(cand),
        noise=noise_runs[0] if noise else None,
        changed=changed_of(cand, noise),
        diverged=most_diverged(cand, show),
        noise_runs=noise_runs,
        between_noise=tuple(drift(pairs) for pairs in between),
        instability=tuple(drift(r.get(task, [])) for r in runs.repeats),
        reasoning=reasoning_drift(cand),
        collapse=collapse_on_shared(cand, noise),
    )


def _shared(cand: Sequence[Pair], noise: Sequence[Sequence[Pair]]) -> list[list[Pair]]:
    """The candidate's and each noise run's pairs of one task on the items every run
    answered."""
    if all(len(n) == len(cand) and all(a.base is b.base for a, b in zip(cand, n, strict=True))
           for n in noise):  # the same baseline records in the same order: no index needed
        return [list(pairs) for pairs in (cand, *noise)]
    ids = set.intersection({p.base.item_id for p in cand},
                           *({p.base.item_id for p in n} for n in noise))
    if all(len(pairs) == len(ids) for pairs in (cand, *noise)):
        return [list(pairs) for pairs in (cand, *noise)]
    return [[p for p in pairs if p.base.item_id in ids] for pairs in (cand, *noise)]


def changed_of(cand: Sequence[Pair], noise: Sequence[Sequence[Pair]]) -> CountTest | None:
    """With noise runs: the candidate's changed answers against the pool of the baseline and
    every noise run, on the items all of them answered."""
    if not noise:
        return None
    shared = _shared(cand, noise)
    if not shared[0]:
        return None
    runs = [[p.base.output for p in shared[0]],
            *([p.other.output for p in pairs] for pairs in shared[1:]),
            [p.other.output for p in shared[0]]]
    return changed_test(runs)


def collapse_on_shared(cand: Sequence[Pair], noise: Sequence[Sequence[Pair]]) -> TaskCollapse:
    """Collapse of every run on the items all of them answered, the candidate's tested
    against the pool of the baseline and every noise run."""
    shared = _shared(cand, noise)
    pool = [[p.base for p in shared[0]], *([p.other for p in pairs] for pairs in shared[1:])]
    return task_collapse(pool, [p.other for p in shared[0]])


def reasoning_drift(pairs: Sequence[Pair]) -> Drift | None:
    """The reasoning texts compared like answers, where either run recorded one."""
    texts = [(p.base.reasoning or "", p.other.reasoning or "") for p in pairs
             if p.base.reasoning is not None or p.other.reasoning is not None]
    if not texts:
        return None
    firsts = [shared_prefix_length(a, b) for a, b in texts if a != b]
    return Drift(len(texts), len(texts) - len(firsts),
                 statistics.fmean(prefix_ratio(a, b) for a, b in texts),
                 float(statistics.median(firsts)) if firsts else None)
