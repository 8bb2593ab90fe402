"""`kveval compare` as blocks: drift per task beside the noise floor, collapse, length curves,
divergence, the family's checks and the most diverged pairs."""

from __future__ import annotations

from kveval.formats.records import ItemRecord
from kveval.judge.checks import first
from kveval.judge.collapse import Collapse, length_ratio, truncated
from kveval.judge.compare import Comparison, Drift, Pair
from kveval.judge.verdict import Examined, Setup
from kveval.show.blocks import CONTEXT, Block, Heading, Note, SideBySide, Table
from kveval.show.checks_view import check_lines, checks_table, notices, warnings_sentence
from kveval.show.context_view import context_blocks
from kveval.show.curves import headed
from kveval.show.divergence import divergence_blocks
from kveval.show.sections import not_forced_lines, pairing_line, setup_blocks, sides_block
from kveval.show.seen import detectable_lines
from kveval.show.words import (
    REPETITION_NOTE,
    collapse_text,
    drift_sentence,
    instability_sentence,
    pct,
    reasoning_sentence,
    testable,
)


def _drift_row(task: str, label: str, d: Drift) -> tuple[str, ...]:
    ratio = "-" if d.mean_prefix_ratio is None else f"{d.mean_prefix_ratio:.3f}"
    first = "-" if d.median_first_difference is None else f"{d.median_first_difference:g}"
    share = pct(d.identical / d.pairs if d.pairs else None)
    return (task, label, str(d.pairs), f"{d.identical} ({share})", ratio, first)


def drift_table(c: Comparison, hide: frozenset[str] = frozenset()) -> Table:
    """Answers changed per task and run; `hide`: tasks whose answers are forced documents
    (the context task: judged by position, its answers never change)."""
    rows = []
    for t in (t for t in c.tasks if t.task not in hide):
        rows.append(_drift_row(t.task, c.candidate.label, t.candidate))
        rows += [_drift_row(t.task, n.label, d)
                 for n, d in zip(c.noises, t.noise_runs, strict=False)]
        rows += [_drift_row(t.task, f"{r.label} (vs {c.candidate.label})", d)
                 for r, d in zip(c.repeats, t.instability, strict=False)]
    header = ("task", "vs " + c.base.label, "pairs", "identical", "prefix ratio",
              "first diff (median)")
    return Table(header, tuple(rows))


def _collapse_row(task: str, label: str, c: Collapse, ratio: float | None) -> tuple[str, ...]:
    truncated, empty, repeated = collapse_text(c)
    shown = "-" if ratio is None else f"{ratio:.2f}"
    return (task, label, str(c.answers), truncated, empty, shown, repeated)


def collapse_table(c: Comparison, hide: frozenset[str] = frozenset()) -> Table:
    rows = []
    for t in c.tasks:
        if t.collapse is None or t.task in hide:
            continue
        k = t.collapse
        rows.append(_collapse_row(t.task, c.base.label, k.baseline, 1.0))
        rows.append(_collapse_row(t.task, c.candidate.label, k.candidate, k.length_ratio))
        rows += [_collapse_row(t.task, n.label, d, length_ratio(d, k.baseline))
                 for n, d in zip(c.noises, k.noise, strict=False)]
    header = ("task", "run", "answers", "truncated", "empty", "length ratio", "repetition")
    return Table(header, tuple(rows))


def shown_answer(item: ItemRecord, start: int) -> str:
    """The answer from `start`; `(empty)` for an empty one, so it is not a blank column."""
    if item.output is None:
        return "(no answer: output null" + (", cut at max_tokens)" if truncated(item) else ")")
    if not item.output:
        return "(empty)"
    return ("..." if start else "") + item.output[start:]


def diverged_block(pair: Pair, base: str, candidate: str) -> SideBySide:
    first = pair.first_difference or 0
    start = max(0, first - CONTEXT)
    task, item_id = pair.key
    name = item_id if item_id.startswith(task) else f"{task} {item_id}"
    title = f"{name}: prefix ratio {pair.prefix_ratio:.3f}, first difference at character {first}"
    return SideBySide(title, base, candidate, shown_answer(pair.base, start),
                      shown_answer(pair.other, start))


def task_lines(ex: Examined) -> list[Block]:
    c = ex.comparison
    cand = c.candidate.label
    judged = {a.task for a in ex.accuracy}
    lines: list[Block] = []
    noises = [n.label for n in c.noises]
    for t in (t for t in c.tasks if t.task not in ex.by_position):
        check = None if t.task in judged else first(ex.checks, t.task, "drift")
        said = drift_sentence(t, cand, check, testable(ex.checks), noises, t.task in judged)
        lines.append(f"{t.task}: {said}")
        if t.instability:
            lines.append(f"{t.task}: {instability_sentence(t, cand, [r.label for r in c.repeats])}")
        if t.reasoning is not None:
            lines.append(f"{t.task}: {reasoning_sentence(t.reasoning, cand)}")
    return lines


def compare_blocks(setup: Setup | None, ex: Examined) -> list[Block]:
    c = ex.comparison
    blocks: list[Block] = [Heading("kveval compare"),
                           sides_block(("baseline", c.base), ("candidate", c.candidate),
                                       *(("noise", n) for n in c.noises),
                                       *(("candidate repeat", r) for r in c.repeats))]
    blocks += setup_blocks(setup)
    hide = ex.by_position
    if any(t.task not in hide for t in c.tasks):
        blocks += [drift_table(c, hide), *task_lines(ex)]
        blocks += [Heading("collapse"), collapse_table(c, hide), REPETITION_NOTE,
                   *check_lines(ex)]
    blocks += headed(ex.curves, ex.checks) + divergence_blocks(ex) + context_blocks(ex)
    warned = warnings_sentence(ex)
    blocks += [f"divergence: {warned}"] if warned else []
    blocks += [Heading("checks"), checks_table(ex.checks), *detectable_lines(ex)]
    blocks += [Note(n) for n in notices(ex)]
    blocks.append(pairing_line(c.pairing, c.base.label, c.candidate.label))
    blocks += not_forced_lines(c.candidate, *c.noises)
    for t in c.tasks:
        blocks += [diverged_block(p, c.base.label, c.candidate.label) for p in t.diverged]
    return blocks
