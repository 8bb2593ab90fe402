"""The short summary `kveval run` prints at its end."""

from __future__ import annotations

from collections.abc import Sequence

from kveval.records import ItemRecord


def _accuracy_line(items: Sequence[ItemRecord], field: str) -> str | None:
    from kveval.stats import wilson

    answered = [getattr(i, field) for i in items if i.ok and getattr(i, field) is not None]
    if not answered:
        return None
    k, n = sum(bool(v) for v in answered), len(answered)
    interval = wilson(k, n)
    low, high = interval.low, interval.high
    return f"{k}/{n}  {100 * k / n:.1f}%  {100 * low:.1f} to {100 * high:.1f}"


def render_run_summary(items: Sequence[ItemRecord], sent: int, wall_s: float, path: str) -> str:
    tasks = list(dict.fromkeys(i.task for i in items))
    lines = [f"{'task':<18}{'items':>6}{'errors':>8}  accuracy (Wilson 95%)"]
    for task in tasks:
        mine = [i for i in items if i.task == task]
        errors = sum(1 for i in mine if not i.ok)
        flexible = _accuracy_line(mine, "correct")
        strict = _accuracy_line(mine, "correct_strict")
        shown = flexible or "no ground truth (compare it with `kveval compare`)"
        lines.append(f"{task:<18}{len(mine):>6}{errors:>8}  {shown}")
        if strict:
            lines.append(f"{'':<18}{'':>6}{'':>8}  strict `#### N`: {strict}")
    lines.append(f"{len(items)} items ({sent} sent this time) in {wall_s:.1f} s -> {path}")
    return "\n".join(lines)
