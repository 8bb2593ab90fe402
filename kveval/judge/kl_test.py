"""The KL test: is the candidate's divergence from the baseline above its noise runs'?

Against the noise floor: on the items every run compared, each item's mean KL of the
candidate (less the tolerated shift, gate --max-kl) and of each noise run, all against the
baseline, are exchanged within the item (judge/permute.py): under the null hypothesis the
candidate is one more run of the baseline's setup. The one-sided p-value is that of "the
candidate's mean is higher"; every noise run stays its own draw, never averaged into one
floor first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kveval.judge.divergence import Divergence, ItemDivergence, per_item, summarize
from kveval.judge.kl_bound import TINY

ASSUMED_KL_SPREAD = 0.25  # log-sd of a restart's mean KL where fewer than three runs show it


@dataclass(frozen=True)
class KlTest:
    """Candidate vs noise floor: per-item mean KL on the items all runs could compare."""

    items: int
    candidate_kl: float  # mean of the per-item means
    noise_kl: float  # of each item's mean over the noise runs
    p_value: float  # one-sided, within-item permutation: candidate - shift > noise runs
    min_p: float  # the smallest p-value these items could give
    shift: float = 0.0  # nats: the tolerated excess (gate --max-kl)
    noise_runs: int = 1
    item_spread: float = 0.0  # sd of the per-item permutation's mean difference under the null
    noise_means: tuple[float, ...] = ()  # each noise run's mean of the per-item means
    # between the noise runs alone (from two): the root of the mean per-item variance
    noise_item_sd: float | None = None


def kl_test(candidate: Sequence[ItemDivergence], *noise_runs: Sequence[ItemDivergence],
            shift: float = 0.0) -> KlTest:
    """The candidate's per-item mean KL against every noise run's, on the items all of them
    compared: is the candidate's higher by more than `shift` nats? Item by item (a
    permutation within items) and run by run (each run's mean KL among the noise runs', on the
    log scale, judge/floor.py), the larger p-value."""
    from kveval.judge.permute import exchange_p

    floors = [{item.key: item.kl_mean for item in run} for run in noise_runs]
    shared = [c for c in candidate if floors and all(c.key in f for f in floors)]
    cand = np.array([c.kl_mean for c in shared]) - shift
    noise = np.array([[f[c.key] for c in shared] for f in floors]).reshape(len(floors), -1)
    if not shared:
        return KlTest(0, 0.0, 0.0, 1.0, 1.0, shift, len(floors))
    p, smallest = exchange_p(list(cand), [list(row) for row in noise])
    p = max(p, run_p(cand, noise))
    values = np.vstack([cand + shift, noise])
    k = len(floors)
    spread = math.sqrt(float(np.sum(((k + 1) / k) ** 2 * values.var(axis=0)))) / len(shared)
    between = math.sqrt(float(noise.var(axis=0, ddof=1).mean())) if k >= 2 else None
    return KlTest(len(shared), float(cand.mean()) + shift, float(noise.mean()), p, smallest,
                  shift, k, spread, tuple(float(m) for m in noise.mean(axis=1)), between)


def run_p(candidate: np.ndarray, noise: np.ndarray) -> float:
    """The candidate's mean KL as one more run among the noise runs' (log scale; each mean's
    sampling variance, from its items, is the floor); 1 when a noise run's mean is as high.
    With three noise runs or more their own spread, Student's t on m - 1 degrees of freedom
    (forced restarts agree closely, and their spread is what the KL test must measure:
    judge/kl_power.py plans with it); with fewer, ASSUMED_KL_SPREAD with a normal reference."""
    means = noise.mean(axis=1)
    if candidate.mean() <= means.max():
        return 1.0
    n = candidate.size
    level = max(float(means.mean()), float(np.abs(candidate).mean()), 1e-12)
    floor = float(noise.var(axis=1, ddof=1).mean()) / n / level ** 2 if n > 1 else 0.0
    log = np.log(np.maximum(means, TINY)), float(np.log(max(candidate.mean(), TINY)))
    return log_run_p(log[1], [float(x) for x in log[0]], floor)


def log_run_p(candidate: float, pool: Sequence[float], floor: float) -> float:
    """One more run's log mean KL among the noise runs' (`floor`: one mean's sampling
    variance): Student's t on their own spread from three runs, else ASSUMED_KL_SPREAD."""
    from kveval.judge.spread import moderated, prediction_p

    gap = candidate - float(np.mean(pool))
    if len(pool) >= 3:
        return prediction_p(gap, moderated(list(pool), 0.0, 0.0, 0.0))
    assumed = moderated([], ASSUMED_KL_SPREAD ** 2 + floor, math.inf, floor)
    return prediction_p(gap, replace(assumed, runs=len(pool)))


@dataclass(frozen=True)
class TaskDivergence:
    task: str
    candidate: Divergence
    test: KlTest | None  # None without a noise run or without shared items
    max_kl: float | None = None  # the gate's tolerated excess over the noise floor, when set
    noise_runs: tuple[Divergence | None, ...] = ()  # every noise run's (None: no log-probs)

    @property
    def noise(self) -> Divergence | None:
        """The first noise run with log-probabilities for this task."""
        return next((d for d in self.noise_runs if d is not None), None)


def _by_task(pairs: Sequence[Any]) -> dict[str, list[tuple[Any, Any]]]:
    """The pairs where both records hold log-probabilities (the only ones per_item reads),
    by task."""
    grouped: dict[str, list[tuple[Any, Any]]] = {}
    for pair in pairs:
        if pair.base.logprobs and pair.other.logprobs:
            grouped.setdefault(pair.key[0], []).append((pair.base, pair.other))
    return grouped


def task_divergences(pairs: Sequence[Any], noise_runs: Sequence[Sequence[Any]] = (),
                     max_kl: float | None = None) -> list[TaskDivergence]:
    """Per task with log-probabilities in both runs: the candidate's divergence from the
    baseline, each noise run's, and the test of the candidate against their floor. `pairs`
    (and each noise run's) hold `.key`, `.base` and `.other` records (judge.compare.Pair)."""
    noise_tasks = [_by_task(run) for run in noise_runs]
    found = []
    for task, task_pairs in _by_task(pairs).items():
        cand = per_item(task_pairs)
        if not cand:
            continue
        noises = [per_item(n.get(task, [])) for n in noise_tasks]
        floors = [n for n in noises if n]
        test = kl_test(cand, *floors, shift=max_kl or 0.0) if floors else None
        runs = tuple(summarize(n) if n else None for n in noises)
        found.append(TaskDivergence(task, summarize(cand), test if test and test.items else None,
                                    max_kl, runs))
    return found
