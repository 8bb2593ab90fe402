"""Each length of a long-context task against the baseline's setup: the candidate's wrong
answers at one length beside the baseline's and every noise run's, item by item.

With noise runs, a length check compares the candidate with the pool of the baseline's
setup rather than with the baseline alone (judge/floor.py exact_p: on an item that t of the
M runs get wrong, the candidate's wrong answer is Bernoulli(t / M) under the null
hypothesis; against the baseline alone it is the exact McNemar test). A needle every run of
the setup finds and the candidate loses then counts against it M - 1 times over, where the
baseline alone would count it once. Only 0/1 scores; graded lengths keep their permutation
test, and so does a length without noise runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kveval.judge.curves import item_score, long_context_items
from kveval.judge.floor import exact_p
from kveval.judge.sides import Side


def _scored(side: Side, task: str) -> dict[tuple[str, str], tuple[int, float]]:
    found = {}
    for r in long_context_items(task, side.items):
        score = item_score(r)
        if score is not None:
            found[r.key] = (int(r.meta["target_tokens"]), score)
    return found


def _lengths(pool: list[dict[tuple[str, str], tuple[int, float]]],
             cand: dict[tuple[str, str], tuple[int, float]]) -> dict[int, list[tuple[str, str]]]:
    """The items every run scored, by length."""
    groups: dict[int, list[tuple[str, str]]] = {}
    for key, (length, _) in pool[0].items():
        if key in cand and all(key in p for p in pool[1:]):
            groups.setdefault(length, []).append(key)
    return groups


def length_pool(task: str, base: Side, noises: Sequence[Side], cand: Side,
                ) -> dict[int, tuple[float, float]]:
    """{length: (p, smallest attainable p)} of the candidate's wrong answers at each length
    against the pool's; empty without a noise run. Lengths with a graded score are left
    out."""
    if not noises:
        return {}
    pool = [_scored(s, task) for s in (base, *noises)]
    mine = _scored(cand, task)
    found = {}
    for length, keys in _lengths(pool, mine).items():
        scores = np.array([[p[k][1] for k in keys] for p in (*pool, mine)])
        if not np.isin(scores, (0.0, 1.0)).all():
            continue
        wrong = scores < 1
        found[length] = exact_p(wrong[-1], wrong[:-1])
    return found
