"""Bad batches: answers cut short or empty, bunched in a run's own order of answers.

A server that drops a batch (an out-of-memory preemption, a stalled step) cuts or empties the
answers of the requests it held together: many of a few dozen consecutive items of one run,
across tasks, and nowhere else. Counted as they are, one bad batch in a noise run widens the
floor, and one in the candidate fails it although the setup did nothing different. So each
run is scanned, in the order its file holds its items (the order answers came back), for the
window of WINDOW consecutive items where its flags (cut or empty) are densest; the window is a
burst when that many flags in so few items are beyond chance at the run's own rate outside it
(a binomial tail below BURST_P after a Bonferroni factor of the windows scanned). One burst
per run is forgiven, and only in a run that is otherwise like the others: outside its window
the run flags no more than the most any other run flags (a one-sided binomial test at
OTHERWISE_P), so a run that cuts more answers everywhere keeps its window counted. Its
flagged items leave every check of every run (item by item, so the runs stay paired), and
the verdict says which run and how many items. A second dense window, or flags spread through
the run, are counted as usual: at most WINDOW items of a run are ever left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kveval.formats.records import ItemRecord

WINDOW = 32  # items: a batch's worth of consecutive requests
BURST_P = 1e-6  # the Bonferroni-adjusted binomial tail a window must fall below
MIN_FLAGS = 12  # fewer flagged items than this are never a burst (a bad batch cuts about 16)
OTHERWISE_P = 0.001  # a run's flags outside its window beyond the others' at this level


@dataclass(frozen=True)
class Burst:
    """One run's bad batch: the flagged items left out of the checks."""

    label: str  # the run's label
    keys: frozenset[tuple[str, str]]  # (task, item_id) of its flagged items in the window
    first: int  # the window's first position in the run's file (0-based, items only)
    flagged: int
    p_value: float  # the window's Bonferroni-adjusted tail at the run's rate elsewhere


def flagged(item: ItemRecord) -> bool:
    """Cut at max_tokens, or an empty answer."""
    return item.ok and (item.finish_reason == "length" or not (item.output or "").strip())


def _densest(flags: np.ndarray) -> tuple[int, int]:
    """(start, count) of the WINDOW-item window holding the most flags."""
    sums = np.convolve(flags.astype(np.int64), np.ones(WINDOW, dtype=np.int64), "valid")
    start = int(np.argmax(sums))
    return start, int(sums[start])


def find_burst(label: str, items: Sequence[ItemRecord]) -> Burst | None:
    """The run's one burst, if its densest window is beyond chance."""
    from scipy.stats import binom

    flags = np.fromiter((flagged(i) for i in items), dtype=bool, count=len(items))
    if flags.size < 2 * WINDOW:
        return None
    start, count = _densest(flags)
    if count < MIN_FLAGS:
        return None
    outside = int(flags.sum()) - count
    rate = (outside + 0.5) / (flags.size - WINDOW + 1)
    p = float(binom.sf(count - 1, WINDOW, min(rate, 1.0))) * (flags.size - WINDOW + 1)
    if p >= BURST_P:
        return None
    keys = frozenset(items[start + j].key for j in range(WINDOW) if flags[start + j])
    return Burst(label, keys, start, count, min(p, 1.0))


def otherwise_alike(burst: Burst, items: Sequence[ItemRecord],
                    others: Sequence[Sequence[ItemRecord]]) -> bool:
    """Whether the run flags, outside its burst, no more than the other runs do."""
    from scipy.stats import binom

    outside = sum(flagged(i) for i in items) - burst.flagged
    rate = max((sum(flagged(i) for i in run) / len(run) for run in others if run), default=0.0)
    n = len(items) - WINDOW
    return outside <= rate * n or float(binom.sf(outside - 1, n, min(rate, 1.0))) > OTHERWISE_P


def find_bursts(runs: Sequence[tuple[str, Sequence[ItemRecord]]]) -> tuple[Burst, ...]:
    """Every run's forgiven burst, in the order given (label, items in file order)."""
    found = []
    for i, (label, items) in enumerate(runs):
        burst = find_burst(label, items)
        others = [run for j, (_, run) in enumerate(runs) if j != i]
        if burst is not None and otherwise_alike(burst, items, others):
            found.append(burst)
    return tuple(found)


def left_out(bursts: Sequence[Burst]) -> frozenset[tuple[str, str]]:
    """The items no check reads: every run's burst items."""
    return frozenset().union(*(b.keys for b in bursts)) if bursts else frozenset()
