"""Teacher-forced runs as the gate reads them: the candidate's forced pass and each restart's,
each against the baseline's own forced pass (pure).

A forced run (`kveval run --teacher-force BASE`) scores the baseline's answers, token by
token, under one server. Every forced run is compared with the forced pass the baseline's own
server made of the same answers, never with the free-running baseline: the floor between a
free-running and a forced pass (batching, prefill against decode kernels) is the same in every
comparison and drops out, so a restart's forced KL is its restart noise alone. Each item's
mean KL of the candidate is tested against every restart's (judge/kl_test.py).

The forced runs must be forced runs of the judged baseline: each a teacher-forced run whose
answers are the baseline's answers, item by item; anything else is incomparable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kveval.errors import IncomparableError
from kveval.judge.kl_test import TaskDivergence, task_divergences
from kveval.judge.pairs import Pair, pair_sides
from kveval.judge.sides import Side


@dataclass(frozen=True)
class Forced:
    """The forced passes of one experiment: the baseline's own, the candidate's and each
    restart's, all of the baseline's answers."""

    baseline: Side
    candidate: Side
    noises: tuple[Side, ...] = ()

    @property
    def runs(self) -> tuple[Side, ...]:
        return (self.baseline, self.candidate, *self.noises)


def check_forced(free: Side, forced: Forced) -> None:
    """Each forced run is a teacher-forced run of the free-running baseline's answers."""
    answers = {item.key: item.output for item in free.items if item.ok}
    for side in forced.runs:
        if side.header is None or not side.header.teacher_force:
            raise IncomparableError(f"{side.path}: not a teacher-forced run (`kveval run "
                                    "--teacher-force BASELINE.jsonl` makes one)")
        other = next((i for i in side.items if i.ok and i.key in answers
                      and i.output != answers[i.key]), None)
        if other is not None:
            raise IncomparableError(
                f"{side.path}: forces other answers than the baseline {free.path} gave "
                f"(e.g. {other.task} {other.item_id}): not a forced run of this baseline")


def _pairs(reference: Side, other: Side) -> Sequence[Pair]:
    return pair_sides(reference, other).pairs


def forced_divergences(forced: Forced, max_kl: float | None = None,
                       ) -> tuple[TaskDivergence, ...]:
    """Per task: the candidate's forced divergence from the baseline's forced pass, each
    restart's, and the test of the candidate against the restarts."""
    reference = forced.baseline
    return tuple(task_divergences(_pairs(reference, forced.candidate),
                                  [_pairs(reference, n) for n in forced.noises], max_kl))


def forced_tasks(forced: Forced | None) -> frozenset[str]:
    """The tasks the baseline's forced pass holds: each has a forced check in the family."""
    if forced is None:
        return frozenset()
    return frozenset(item.task for item in forced.baseline.items)
