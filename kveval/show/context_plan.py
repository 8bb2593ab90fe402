"""What the context task's check can show before it runs (`ab --dry-run`, `plan`): from the
documents and the lengths, the blocks each position bucket holds, the bucket from which a
rise can name where it starts with these restarts, and the rise over the floor the whole
curve shows 80% of the time (the run-by-run part of judge/kl_test.py decides, as for the
forced KL: judge/kl_power.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from kveval.judge.kl_power import restarts_for
from kveval.judge.positions import BLOCK


def blocks_to_name(runs: int, level: float) -> int | None:
    """Blocks a bucket needs for its own exchange test to reach `level`: (runs + 1)^-b."""
    if runs < 1:
        return None
    return max(1, math.ceil(math.log(1 / level) / math.log(runs + 1)))


def _first_named(edges: Sequence[int], documents: int, need: int) -> str | None:
    for start, end in zip(edges, edges[1:], strict=False):
        if documents * (end - max(start, 1)) / BLOCK >= need:
            return f"{start:,}-{end:,}"
    return None


def context_lines(task: str, documents: int, lengths: Sequence[int], runs: int, level: float,
                  rise: float = 0.1) -> list[str]:
    """Lines for one context task of `documents` documents cut to max(lengths) tokens."""
    edges = [0, *sorted(lengths)]
    blocks = documents * math.ceil((edges[-1] - 1) / BLOCK)
    head = (f"{task}: {documents} document(s) to {edges[-1]:,} tokens, {blocks:,} blocks of "
            f"{BLOCK} positions, the check at level {level:.2g}")
    need = blocks_to_name(runs, level)
    if need is None:
        return [f"{head}: no restart, so no rise can be told from a restart's own; give "
                "--noise-runs 1 or more"]
    named = _first_named(edges, documents, need)
    where = (f"a bucket names where a rise starts from {need * BLOCK:,} positions over the "
             f"documents ({named} and longer)" if named else
             f"no bucket holds the {need * BLOCK:,} positions over the documents a bucket needs "
             "to name where a rise starts: add documents")
    return [f"{head}: {where}", _curve_line(task, runs, level, rise)]


def _curve_line(task: str, runs: int, level: float, rise: float) -> str:
    found = restarts_for(rise, runs, level)
    if runs < 3:
        shown = f"{100 * found.assumed_rise:.0f}%" if found.assumed_rise else "no rise"
        return (f"{task}: with {runs} restart(s) their spread of mean KL is assumed (log-sd "
                f"0.25): the whole curve shows a rise of {shown} over the floor 80% of the "
                "time, or any rise where the floor is 0 (one slot on a CPU); 3 restarts "
                "measure it")
    spread = (f"the restarts' mean KL must agree to a log-sd of {found.widest_spread:.3f}"
              if found.widest_spread is not None else "no spread of the restarts can")
    return (f"{task}: to show a rise of {100 * rise:g}% over the floor 80% of the time with "
            f"{runs} restarts, {spread}")
