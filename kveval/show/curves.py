"""Length curves rendered: a table per task, the AUC-recovery and trend sentences, and JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kveval.judge.curves import Bucket, Curve, PairedBucket, Recovery, SignTest
from kveval.judge.grid import length_label
from kveval.safe import markdown as md_escape
from kveval.safe import terminal


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _span(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{low:.2f}, {high:.2f}]"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _length(value: int | None) -> str:
    return "none" if value is None else length_label(value)


# ---------------------------------------------------------------- sentences


def recovery_sentence(r: Recovery, label: str) -> str:
    if r.value is None:
        return f"AUC recovery: cannot judge (no paired items, or the {label} AUC is 0)"
    span = "" if r.low is None or r.high is None else \
        f" (paired bootstrap 95%: {_pct(r.low)} to {_pct(r.high)})"
    return f"AUC recovery {_pct(r.value)} of {label}{span}"


def sign_sentence(s: SignTest) -> str:
    ties = f", {s.ties} tied" if s.ties else ""
    if s.p is None:
        return f"trend: no length bucket differs{ties}"
    return (f"trend: lower in {s.lower} of {s.buckets} length buckets{ties}, "
            f"sign test p = {s.p:.3g}")


def effective_sentence(c: Curve) -> str:
    if c.threshold is None:
        return "effective length: none (the shortest bucket scores 0)"
    first = next(b for b in c.buckets if b.mean is not None)
    text = (f"effective length {_length(c.effective_length)}: every bucket up to it scores at "
            f"least {c.threshold:.3f} ({c.threshold_fraction:g} x the "
            f"{length_label(first.length)} score)")
    if c.versus is not None:
        text += f"; {c.versus.label}: {_length(c.versus.effective_length)}"
    return text


def lines(c: Curve) -> list[str]:
    auc = f"AUC over log-length {_num(c.auc)}"
    if c.versus is None:
        return [auc, effective_sentence(c)]
    v = c.versus
    return [f"{auc} ({v.label}: {_num(v.auc)}); {recovery_sentence(v.recovery, v.label)}",
            sign_sentence(v.sign), effective_sentence(c)]


# ---------------------------------------------------------------- the table


def _header(c: Curve) -> list[str]:
    head = ["length", "n", "mean score", "95% interval"]
    if c.versus is not None:
        head += ["pairs", f"{c.versus.label} (paired)", "this run (paired)", "change"]
    return head


def _row(b: Bucket, p: PairedBucket | None) -> list[str]:
    row = [length_label(b.length), str(b.n), _num(b.mean), _span(b.low, b.high)]
    if p is not None:
        change = "-" if p.difference is None else f"{p.difference:+.3f}"
        row += [str(p.pairs), _num(p.baseline_mean), _num(p.mean), change]
    return row


def rows(c: Curve) -> list[list[str]]:
    paired: Sequence[PairedBucket | None] = c.versus.paired if c.versus else [None] * len(c.buckets)
    return [_row(b, p) for b, p in zip(c.buckets, paired, strict=True)]


def title(c: Curve) -> str:
    return f"{c.task}: length curve (mean score per length)"


def render_text(c: Curve) -> str:
    head, body = _header(c), rows(c)
    widths = [max(len(cell) for cell in column) for column in zip(head, *body, strict=True)]
    out = [terminal(title(c))]
    for row in (head, *body):
        cells = [row[0].ljust(widths[0])] + [x.rjust(w) for x, w in
                                             zip(row[1:], widths[1:], strict=True)]
        out.append("  " + "  ".join(terminal(x) for x in cells).rstrip())
    return "\n".join(out + [terminal(line) for line in lines(c)])


def render_markdown(c: Curve) -> str:
    head = _header(c)
    out = [f"**{md_escape(title(c))}**", "", "| " + " | ".join(md_escape(h) for h in head) + " |",
           "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows(c)]
    return "\n".join(out + [""] + [md_escape(line) + "  " for line in lines(c)])


# ---------------------------------------------------------------- JSON


def _bucket_json(b: Bucket, p: PairedBucket | None) -> dict[str, Any]:
    found: dict[str, Any] = {"length": b.length, "n": b.n, "mean": b.mean,
                             "interval": None if b.low is None else [b.low, b.high]}
    if p is not None:
        found.update(pairs=p.pairs, paired_mean=p.mean, baseline_paired_mean=p.baseline_mean,
                     difference=p.difference)
    return found


def to_json(c: Curve) -> dict[str, Any]:
    """The `length_curve` object of a task in `--json`."""
    v = c.versus
    paired: Sequence[PairedBucket | None] = v.paired if v else [None] * len(c.buckets)
    return {
        "buckets": [_bucket_json(b, p) for b, p in zip(c.buckets, paired, strict=True)],
        "auc": c.auc,
        "auc_recovery": None if v is None else {"value": v.recovery.value, "low": v.recovery.low,
                                                "high": v.recovery.high},
        "sign_test": None if v is None else {"lower": v.sign.lower, "buckets": v.sign.buckets,
                                             "p": v.sign.p, "higher": v.sign.higher,
                                             "ties": v.sign.ties},
        "effective_length": c.effective_length,
        "effective_threshold": {"fraction": c.threshold_fraction, "score": c.threshold},
        "baseline": None if v is None else {
            "label": v.label, "auc": v.auc, "effective_length": v.effective_length,
            "buckets": [_bucket_json(b, None) for b in v.buckets]},
        "summary": lines(c),
    }
