"""The short summary `kveval run` prints at its end.

Its Wilson interval is the closed-form score interval with the normal quantile from the
standard library: importing scipy.stats costs about 70 MB and 0.7 s, more than half of a
whole 1,319-item run's budget. tests/test_summary.py pins it to scipy's
`binomtest(...).proportion_ci(method="wilson")`, which `kveval score` uses.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from statistics import NormalDist

from kveval.formats.records import ItemRecord
from kveval.safe import one_line

Z95 = NormalDist().inv_cdf(0.975)


def wilson_closed_form(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for k of n; (0, 1) when n is 0."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _accuracy_line(items: Sequence[ItemRecord], field: str) -> str | None:
    answered = [getattr(i, field) for i in items if i.ok and getattr(i, field) is not None]
    if not answered:
        return None
    k, n = sum(bool(v) for v in answered), len(answered)
    low, high = wilson_closed_form(k, n)
    return f"{k}/{n}  {100 * k / n:.1f}%  {100 * low:.1f} to {100 * high:.1f}"


def _no_accuracy(items: int, errors: int) -> str:
    if errors == items:
        return "no answers: every item failed (the run file holds each error)"
    return "no ground truth (compare it with `kveval compare`)"


def _task_lines(task: str, mine: Sequence[ItemRecord], forced_from: str) -> list[str]:
    errors = sum(1 for i in mine if not i.ok)
    head = f"{one_line(task):<18}{len(mine):>6}{errors:>8}  "
    if forced_from:
        return [head + f"{len(mine) - errors} of {one_line(forced_from)}'s answers, forced"]
    strict = _accuracy_line(mine, "correct_strict")
    lines = [head + (_accuracy_line(mine, "correct") or _no_accuracy(len(mine), errors))]
    return lines + ([f"{'':<18}{'':>6}{'':>8}  strict `#### N`: {strict}"] if strict else [])


def resent_line(resent: Sequence[str]) -> str:
    """'2 requests sent again after a failed attempt (no complete answer within --timeout
    600 s: 2); each answer's latency counts every attempt'."""
    reasons = Counter(resent)
    why = "; ".join(f"{one_line(r)}: {n}" for r, n in reasons.most_common())
    return f"{len(resent)} request(s) sent again after a failed attempt ({why}); each " \
        "answer's latency counts every attempt"


def render_run_summary(items: Sequence[ItemRecord], sent: int, wall_s: float, path: str,
                       order: Sequence[str] = (), not_forced: str = "",
                       forced_from: str = "", resent: Sequence[str] = ()) -> str:
    """Accuracy per task; tasks in `order` (the suite's) first, then any others as they come.
    A teacher-forced run (forced_from: its baseline) holds the baseline's answers, so no
    accuracy of its own: the answers it scored, and the baseline items it did not force
    (formats/unforced.py)."""
    present = {i.task for i in items}
    tasks = [t for t in dict.fromkeys([*order, *(i.task for i in items)]) if t in present]
    lines = [f"{'task':<18}{'items':>6}{'errors':>8}  "
             + ("teacher-forced" if forced_from else "accuracy (Wilson 95%)")]
    for task in tasks:
        lines += _task_lines(task, [i for i in items if i.task == task], forced_from)
    lines.append(f"{len(items)} items ({sent} sent this time) in {wall_s:.1f} s -> {path}")
    if resent:
        lines.append(resent_line(resent))
    if forced_from:
        lines.append(f"the answers are {one_line(forced_from)}'s, forced: no accuracy of this "
                     "server (their scores are the baseline's); `kveval compare` judges its "
                     "log-probabilities")
    if not_forced:
        lines.append(f"baseline items not teacher-forced: {one_line(not_forced)}")
    return "\n".join(lines)
