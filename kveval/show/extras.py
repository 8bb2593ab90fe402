"""Per-task sections printed below the scores: a long-context task's accuracy per length, its
length x depth table (with a baseline, the per-cell change) and the answer classes."""

from __future__ import annotations

from kveval.judge import grid
from kveval.judge.compare import Side
from kveval.show.blocks import Block, Rendered


def task_extras(run: Side, baseline: Side | None) -> dict[str, list[Block]]:
    """The grid section of each task whose items carry a length and a depth, by task name."""
    extras: dict[str, list[Block]] = {}
    for name in dict.fromkeys(item.task for item in run.items):
        mine = [item for item in run.items if item.task == name]
        theirs = [item for item in baseline.items if item.task == name] if baseline else None
        section = grid.section(name, mine, theirs)
        if section is not None:
            extras[name] = [Rendered(grid.render_text(section), grid.render_markdown(section),
                                     section)]
    return extras
