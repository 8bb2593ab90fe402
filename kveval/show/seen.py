"""What each verdict could have seen, in words and JSON: the smallest change its checks
catch 80% of the time (judge/detect.py)."""

from __future__ import annotations

from typing import Any

from kveval.judge.checks import KL_KINDS, WEIGHTS, Check, first
from kveval.judge.detect import POWER, Detectable
from kveval.judge.verdict import Examined
from kveval.show.words import over_floor, p_text, plural

WHAT = {"drift": "changed answers", "truncated": "answers cut at max_tokens",
        "empty": "empty answers"}


def _accuracy(d: Detectable) -> str:
    flips = f"{100 * (d.flip_rate or 0):.1f}% of answers flipping either way"
    if d.value is None:
        return (f"{d.items} items, {flips}: at {d.ceiling:.1f}% accuracy no loss (at most "
                f"{d.ceiling:.1f} points) would show {100 * POWER:.0f}% of the time")
    return (f"{d.items} items, {flips}: a loss of {d.value:.1f} points would be caught "
            f"{100 * POWER:.0f}% of the time")


def _divergence(d: Detectable) -> str:
    size = f"{plural(d.items, 'item')}, {plural(d.runs or 0, 'noise run')}"
    if d.value is None:
        return f"no rise of the KL up to a thousand times the floor would show ({size})"
    if d.value == 0:
        return f"any rise of the KL above a quiet floor (0) would be caught ({size})"
    if d.floor:
        rise = (f"a per-item mean KL {d.value:.2g} nats per token above the noise floor's "
                f"{d.floor:.3g} ({over_floor(d.value, d.floor)})")
    else:
        rise = f"a per-item mean KL {d.value:.2g} nats per token above a quiet floor (0)"
    return f"{rise} would be caught {100 * POWER:.0f}% of the time ({size})"


SHOWN = {"accuracy": "a loss", "divergence": "a rise of the KL over the floor",
         "forced": "a rise of the forced KL over the floor", "context": "a rise of the KL"}


def _shown(d: Detectable, check: Check) -> str:
    """A check that showed a change its power at the first step's level did not promise:
    it says what it saw, never that nothing would show."""
    what = SHOWN.get(d.kind) or f"more {WHAT.get(d.kind, d.kind)} than the floor's"
    return f"{what} shown ({p_text(check.adjusted_p, check.alpha)}, Holm-adjusted)"


def detectable_sentence(d: Detectable, check: Check | None = None) -> str:
    """What the check could have seen; where it could not promise any change 80% of the time
    yet showed one (check alarmed), what it saw."""
    if d.value is None and check is not None and check.alarmed:
        return ("forced: " if d.kind == "forced" else "") + _shown(d, check)
    if d.kind == "accuracy":
        return _accuracy(d)
    if d.kind in KL_KINDS:
        return ("forced: " if d.kind == "forced" else "") + _divergence(d)
    what = WHAT.get(d.kind, d.kind)
    if d.value is None:
        return f"no number of extra {what} up to all {d.items} would show"
    return (f"{d.value:.0f} more {what} than the floor's mean (of {d.items}) would be caught "
            f"{100 * POWER:.0f}% of the time")


def detectable_lines(ex: Examined) -> list[str]:
    """One line per task: what its checks could have seen, at the family's level."""
    return [f"{task} could have seen: "
            + "; ".join(detectable_sentence(d, first(ex.checks, task, d.kind)) for d in found)
            for task, found in ex.detectable.items() if found]


def detectable_json(d: Detectable, check: Check | None = None) -> dict[str, Any]:
    return {"kind": d.kind, "unit": d.unit, "value": d.value, "items": d.items,
            "flip_rate": d.flip_rate, "ceiling": d.ceiling, "power": POWER,
            **({"floor": d.floor, "noise_runs": d.runs} if d.kind in KL_KINDS else {}),
            "summary": detectable_sentence(d, check)}


def attach(data: dict[str, Any], ex: Examined) -> dict[str, Any]:
    """Each task entry of a verdict JSON gains `detectable`: {kind: {...}}, and the level."""
    data["detect_level"] = ex.levels.of("accuracy")
    data["detect_levels"] = {kind: ex.levels.of(kind) for kind in WEIGHTS}
    for entry in data.get("tasks", []):
        task = entry.get("task")
        entry["detectable"] = {d.kind: detectable_json(d, first(ex.checks, str(task), d.kind))
                               for d in ex.detectable.get(task, ())}
    return data
