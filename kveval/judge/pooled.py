"""Accuracy against the baseline's setup: the candidate's wrong answers beside the baseline's
and every noise run's, on the items all of them scored.

The baseline and the noise runs are draws of one setup (judge/floor.py); on an accurate model
a restart that changes more answers also scores lower, so the baseline alone is no measure of
what a restart does to accuracy. Items: those the baseline scored and every noise run scored
too; the candidate's errors and missing answers among them count as wrong (the worst case),
so errors cannot hide losses.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kveval.formats.records import ItemRecord
from kveval.judge.accuracy import METRICS
from kveval.judge.answers import answer_codes, changed_per_run
from kveval.judge.floor import CountTest, accuracy_test
from kveval.judge.harm import bounded_cost, departure_cost
from kveval.judge.novel import novel_cost
from kveval.judge.sides import Side


def _scores(side: Side, task: str, field: str) -> dict[str, ItemRecord]:
    """The task's scored records by item_id."""
    return {i.item_id: i for i in side.items
            if i.task == task and i.status == "ok" and getattr(i, field) is not None}


def pooled_accuracy(task: str, base: Side, noises: Sequence[Side], cand: Side,
                    metric: str) -> CountTest | None:
    """The accuracy check's test, or None where the task has no scored item in the pool."""
    found = scored_runs(task, base, noises, cand, metric)
    if found is None:
        return None
    return accuracy_of(*found)


def accuracy_of(codes: np.ndarray, wrong: np.ndarray, collapsed: np.ndarray) -> CountTest:
    """The test from runs x items of answer codes, wrong answers and answers cut short or
    empty, the pool then the candidate last (scored_runs): the new answers' cost with three
    runs of the setup or more, else the pool test."""
    if codes.shape[0] == 2:
        return accuracy_test(wrong, *mirrored(codes, wrong))
    return accuracy_test(wrong, changed_per_run(codes), cost_of(codes, wrong),
                         novel_cost(codes, wrong, collapsed))


def mirrored(codes: np.ndarray, wrong: np.ndarray) -> tuple[float, float]:
    """(the answers one run changes, a change's net cost) the pool test allows for with the
    baseline alone, from the changes read symmetrically: the answers that changed without
    changing their score, and twice the smaller of the candidate's lost and gained ones (as
    McNemar's test reads the discordant pairs). Its losses beyond its gains are what is
    tested, so they never enlarge its own allowance; a restart's changes, lost and gained
    alike, still do."""
    changed = codes[0] != codes[1]
    lost = int((changed & ~wrong[0] & wrong[1]).sum())
    gained = int((changed & wrong[0] & ~wrong[1]).sum())
    kept = int((changed & (wrong[0] == wrong[1])).sum())
    flips = 2 * min(lost, gained)
    return (kept + flips) / 2, bounded_cost(flips, kept + flips)


def scored_runs(task: str, base: Side, noises: Sequence[Side], cand: Side, metric: str,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Runs x items of answer codes, wrong answers and answers cut short or empty, the pool
    (the baseline first) then the candidate last, on the items the whole pool scored; None
    where it scored none. The candidate's errors and missing answers are wrong, not cut
    short (`collapsed`): each is a new answer (a loss where the pool was right), so errors
    cannot hide losses from the new answers' test either."""
    field = METRICS[metric]
    runs = _aligned(task, field, base, noises, cand)
    if runs is None:
        return None
    items = len(runs[0])
    wrong = np.array([np.fromiter((r is None or r.status != "ok" or not getattr(r, field)
                                   for r in run), dtype=bool, count=items) for run in runs])
    cut = np.array([np.array(collapsed(run), dtype=bool) for run in runs])
    answers = [[r.output if r is not None and r.status == "ok" else None for r in run]
               for run in runs]
    del runs  # the records' lists, before the answers are coded
    return answer_codes(answers), wrong, cut


def _aligned(task: str, field: str, base: Side, noises: Sequence[Side], cand: Side,
             ) -> list[list[ItemRecord | None]] | None:
    """The records of the items the whole pool scored, in the baseline's order: each pool
    run's, then the candidate's (None where it has none); None where the pool scored none.
    One run's index is held at a time."""
    runs: list[list[ItemRecord | None]] = [list(_scores(base, task, field).values())]
    ids = [r.item_id for r in runs[0] if r is not None]
    for noise in noises:
        runs.append(list(map(_scores(noise, task, field).get, ids)))
    if len(runs) > 1:
        keep = [all(run[i] is not None for run in runs[1:]) for i in range(len(ids))]
        if not all(keep):
            runs = [[r for r, k in zip(run, keep, strict=True) if k] for run in runs]
            ids = [i for i, k in zip(ids, keep, strict=True) if k]
    if not ids:
        return None
    theirs = {i.item_id: i for i in cand.items if i.task == task}
    runs.append(list(map(theirs.get, ids)))
    return runs


def cost_of(codes: np.ndarray, wrong: np.ndarray) -> float:
    """A departure's cost, from the pool alone where it has three runs or more, else with
    the candidate (judge/harm.py); `codes`: runs x items, the candidate last."""
    if codes.shape[0] > 3:
        return departure_cost(codes[:-1], wrong[:-1])
    return departure_cost(codes, wrong)


def collapsed(run: Sequence[ItemRecord | None]) -> list[bool]:
    """Each answer cut short or empty: the truncated and empty checks' to judge, not a new
    answer's cost. An error or a missing answer (only the candidate has them: the pool's runs
    are read where they all scored) is none of these: it is wrong, and a new answer."""
    return [r is not None and r.status == "ok"
            and (r.finish_reason == "length" or not (r.output or "").strip()) for r in run]
