"""Renderings of verdicts: terminal text, a Markdown block to paste into a PR, and JSON.

A report is first a list of blocks (a heading, a line, a table, two answers side by side);
`to_text` and `to_markdown` render the same blocks two ways. JSON is built separately from
the verdict objects as plain dicts, so its shape does not depend on the layout.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

from kveval.judge.compare import ALPHA, Comparison, Drift, NoiseTest, Pair, Pairing, Side, TaskDrift
from kveval.judge.stats import Interval
from kveval.judge.verdict import (
    Accuracy,
    GateReport,
    PairedComparison,
    ScoreReport,
    Setup,
    TaskDecision,
    TaskScore,
)

WIDTH = 100  # terminal width of side-by-side answers
SIDE_LINES = 12  # lines of each answer shown side by side
CONTEXT = 40  # characters shown before the first difference
MAX_DIFFERENCES = 20  # fingerprint differences listed before "... and N more"


@dataclass(frozen=True)
class Heading:
    text: str


@dataclass(frozen=True)
class Note:
    text: str  # a warning


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class SideBySide:
    title: str
    left_label: str
    right_label: str
    left: str
    right: str


@dataclass(frozen=True)
class Rendered:
    """A section another module renders itself (e.g. a long-context length x depth grid)."""

    text: str
    markdown: str
    data: dict[str, Any]  # its JSON form


Block = str | Heading | Note | Table | SideBySide | Rendered  # a str is one line of prose


# ---------------------------------------------------------------- numbers in words


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def span(interval: Interval) -> str:
    return f"{100 * interval.low:.1f} to {100 * interval.high:.1f}"


def signed(x: float) -> str:
    return f"{100 * x:+.1f}"


def points(x: float) -> str:
    return f"{100 * x:.1f}"


def p_text(p: float) -> str:
    if p < 0.0001:
        return "p < 0.0001"
    if p < 0.001:
        return f"p = {p:.4f}"
    return f"p = {p:.3f}" if p < 0.01 else f"p = {p:.2f}"


def accuracy_text(acc: Accuracy | None) -> str:
    """`459/500  91.8%  89.1 to 93.9`, as the published FP8-KV reports print it."""
    if acc is None or acc.n == 0:
        return "-"
    return f"{acc.correct}/{acc.n}  {pct(acc.rate)}  {span(acc.interval)}"


def overlap_sentence(c: PairedComparison, candidate: str) -> str:
    if c.overlap:
        return "intervals overlap: no difference shown"
    side = "lower" if c.candidate.interval.high < c.baseline.interval.low else "higher"
    return f"intervals do not overlap: {candidate} is {side}"


def loss_sentence(c: PairedComparison) -> str:
    """The largest loss the paired data cannot rule out, in one sentence."""
    n, d = c.table.n, c.difference
    if d.high < 0:
        return (f"{n} questions show a loss of at least {points(-d.high)} points "
                f"(up to {points(-d.low)}).")
    if c.largest_loss == 0:
        return f"{n} questions rule out any loss."
    return f"{n} questions cannot rule out a loss of {points(c.largest_loss)} points."


def paired_sentence(c: PairedComparison, base: str, candidate: str) -> str:
    t = c.table
    return (f"paired on {t.n} items: {candidate} got {t.lost} wrong that {base} got right and "
            f"{t.gained} right that {base} got wrong (exact McNemar {p_text(c.p_value)}); "
            f"difference {signed(t.difference)} points, 95% CI {signed(c.difference.low)} to "
            f"{signed(c.difference.high)}. {loss_sentence(c)}")


def drift_sentence(d: TaskDrift, candidate: str, noise: str | None) -> str:
    if d.test is None or noise is None:
        c = d.candidate
        return (f"{candidate} changed {c.changed} of {c.pairs} answers "
                f"({pct(c.changed / c.pairs if c.pairs else None)}); no noise run to compare with")
    return noise_sentence(d.test, candidate, noise)


def noise_sentence(t: NoiseTest, candidate: str, noise: str) -> str:
    if t.drifts_more:
        verdict = "more drift than the noise floor"
    elif t.candidate_only < t.noise_only and t.p_value < ALPHA:
        verdict = "less drift than the noise run"
    else:
        verdict = "within the noise floor"
    return (f"{candidate} changed {t.candidate_changed} of {t.items} answers; the noise run "
            f"{noise} changed {t.noise_changed}; {p_text(t.p_value)} (exact McNemar on the same "
            f"items): {verdict}")


# ---------------------------------------------------------------- shared sections


def sides_block(*named: tuple[str, Side | None]) -> Table:
    rows = tuple((role, side.label, side.path) for role, side in named if side is not None)
    return Table(("run", "label", "file"), rows)


def setup_blocks(setup: Setup | None) -> list[Block]:
    if setup is None or not setup.models:
        return []
    base, cand = setup.labels[0], setup.labels[1]
    rows = [("model", _arrow(setup.models[0], setup.models[1]))]
    shown = [d for d in setup.differences if d.key != "model"]
    rows += [(d.key, _arrow(d.base, d.other)) for d in shown[:MAX_DIFFERENCES]]
    if len(shown) > MAX_DIFFERENCES:
        rows.append(("...", f"and {len(shown) - MAX_DIFFERENCES} more differences"))
    blocks: list[Block] = [Table(("setup", f"{base} → {cand}"), tuple(rows))]
    return blocks + [Note(w) for w in setup.warnings]


def _arrow(a: str | None, b: str | None) -> str:
    a, b = _short(a), _short(b)
    return a if a == b else f"{a} → {b}"


def _short(value: str | None, limit: int = 60) -> str:
    if value is None:
        return "(absent)"
    return value if len(value) <= limit else value[: limit - 3] + "..."


def pairing_line(pairing: Pairing, base: str, other: str) -> str:
    parts = [f"{len(pairing.pairs)} paired items"]
    if pairing.only_base:
        parts.append(f"{pairing.only_base} only in {base}")
    if pairing.only_other:
        parts.append(f"{pairing.only_other} only in {other}")
    if pairing.with_errors:
        parts.append(f"{pairing.with_errors} left out as errors")
    return "pairing: " + "; ".join(parts)


# ---------------------------------------------------------------- compare


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


# ---------------------------------------------------------------- score

TaskExtras = Mapping[str, Sequence[Block]]  # per task: sections appended below its score


def _metric_label(score: TaskScore, metric: str) -> str:
    return metric if score.strict is not None else ""


def score_rows(scores: Sequence[TaskScore]) -> tuple[tuple[str, ...], ...]:
    rows = []
    for s in scores:
        if s.flexible is None:
            continue
        rows.append((s.task, _metric_label(s, "flexible"), accuracy_text(s.flexible),
                     str(s.errors)))
        if s.strict is not None:
            rows.append((s.task, "strict", accuracy_text(s.strict), str(s.errors)))
    return tuple(rows)


def unscored_lines(scores: Sequence[TaskScore]) -> list[str]:
    return [f"{s.task}: {s.unscored} answered, no ground truth; {s.errors} errors"
            for s in scores if s.flexible is None]


def paired_rows(comps: Sequence[PairedComparison], candidate: str) -> tuple[tuple[str, ...], ...]:
    strict = {c.task for c in comps if c.metric == "strict"}
    return tuple(
        (c.task, c.metric if c.task in strict else "", accuracy_text(c.baseline),
         accuracy_text(c.candidate), overlap_sentence(c, candidate))
        for c in comps
    )


def score_blocks(r: ScoreReport, extras: TaskExtras | None = None) -> list[Block]:
    blocks: list[Block] = [Heading(f"kveval score: {r.run.label}"),
                           sides_block(("run", r.run), ("baseline", r.baseline))]
    if r.run.truncated_tail and r.setup is None:
        blocks.append(Note(f"{r.run.path}: the last line was cut short (a crash mid-write) "
                           "and skipped"))
    rows = score_rows(r.scores)
    if rows:
        blocks.append(Table(("task", "metric", "accuracy and 95% interval", "errors"), rows))
    blocks += unscored_lines(r.scores)
    for task, extra in (extras or {}).items():
        if extra:
            blocks += [Heading(task), *extra]
    if r.baseline is None or r.pairing is None:
        return blocks
    base, cand = r.baseline.label, r.run.label
    blocks += [Heading(f"against the baseline {base}"), *setup_blocks(r.setup)]
    blocks.append(Table(("task", "metric", base, cand, "overlap verdict"),
                        paired_rows(r.accuracy, cand)))
    blocks += [f"{c.task} {c.metric}: {paired_sentence(c, base, cand)}" for c in r.accuracy]
    blocks.append(pairing_line(r.pairing, base, cand))
    return blocks


# ---------------------------------------------------------------- gate


def decision_reason(d: TaskDecision, r: GateReport) -> str:
    if d.detail is not None:
        return d.detail
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
        comp = comps.get(d.task) if d.rule != "recovery" else None
        rows.append((d.task, d.rule or "-", comp.metric if comp else "-",
                     accuracy_text(comp.baseline) if comp else "-",
                     accuracy_text(comp.candidate) if comp else "-", _verdict_word(d)))
    return tuple(rows)


def gate_summary(r: GateReport) -> str:
    failed = [d.task + (" (AUC recovery)" if d.rule == "recovery" else "")
              for d in r.decisions if d.passed is False]
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


# ---------------------------------------------------------------- text


def to_text(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out += ["", block.text] if out else [block.text]
        elif isinstance(block, Note):
            out.append(f"warning: {block.text}")
        elif isinstance(block, Table):
            out += [""] + _text_table(block) + [""]
        elif isinstance(block, SideBySide):
            out += [""] + _text_side_by_side(block)
        elif isinstance(block, Rendered):
            out += ["", block.text, ""]
        else:
            out.append(block)
    return "\n".join(_squeeze(out)).strip("\n") + "\n"


def _squeeze(lines: list[str]) -> list[str]:
    """No two blank lines in a row."""
    return [line for i, line in enumerate(lines) if line or i == 0 or lines[i - 1]]


def _text_table(table: Table) -> list[str]:
    rows = [table.header, *table.rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(table.header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def _wrap(text: str, width: int) -> list[str]:
    lines = [part for line in text.splitlines() or [""]
             for part in (textwrap.wrap(line, width, drop_whitespace=False) or [""])]
    return lines[:SIDE_LINES] + (["..."] if len(lines) > SIDE_LINES else [])


def _text_side_by_side(block: SideBySide) -> list[str]:
    width = (WIDTH - 3) // 2
    left, right = _wrap(block.left, width), _wrap(block.right, width)
    lines = [block.title, f"{block.left_label:<{width}} | {block.right_label}"]
    lines += [f"{a:<{width}} | {b}".rstrip() for a, b in zip_longest(left, right, fillvalue="")]
    return lines


# ---------------------------------------------------------------- markdown


def to_markdown(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for i, block in enumerate(blocks):
        if isinstance(block, Heading):
            out.append(("### " if i == 0 else "#### ") + block.text)
        elif isinstance(block, Note):
            out.append(f"> **warning:** {_md_escape(block.text)}")
        elif isinstance(block, Table):
            out.append(_md_table(block))
        elif isinstance(block, SideBySide):
            out.append(_md_side_by_side(block))
        elif isinstance(block, Rendered):
            out.append(block.markdown)
        else:
            out.append(_md_escape(block))
    return "\n\n".join(out) + "\n"


def _md_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|")


def _md_cell(text: str) -> str:
    return _md_escape(text).replace("\n", "<br>") or " "


def _md_table(table: Table) -> str:
    lines = ["| " + " | ".join(_md_cell(h) for h in table.header) + " |",
             "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _md_side_by_side(block: SideBySide) -> str:
    limit = 80 * SIDE_LINES
    table = Table((block.left_label, block.right_label),
                  ((block.left[:limit], block.right[:limit]),))
    return (f"<details><summary>{_md_escape(block.title)}</summary>\n\n{_md_table(table)}"
            "\n\n</details>")


# ---------------------------------------------------------------- json


def dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2)


def interval_json(interval: Interval) -> list[float]:
    return [interval.low, interval.high]


def accuracy_json(acc: Accuracy | None) -> dict[str, Any] | None:
    if acc is None:
        return None
    return {"correct": acc.correct, "n": acc.n, "accuracy": acc.rate,
            "interval": interval_json(acc.interval)}


def side_json(side: Side | None) -> dict[str, Any] | None:
    return None if side is None else {"label": side.label, "path": side.path}


def setup_json(setup: Setup | None) -> dict[str, Any] | None:
    if setup is None:
        return None
    return {
        "labels": list(setup.labels),
        "models": list(setup.models),
        "concurrency": list(setup.concurrency),
        "differences": [{"key": d.key, "baseline": d.base, "candidate": d.other}
                        for d in setup.differences],
        "warnings": list(setup.warnings),
    }


def pairing_json(p: Pairing) -> dict[str, int]:
    return {"pairs": len(p.pairs), "only_baseline": p.only_base, "only_other": p.only_other,
            "with_errors": p.with_errors}


def drift_json(d: Drift | None) -> dict[str, Any] | None:
    if d is None:
        return None
    return {"pairs": d.pairs, "identical": d.identical, "changed": d.changed,
            "mean_prefix_ratio": d.mean_prefix_ratio,
            "median_first_difference": d.median_first_difference}


def test_json(t: NoiseTest | None) -> dict[str, Any] | None:
    if t is None:
        return None
    return {"items": t.items, "candidate_changed": t.candidate_changed,
            "noise_changed": t.noise_changed, "candidate_only": t.candidate_only,
            "noise_only": t.noise_only, "p_value": t.p_value, "drifts_more": t.drifts_more}


def task_drift_json(t: TaskDrift, candidate: str, noise: str | None) -> dict[str, Any]:
    return {
        "task": t.task,
        "candidate": drift_json(t.candidate),
        "noise": drift_json(t.noise),
        "noise_test": test_json(t.test),
        "summary": drift_sentence(t, candidate, noise),
        "diverged": [{"item_id": p.key[1], "prefix_ratio": p.prefix_ratio,
                      "first_difference": p.first_difference, "baseline": p.base_text,
                      "candidate": p.other_text} for p in t.diverged],
    }


def compare_json(setup: Setup | None, c: Comparison) -> dict[str, Any]:
    noise = c.noise.label if c.noise else None
    return {
        "command": "compare",
        "baseline": side_json(c.base),
        "candidate": side_json(c.candidate),
        "noise": side_json(c.noise),
        "setup": setup_json(setup),
        "pairing": pairing_json(c.pairing),
        "tasks": [task_drift_json(t, c.candidate.label, noise) for t in c.tasks],
    }


def paired_json(c: PairedComparison, base: str, candidate: str) -> dict[str, Any]:
    t = c.table
    return {
        "task": c.task, "metric": c.metric,
        "baseline": accuracy_json(c.baseline), "candidate": accuracy_json(c.candidate),
        "both": t.both, "lost": t.lost, "gained": t.gained, "neither": t.neither,
        "p_value": c.p_value, "difference": t.difference,
        "difference_interval": interval_json(c.difference),
        "largest_loss": c.largest_loss, "overlap": c.overlap,
        "overlap_verdict": overlap_sentence(c, candidate),
        "summary": paired_sentence(c, base, candidate),
    }


def block_json(block: Block) -> dict[str, Any]:
    if isinstance(block, Table):
        return {"header": list(block.header), "rows": [list(r) for r in block.rows]}
    if isinstance(block, (Heading, Note)):
        return {"heading" if isinstance(block, Heading) else "warning": block.text}
    if isinstance(block, SideBySide):
        return {"title": block.title, block.left_label: block.left, block.right_label: block.right}
    if isinstance(block, Rendered):
        return block.data
    return {"text": block}


def score_json(r: ScoreReport, extras: TaskExtras | None = None) -> dict[str, Any]:
    extras = extras or {}
    base = r.baseline.label if r.baseline else ""
    return {
        "command": "score",
        "run": side_json(r.run),
        "tasks": [{"task": s.task, "items": s.items, "errors": s.errors, "unscored": s.unscored,
                   "flexible": accuracy_json(s.flexible), "strict": accuracy_json(s.strict),
                   "extras": [block_json(b) for b in extras.get(s.task, ())]}
                  for s in r.scores],
        "baseline": side_json(r.baseline),
        "setup": setup_json(r.setup),
        "pairing": pairing_json(r.pairing) if r.pairing else None,
        "paired": [paired_json(c, base, r.run.label) for c in r.accuracy],
    }


def gate_json(r: GateReport) -> dict[str, Any]:
    c = r.comparison
    base, cand = c.base.label, c.candidate.label
    noise = c.noise.label if c.noise else None
    comps = {a.task: a for a in r.accuracy}
    drifts = {t.task: t for t in c.tasks}
    return {
        "command": "gate",
        "verdict": "pass" if r.passed else "regression",
        "exit_code": r.exit_code,
        "policy": r.policy, "margin_points": r.margin if r.policy == "paired" else None,
        "metric": r.metric,
        "baseline": side_json(c.base), "candidate": side_json(c.candidate),
        "noise": side_json(c.noise),
        "setup": setup_json(r.setup),
        "pairing": pairing_json(c.pairing),
        "tasks": [{"task": d.task, "rule": d.rule, "passed": d.passed,
                   "reason": decision_reason(d, r),
                   "accuracy": paired_json(comps[d.task], base, cand) if d.task in comps else None,
                   "drift": task_drift_json(drifts[d.task], cand, noise)}
                  for d in r.decisions],
        "summary": gate_summary(r),
    }


def cannot_judge_json(reason: str) -> dict[str, Any]:
    return {"command": "gate", "verdict": "cannot judge", "exit_code": 2, "reason": reason}
