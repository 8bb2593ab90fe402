"""`kveval gate` as blocks: one verdict per task, the reason in words, the summary line."""

from __future__ import annotations

from kveval.judge.verdict import GateReport, TaskDecision
from kveval.show.blocks import Block, Heading, Table
from kveval.show.sections import pairing_line, setup_blocks, sides_block
from kveval.show.words import (
    accuracy_text,
    drift_sentence,
    loss_sentence,
    noise_sentence,
    overlap_sentence,
    paired_sentence,
)


def decision_reason(d: TaskDecision, r: GateReport) -> str:
    cand = r.comparison.candidate.label
    comp = next((c for c in r.accuracy if c.task == d.task), None)
    drift = next(t for t in r.comparison.tasks if t.task == d.task)
    if d.rule == "overlap" and comp is not None:
        return overlap_sentence(comp, cand)
    if d.rule == "paired" and comp is not None:
        margin = f"{r.margin:g}"
        if d.passed:
            return f"rules out a loss larger than {margin} points; {loss_sentence(comp)}"
        return f"a loss larger than {margin} points is not ruled out; {loss_sentence(comp)}"
    if d.rule == "drift" and drift.test is not None and r.comparison.noise is not None:
        return noise_sentence(drift.test, cand, r.comparison.noise.label)
    return "not judged: no ground truth, and no --noise run to measure drift against"


def _verdict_word(d: TaskDecision) -> str:
    return {True: "pass", False: "REGRESSION", None: "not judged"}[d.passed]


def gate_rows(r: GateReport) -> tuple[tuple[str, ...], ...]:
    comps = {c.task: c for c in r.accuracy}
    rows = []
    for d in r.decisions:
        comp = comps.get(d.task)
        rows.append((d.task, d.rule or "-", comp.metric if comp else "-",
                     accuracy_text(comp.baseline) if comp else "-",
                     accuracy_text(comp.candidate) if comp else "-", _verdict_word(d)))
    return tuple(rows)


def gate_summary(r: GateReport) -> str:
    failed = [d.task for d in r.decisions if d.passed is False]
    rule = f"policy {r.policy}" + (f", margin {r.margin:g} points" if r.policy == "paired" else "")
    if failed:
        return f"gate: REGRESSION in {', '.join(failed)} ({rule}); exit 1"
    return f"gate: PASS ({rule}); exit 0"


def gate_blocks(r: GateReport) -> list[Block]:
    c = r.comparison
    base, cand = c.base.label, c.candidate.label
    blocks: list[Block] = [Heading(f"kveval gate: {'PASS' if r.passed else 'REGRESSION'}"),
                           sides_block(("baseline", c.base), ("candidate", c.candidate),
                                       ("noise", c.noise))]
    blocks += setup_blocks(r.setup)
    blocks.append(Table(("task", "judged by", "metric", base, cand, "verdict"), gate_rows(r)))
    blocks += [f"{d.task}: {decision_reason(d, r)}" for d in r.decisions]
    blocks += [f"{a.task} {a.metric}: {paired_sentence(a, base, cand)}" for a in r.accuracy
               if r.policy == "overlap"]
    noise = c.noise.label if c.noise else None
    by_drift = {d.task for d in r.decisions if d.rule == "drift"}
    blocks += [f"{t.task} drift: {drift_sentence(t, cand, noise)}" for t in c.tasks
               if t.task not in by_drift]
    blocks += [pairing_line(c.pairing, base, cand), gate_summary(r)]
    return blocks
