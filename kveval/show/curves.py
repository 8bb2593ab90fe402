"""Length curves rendered: a table per task with each length's paired test, the AUC-recovery
and effective-length sentences, and JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kveval.judge.checks import Check, first, of_task
from kveval.judge.compare import Side
from kveval.judge.curves import Bucket, Curve, CurveOptions, Effective, Recovery, task_curves
from kveval.judge.grid import length_label
from kveval.judge.lengthstats import PairedScores
from kveval.safe import markdown as md_escape
from kveval.safe import terminal
from kveval.show.blocks import Block, Heading, Rendered
from kveval.show.words import check_result, p_value, testable


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _span(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{low:.2f}, {high:.2f}]"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _length(value: int | None) -> str:
    return "none" if value is None else length_label(value)


# ---------------------------------------------------------------- sentences


def recovery_sentence(r: Recovery, label: str, check: Check | None = None,
                      family: int = 1) -> str:
    if r.value is None:
        return f"AUC recovery: cannot judge (no paired items, or the {label} AUC is 0)"
    span = "" if r.low is None or r.high is None else \
        f" (paired bootstrap 95%: {_pct(r.low)} to {_pct(r.high)})"
    text = f"AUC recovery {_pct(r.value)} of {label}{span}"
    if r.minimum is not None and check is not None:
        text += (f"; below {_pct(r.minimum)} {check_result(check, family)}")
    return text


def across_sentence(s: PairedScores, check: Check | None, family: int) -> str:
    return (f"every length together (graded scores, paired): mean {_num(s.baseline_mean)} -> "
            f"{_num(s.mean)} on {s.pairs} items; lower {check_result(check, family)}")


def _effective_text(e: Effective) -> str:
    span = "" if e.low == e.high and e.low == e.length else \
        f" (bootstrap 95%: {_length(e.low)} to {_length(e.high)})"
    return f"{_length(e.length)}{span}"


def effective_sentence(c: Curve) -> str:
    first_bucket = next((b for b in c.buckets if b.mean is not None), None)
    if c.threshold is None or first_bucket is None:
        relative = "relative: none (the shortest length scores 0)"
    else:
        relative = (f"relative {_effective_text(c.relative)}: every length up to it scores at "
                    f"least {c.threshold:.3f} ({c.threshold_fraction:g} x the "
                    f"{length_label(first_bucket.length)} score)")
    absolute = (f"absolute {_effective_text(c.absolute)}: every length up to it scores at "
                f"least {c.absolute.threshold:g}")
    text = f"effective length, {relative}; {absolute}"
    if c.versus is not None:
        text += f"; {c.versus.label}, relative: {_length(c.versus.effective_length)}"
    return text


def lines(c: Curve, checks: Sequence[Check] = ()) -> list[str]:
    auc = f"AUC over log-length {_num(c.auc)}"
    if c.versus is None:
        return [auc, effective_sentence(c)]
    v, family = c.versus, testable(checks)
    found = [f"{auc} ({v.label}: {_num(v.auc)}); "
             f"{recovery_sentence(v.recovery, v.label, first(checks, c.task, 'recovery'), family)}"]
    if not v.across.binary:
        found.append(across_sentence(v.across, first(checks, c.task, "lengths"), family))
    return found + [effective_sentence(c)]


# ---------------------------------------------------------------- the table


def _header(c: Curve) -> list[str]:
    head = ["length", "n", "mean score", "95% interval"]
    if c.versus is not None:
        head += ["pairs", f"{c.versus.label} (paired)", "this run (paired)", "change",
                 "lower: p (adjusted)", "result"]
    return head


def _test_cells(check: Check | None) -> list[str]:
    if check is None:
        return ["-", "-"]
    if not check.testable:
        return [p_value(check.p_value), "cannot reach alpha"]
    return [f"{p_value(check.p_value)} ({p_value(check.adjusted_p)})",
            "SHOWN" if check.alarmed else "-"]


def _row(b: Bucket, p: PairedScores | None, check: Check | None) -> list[str]:
    row = [length_label(b.length), str(b.n), _num(b.mean), _span(b.low, b.high)]
    if p is not None:
        change = "-" if p.difference is None else f"{p.difference:+.3f}"
        row += [str(p.pairs), _num(p.baseline_mean), _num(p.mean), change, *_test_cells(check)]
    return row


def rows(c: Curve, checks: Sequence[Check] = ()) -> list[list[str]]:
    paired: Sequence[PairedScores | None] = c.versus.paired if c.versus else [None] * len(c.buckets)
    by_label = {x.label: x for x in of_task(checks, c.task, "length")}
    return [_row(b, p, by_label.get(length_label(b.length)))
            for b, p in zip(c.buckets, paired, strict=True)]


def title(c: Curve) -> str:
    return f"{c.task}: length curve (mean score per length)"


def render_text(c: Curve, checks: Sequence[Check] = ()) -> str:
    head, body = _header(c), rows(c, checks)
    widths = [max(len(cell) for cell in column) for column in zip(head, *body, strict=True)]
    out = [terminal(title(c))]
    for row in (head, *body):
        cells = [row[0].ljust(widths[0])] + [x.rjust(w) for x, w in
                                             zip(row[1:], widths[1:], strict=True)]
        out.append("  " + "  ".join(terminal(x) for x in cells).rstrip())
    return "\n".join(out + [terminal(line) for line in lines(c, checks)])


def render_markdown(c: Curve, checks: Sequence[Check] = ()) -> str:
    head = _header(c)
    out = [f"**{md_escape(title(c))}**", "", "| " + " | ".join(md_escape(h) for h in head) + " |",
           "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    out += ["| " + " | ".join(md_escape(x) for x in row) + " |" for row in rows(c, checks)]
    return "\n".join(out + [""] + [md_escape(line) + "  " for line in lines(c, checks)])


# ---------------------------------------------------------------- JSON


def _bucket_json(b: Bucket, p: PairedScores | None) -> dict[str, Any]:
    found: dict[str, Any] = {"length": b.length, "n": b.n, "mean": b.mean,
                             "interval": None if b.low is None else [b.low, b.high]}
    if p is not None:
        found.update(pairs=p.pairs, paired_mean=p.mean, baseline_paired_mean=p.baseline_mean,
                     difference=p.difference, lost=p.lost, gained=p.gained, p_value=p.p_value)
    return found


def _effective_json(e: Effective) -> dict[str, Any]:
    return {"threshold": e.threshold, "length": e.length, "interval": [e.low, e.high]}


def to_json(c: Curve, checks: Sequence[Check] = ()) -> dict[str, Any]:
    """The `length_curve` object of a task in `--json`."""
    v = c.versus
    paired: Sequence[PairedScores | None] = v.paired if v else [None] * len(c.buckets)
    return {
        "buckets": [_bucket_json(b, p) for b, p in zip(c.buckets, paired, strict=True)],
        "auc": c.auc,
        "auc_recovery": None if v is None else {
            "value": v.recovery.value, "low": v.recovery.low, "high": v.recovery.high,
            "minimum": v.recovery.minimum, "p_below_minimum": v.recovery.p_below,
            "fewest_pairs": v.fewest_pairs},
        "across_lengths": None if v is None else {
            "pairs": v.across.pairs, "baseline_mean": v.across.baseline_mean,
            "mean": v.across.mean, "p_value": v.across.p_value, "graded": not v.across.binary},
        "effective_length": c.effective_length,
        "effective_threshold": {"fraction": c.threshold_fraction, "score": c.threshold},
        "effective": {"relative": _effective_json(c.relative),
                      "absolute": _effective_json(c.absolute)},
        "baseline": None if v is None else {
            "label": v.label, "auc": v.auc, "effective_length": v.effective_length,
            "buckets": [_bucket_json(b, None) for b in v.buckets]},
        "summary": lines(c, checks),
    }


def blocks(found: dict[str, Curve], checks: Sequence[Check] = ()) -> dict[str, list[Block]]:
    """Each task's curve as one block, by task name."""
    return {task: [Rendered(render_text(c, checks), render_markdown(c, checks),
                            to_json(c, checks))] for task, c in found.items()}


def headed(found: dict[str, Curve], checks: Sequence[Check] = ()) -> list[Block]:
    """Each task's curve under a heading with the task's name."""
    return [b for task, extra in blocks(found, checks).items() for b in (Heading(task), *extra)]


def attach(data: dict[str, Any], found: dict[str, Curve],
           checks: Sequence[Check] = ()) -> dict[str, Any]:
    """Each long-context task of a --json report gains its `length_curve`."""
    for task in data.get("tasks", []):
        if task.get("task") in found:
            task["length_curve"] = to_json(found[task["task"]], checks)
    return data


def noise_json(base: Side, noises: Sequence[Side], options: CurveOptions) -> list[dict[str, Any]]:
    """compare's `noise_length_curves`: each noise run's curves against the baseline."""
    out = []
    for side in noises:
        found = task_curves(side.items, base.items, base.label, options)
        tasks = attach({"tasks": [{"task": t} for t in found]}, found)["tasks"]
        out.append({"noise": side.label, "tasks": tasks})
    return out
