"""Answers as codes, and who changed what: equal codes for equal answers of an item, each
two runs' changed answers, and each run's own share of them.

A round-robin of M runs gives pairwise change counts c_ab; under the additive model
c_ab = q_a + q_b each run's own share q_a is found by least squares (`run_effects`), the
figure the drift check's spread part reads (judge/floor.py changed_test).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def run_effects(among: np.ndarray) -> np.ndarray:
    """Each run's own share q_a of the pairwise counts c_ab = q_a + q_b of M >= 3 runs (a
    symmetric matrix, the diagonal ignored), by least squares."""
    m = among.shape[0]
    sums = among.sum(axis=1) - np.diag(among)
    return (sums - sums.sum() / 2 / (m - 1)) / (m - 2)


def pairwise_changes(coded: np.ndarray) -> np.ndarray:
    """Runs x runs: how many items each two runs answer differently."""
    runs = coded.shape[0]
    return np.array([[int((coded[a] != coded[b]).sum()) for b in range(runs)]
                     for a in range(runs)])


def changed_per_run(coded: np.ndarray) -> float:
    """How many answers one run of the setup changes: half the mean pairwise changes among
    all the runs (`coded`: runs x items of answer_codes), the candidate's included (under
    the null hypothesis it is one more restart, and one that changed many answers is what
    the prior must allow for)."""
    among = pairwise_changes(coded)
    upper = among[np.triu_indices(among.shape[0], 1)]
    return float(upper.mean()) / 2 if upper.size else 0.0


def answer_codes(answers: Sequence[Sequence[object]]) -> np.ndarray:
    """Runs x items of integer codes: equal codes for equal answers of an item (the first
    run holding that answer); None gets a code of its own in every run. Codes are compared
    item by item only, so no answer is hashed or held in an index."""
    runs, items = len(answers), len(answers[0]) if answers else 0
    codes = np.empty((runs, items), dtype=np.int64)
    for r, run in enumerate(answers):
        code = np.full(items, r, dtype=np.int64)
        code[np.fromiter((a is None for a in run), dtype=bool, count=items)] = -(r + 1)
        open_ = code >= 0
        for e in range(r):
            same = np.fromiter((a is not None and a == b for a, b in zip(run, answers[e],
                                                                          strict=True)),
                               dtype=bool, count=items) & open_
            code[same], open_ = codes[e, same], open_ & ~same
        codes[r] = code
    return codes
