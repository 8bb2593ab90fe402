"""`kveval gate` as blocks: one verdict per task, the reason in words, every check of the
family with its adjusted p-value, and the summary line."""

from __future__ import annotations

from kveval.judge.accuracy import PairedComparison
from kveval.judge.checks import first
from kveval.judge.verdict import Examined, GateReport, TaskDecision
from kveval.show.blocks import Block, Heading, Note, Table
from kveval.show.checks_view import (
    check_lines,
    checks_table,
    notices,
    warnings_sentence,
)
from kveval.show.compare_view import collapse_table
from kveval.show.context_view import context_blocks
from kveval.show.curves import headed
from kveval.show.divergence import divergence_blocks, forced_blocks
from kveval.show.sections import pairing_line, setup_blocks, sides_block
from kveval.show.seen import detectable_lines
from kveval.show.words import (
    REPETITION_NOTE,
    accuracy_text,
    drift_sentence,
    instability_sentence,
    need_sentence,
    overlap_sentence,
    paired_sentence,
    plural,
    points,
    reasoning_sentence,
    signed,
    testable,
    worst_sentence,
)

WORDS = {"pass": "pass", "regression": "REGRESSION", "cannot judge": "CANNOT JUDGE",
         "skipped": "skipped", "not judged": "not judged"}


def _comparison(r: GateReport, task: str) -> PairedComparison | None:
    return next((c for c in r.accuracy if c.task == task), None)


def _accuracy_words(d: TaskDecision, comp: PairedComparison, r: GateReport) -> str:
    ex = r.examined
    check = first(ex.checks, d.task, "accuracy")
    base, cand = ex.comparison.base.label, ex.comparison.candidate.label
    family = testable(ex.checks)
    text = paired_sentence(comp, base, cand, check, family, ex.pooled(d.task))
    if comp.worst is not None:
        margin = d.margin if r.policy == "paired" else None
        text += f" {worst_sentence(comp.worst, cand, margin, check, family)}"
    return text


def paired_reason(d: TaskDecision, comp: PairedComparison, r: GateReport) -> str:
    margin = d.margin if d.margin is not None else r.margin
    worst = comp.decisive
    low, high = worst.difference.low, worst.difference.high
    if d.cannot_judge is not None:
        return f"cannot judge: {d.cannot_judge}"
    if d.outcome == "not_ruled_out":
        return (f"a loss above {margin:g} points not ruled out: the 95% CI of the difference, "
                f"{signed(low)} to {signed(high)} points, reaches below -{margin:g} "
                f"(a loss of {points(-low, margin)} points cannot be ruled out)")
    if d.status == "pass":
        return (f"rules out a loss above {margin:g} points: 95% CI {signed(low)} to "
                f"{signed(high)} points; {_accuracy_words(d, comp, r)}")
    return _accuracy_words(d, comp, r)


def decision_reason(d: TaskDecision, r: GateReport) -> str:
    comp = _comparison(r, d.task)
    drift = next((t for t in r.comparison.tasks if t.task == d.task), None)
    if d.skipped:
        return "skipped (--skip)"
    if d.not_judged is not None:
        return f"not judged: {d.not_judged}{need_words(r, d.task)}"
    if d.cannot_judge is not None and d.rule != "paired":
        return f"cannot judge: {d.cannot_judge}"
    if d.rule == "paired" and comp is not None:
        reason = paired_reason(d, comp, r)
    elif comp is not None:
        reason = (f"{overlap_sentence(comp, r.comparison.candidate.label)}; "
                  f"{_accuracy_words(d, comp, r)}")
    elif d.rule == "drift" and drift is not None:
        reason = drift_sentence(drift, r.comparison.candidate.label,
                                first(r.checks, d.task, "drift"), testable(r.checks),
                                [n.label for n in r.comparison.noises])
    else:
        reason = ("not judged: no ground truth, and no --noise run to measure drift against "
                  "(collapse is checked against the baseline)")
    others = [name for name in d.failed if name not in ("accuracy", "drift", "margin", "overlap")]
    return reason.rstrip(".") + (f"; also failed: {', '.join(others)}" if others else "")


def _metric(comp: PairedComparison | None) -> str:
    if comp is None:
        return "-"
    return "" if comp.sole_metric else comp.metric


def gate_rows(r: GateReport) -> tuple[tuple[str, ...], ...]:
    rows = []
    for d in r.decisions:
        comp = _comparison(r, d.task)
        failed = [n for n in d.failed if n not in ("accuracy", "drift", "margin", "overlap")]
        rule = (d.rule or "-") + (f" + {', '.join(failed)}" if failed else "")
        rows.append((d.task, rule, _metric(comp),
                     accuracy_text(comp.baseline) if comp else "-",
                     accuracy_text(comp.candidate) if comp else "-", WORDS[d.status]))
    return tuple(rows)


def _failures(r: GateReport) -> list[str]:
    found = []
    for d in r.decisions:
        if d.status == "regression":
            why = "a loss above the margin not ruled out" if d.outcome == "not_ruled_out" \
                else ", ".join(d.failed)
            found.append(f"{d.task} ({why})")
    return found


def need_words(r: GateReport, task: str) -> str:
    """What would judge a task, from the plan of these runs: "; 2,400 items and 2 noise runs
    would catch a loss of 2 points 80% of the time (kveval plan)"."""
    said = [need_sentence(n) for n in r.needs if n.task == task]
    return f"; {'; '.join(said)} (kveval plan)" if said else ""


def _rule(r: GateReport) -> str:
    ex = r.examined
    rule = f"policy {r.policy}" + (f", margin {r.margin:g} points" if r.policy == "paired" else "")
    return rule + f", alpha {ex.family.alpha:g}, {plural(testable(ex.checks), 'check')}"


def _aside(r: GateReport) -> str:
    """What a verdict names beside itself: tasks skipped and tasks not judged."""
    skipped = [d.task for d in r.decisions if d.skipped]
    idle = [d.task for d in r.decisions if d.status == "not judged"]
    return ((f"; skipped {', '.join(skipped)}" if skipped else "")
            + (f"; not judged: {', '.join(idle)}" if idle else ""))


def gate_summary(r: GateReport) -> str:
    rule, extra = _rule(r), _aside(r)
    unjudged = [d.task for d in r.decisions if d.status == "cannot judge"]
    warned = warnings_sentence(r.examined)
    warned = f"; {warned}" if warned else ""
    failed = _failures(r)
    if failed:
        more = f"; cannot judge {', '.join(unjudged)}" if unjudged else ""
        return f"gate: REGRESSION in {', '.join(failed)}{warned} ({rule}{more}{extra}); exit 1"
    if unjudged:
        return (f"gate: CANNOT JUDGE {', '.join(unjudged)} ({rule}{extra}); exit 2; "
                f"--skip {' --skip '.join(unjudged)} judges the rest")
    if r.judged_nothing:
        return (f"gate: CANNOT JUDGE: no check of any task could reach its level, so no "
                f"verdict either way{warned} ({rule}{extra}); exit 2; what would judge each "
                "task is said above it")
    return f"gate: PASS{warned} ({rule}{extra}); exit 0"


def information_lines(ex: Examined, policy: str) -> list[Block]:
    """Drift of tasks judged by accuracy, the candidate's own instability and the reasoning:
    shown, not judged."""
    c = ex.comparison
    cand = c.candidate.label
    by_accuracy = {a.task for a in ex.accuracy}
    noises = [n.label for n in c.noises]
    lines: list[Block] = []
    for t in c.tasks:
        if t.task in by_accuracy and t.changed is not None:
            lines.append(f"{t.task}: {drift_sentence(t, cand, None, 1, noises, True)}")
        if t.instability:
            lines.append(f"{t.task}: {instability_sentence(t, cand, [x.label for x in c.repeats])}")
        if t.reasoning is not None:
            lines.append(f"{t.task}: {reasoning_sentence(t.reasoning, cand)}")
    return lines


def verdict_blocks(r: GateReport) -> list[Block]:
    ex = r.examined
    c = ex.comparison
    base, cand = c.base.label, c.candidate.label
    blocks: list[Block] = [Table(("task", "judged by", "metric", base, cand, "verdict"),
                                 gate_rows(r))]
    blocks += [f"{d.task}: {decision_reason(d, r)}" for d in r.decisions]
    return blocks + check_lines(ex, accuracy=False) + detectable_lines(ex)


def gate_blocks(r: GateReport) -> list[Block]:
    ex = r.examined
    c = ex.comparison
    blocks: list[Block] = [Heading(f"kveval gate: {r.verdict.upper()}"),
                           sides_block(("baseline", c.base), ("candidate", c.candidate),
                                       *(("noise", n) for n in c.noises),
                                       *(("candidate repeat", x) for x in c.repeats))]
    blocks += setup_blocks(r.setup)
    blocks += verdict_blocks(r)
    blocks += information_lines(ex, r.policy)
    blocks += [Heading("checks"), checks_table(ex.checks)]
    if any(t.task not in ex.by_position for t in c.tasks):
        blocks += [Heading("collapse"), collapse_table(c, ex.by_position), REPETITION_NOTE]
    blocks += headed(ex.curves, ex.checks)
    blocks += divergence_blocks(ex)
    blocks += forced_blocks(ex)
    blocks += context_blocks(ex)
    blocks.append(pairing_line(c.pairing, c.base.label, c.candidate.label))
    blocks += [Note(n) for n in notices(ex)]
    return blocks + [gate_summary(r)]
