"""`kveval gate` as blocks: one verdict per task, the reason in words, the summary line."""

from __future__ import annotations

from kveval.judge.accuracy import PairedComparison
from kveval.judge.compare import TaskDrift
from kveval.judge.verdict import GateReport, TaskDecision, paired_regression
from kveval.show.blocks import Block, Heading, Table
from kveval.show.compare_view import collapse_table
from kveval.show.sections import pairing_line, setup_blocks, sides_block
from kveval.show.words import (
    REPETITION_NOTE,
    accuracy_text,
    drift_sentence,
    instability_sentence,
    loss_sentence,
    overlap_sentence,
    p_text,
    paired_sentence,
    reasoning_sentence,
    worst_sentence,
)

WORDS = {"pass": "pass", "regression": "REGRESSION", "cannot judge": "CANNOT JUDGE",
         "skipped": "skipped", "not judged": "not judged"}


def _comparison(r: GateReport, task: str) -> PairedComparison | None:
    return next((c for c in r.accuracy if c.task == task), None)


def _drift(r: GateReport, task: str) -> TaskDrift | None:
    return next((t for t in r.comparison.tasks if t.task == task), None)


def paired_reason(d: TaskDecision, comp: PairedComparison, margin: float) -> str:
    if d.cannot_judge is not None:
        return f"cannot judge: {d.cannot_judge}"
    worst = comp.decisive
    held = not paired_regression(worst.difference, margin)
    verdict = "rules out a loss larger than" if held else "a loss larger than"
    tail = "" if held else " is not ruled out"
    case = "in the worst case " if comp.worst else ""
    return f"{case}{verdict} {margin:g} points{tail}; {loss_sentence(worst, margin)}"


def drift_reason(d: TaskDecision, r: GateReport) -> str:
    cand = r.comparison.candidate.label
    noise = r.comparison.noise.label if r.comparison.noise else None
    drift = _drift(r, d.task)
    sentence = drift_sentence(drift, cand, noise) if drift else "no pairs"
    tested = sum(x.drift_p is not None for x in r.decisions)
    if d.drift_p is None or tested < 2:
        return sentence
    return f"{sentence}; Holm-adjusted across {tested} tasks {p_text(d.drift_p)}"


def decision_reason(d: TaskDecision, r: GateReport) -> str:
    if d.detail is not None:
        return d.detail
    comp = _comparison(r, d.task)
    if d.skipped:
        return "skipped (--skip)"
    if d.rule is None and d.cannot_judge is not None:
        return f"cannot judge: {d.cannot_judge}"
    if d.rule == "overlap" and comp is not None:
        return overlap_sentence(comp, r.comparison.candidate.label)
    if d.rule == "paired" and comp is not None:
        return paired_reason(d, comp, r.margin)
    if d.rule == "drift":
        return drift_reason(d, r)
    return "not judged: no ground truth, and no --noise run to measure drift against"


def collapse_reason(d: TaskDecision, r: GateReport) -> str | None:
    drift = _drift(r, d.task)
    c = drift.collapse if drift else None
    if c is None or d.collapse_p is None or d.skipped:
        return None
    if not c.candidate.collapsed and not d.collapsed:
        return None  # nothing cut short or empty: the collapse table says so
    cand = r.comparison.candidate
    floor = ("the noise floor's" if c.noise else f"the baseline's ({r.comparison.base.label})")
    counts = ", ".join(str(n.collapsed) for n in c.noise) or str(c.baseline.collapsed)
    word = "COLLAPSE" if d.collapsed else "within chance"
    return (f"{d.task} collapse: {cand.label} has {c.candidate.collapsed} of "
            f"{c.candidate.answers} answers truncated or empty, {floor} {counts}; "
            f"{p_text(d.collapse_p)} (one-sided, Holm-adjusted across tasks): {word}")


def _metric(comp: PairedComparison | None) -> str:
    if comp is None:
        return "-"
    return "" if comp.sole_metric else comp.metric


def gate_rows(r: GateReport) -> tuple[tuple[str, ...], ...]:
    rows = []
    for d in r.decisions:
        comp = _comparison(r, d.task) if d.rule != "recovery" else None
        rule = d.rule or "-"
        rows.append((d.task, rule + (" + collapse" if d.collapsed else ""), _metric(comp),
                     accuracy_text(comp.baseline) if comp else "-",
                     accuracy_text(comp.candidate) if comp else "-", WORDS[d.status]))
    return tuple(rows)


def gate_summary(r: GateReport) -> str:
    rule = f"policy {r.policy}" + (f", margin {r.margin:g} points" if r.policy == "paired" else "")
    failed = [d.task + (" (AUC recovery)" if d.rule == "recovery" else "")
              for d in r.decisions if d.passed is False]
    unjudged = [d.task for d in r.decisions if d.status == "cannot judge"]
    skipped = [d.task for d in r.decisions if d.skipped]
    extra = f"; skipped {', '.join(skipped)}" if skipped else ""
    if failed:
        more = f"; cannot judge {', '.join(unjudged)}" if unjudged else ""
        return f"gate: REGRESSION in {', '.join(failed)} ({rule}{more}{extra}); exit 1"
    if unjudged:
        return (f"gate: CANNOT JUDGE {', '.join(unjudged)} ({rule}{extra}); exit 2; "
                f"--skip {' --skip '.join(unjudged)} judges the rest")
    return f"gate: PASS ({rule}{extra}); exit 0"


def information_lines(r: GateReport) -> list[Block]:
    """Drift of tasks judged by accuracy, the candidate's own instability, the reasoning and
    the worst case under the overlap policy: shown, not judged."""
    c = r.comparison
    base, cand = c.base.label, c.candidate.label
    noise = c.noise.label if c.noise else None
    by_accuracy = {a.task for a in r.accuracy}
    lines: list[Block] = []
    for t in c.tasks:
        if t.task in by_accuracy:
            lines.append(f"{t.task}: drift, not judged: {t.task} is judged by accuracy; "
                         f"{drift_sentence(t, cand, noise)}")
        if t.instability:
            lines.append(f"{t.task}: {instability_sentence(t, cand, [x.label for x in c.repeats])}")
        if t.reasoning is not None:
            lines.append(f"{t.task}: {reasoning_sentence(t.reasoning, cand)}")
    for a in r.accuracy:
        name = a.task if a.sole_metric else f"{a.task} {a.metric}"
        if r.policy == "overlap":
            lines.append(f"{name}: {paired_sentence(a, base, cand)}")
        if a.worst is not None:
            margin = r.margin if r.policy == "paired" else None
            lines.append(f"{name}: {worst_sentence(a.worst, cand, margin)}")
    return lines


def gate_blocks(r: GateReport) -> list[Block]:
    c = r.comparison
    base, cand = c.base.label, c.candidate.label
    blocks: list[Block] = [Heading(f"kveval gate: {r.verdict.upper()}"),
                           sides_block(("baseline", c.base), ("candidate", c.candidate),
                                       *(("noise", n) for n in c.noises),
                                       *(("candidate repeat", x) for x in c.repeats))]
    blocks += setup_blocks(r.setup)
    blocks.append(Table(("task", "judged by", "metric", base, cand, "verdict"), gate_rows(r)))
    blocks += [f"{d.task}: {decision_reason(d, r)}" for d in r.decisions]
    blocks += [line for d in r.decisions if (line := collapse_reason(d, r))]
    blocks += information_lines(r)
    blocks += [Heading("collapse"), collapse_table(c), REPETITION_NOTE]
    blocks += [pairing_line(c.pairing, base, cand), gate_summary(r)]
    return blocks
