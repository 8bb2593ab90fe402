"""`kveval compare` as blocks: drift per task beside the noise floor, the most diverged pairs."""

from __future__ import annotations

from kveval.judge.compare import Comparison, Drift, Pair
from kveval.judge.verdict import Setup
from kveval.show.blocks import CONTEXT, Block, Heading, SideBySide, Table
from kveval.show.sections import pairing_line, setup_blocks, sides_block
from kveval.show.words import drift_sentence, pct


def _drift_row(task: str, label: str, d: Drift) -> tuple[str, ...]:
    ratio = "-" if d.mean_prefix_ratio is None else f"{d.mean_prefix_ratio:.3f}"
    first = "-" if d.median_first_difference is None else f"{d.median_first_difference:g}"
    share = pct(d.identical / d.pairs if d.pairs else None)
    return (task, label, str(d.pairs), f"{d.identical} ({share})", ratio, first)


def drift_table(c: Comparison) -> Table:
    rows = []
    for t in c.tasks:
        rows.append(_drift_row(t.task, c.candidate.label, t.candidate))
        if t.noise is not None and c.noise is not None:
            rows.append(_drift_row(t.task, c.noise.label, t.noise))
    header = ("task", "vs " + c.base.label, "pairs", "identical", "prefix ratio",
              "first diff (median)")
    return Table(header, tuple(rows))


def diverged_block(pair: Pair, base: str, candidate: str) -> SideBySide:
    first = pair.first_difference or 0
    start = max(0, first - CONTEXT)
    task, item_id = pair.key
    name = item_id if item_id.startswith(task) else f"{task} {item_id}"
    title = f"{name}: prefix ratio {pair.prefix_ratio:.3f}, first difference at character {first}"
    return SideBySide(title, base, candidate, _from(pair.base_text, start),
                      _from(pair.other_text, start))


def _from(text: str, start: int) -> str:
    return ("..." if start else "") + text[start:]


def compare_blocks(setup: Setup | None, c: Comparison) -> list[Block]:
    noise = c.noise.label if c.noise else None
    blocks: list[Block] = [Heading("kveval compare"),
                           sides_block(("baseline", c.base), ("candidate", c.candidate),
                                       ("noise", c.noise))]
    blocks += setup_blocks(setup)
    blocks += [drift_table(c)]
    blocks += [f"{t.task}: {drift_sentence(t, c.candidate.label, noise)}" for t in c.tasks]
    blocks.append(pairing_line(c.pairing, c.base.label, c.candidate.label))
    for t in c.tasks:
        blocks += [diverged_block(p, c.base.label, c.candidate.label) for p in t.diverged]
    return blocks
