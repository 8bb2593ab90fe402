"""The long-context section of the page: accuracy by length and depth as heat maps, the
length curve, the classes of what a wrong answer held."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kveval.show import charts
from kveval.show.view import task_names, task_value
from kveval.show.view_detail import length_label, number

X_KEYS = ("length", "target_tokens", "tokens", "bucket")
SERIES_KEYS = ("baseline_paired_mean", "paired_mean", "baseline", "candidate", "noise",
               "score", "mean", "accuracy", "auc")


def _fact(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {number(v)}" for k, v in value.items()
                         if not isinstance(v, (Mapping, list)))
    if isinstance(value, list):
        return "; ".join(str(v) for v in value if not isinstance(v, (Mapping, list)))
    return number(value)



def grid_of(data: Mapping[str, Any], task: str) -> dict[str, Any] | None:
    for entry in (data.get("score") or {}).get("tasks") or []:
        if entry["task"] != task:
            continue
        for extra in entry.get("extras") or []:
            if isinstance(extra, Mapping) and "table" in extra and "depths" in extra:
                return dict(extra)
    return None


def _cells(table: Sequence[Mapping[str, Any]], key: str, scale: float) -> list[list[float | None]]:
    return [[None if c.get(key) is None else scale * c[key] for c in row["cells"]]
            for row in table]


def _heatmaps(grid: Mapping[str, Any], own: Mapping[str, Any] | None,
              labels: Sequence[str]) -> list[dict[str, Any]]:
    lengths = [length_label(x) for x in grid["lengths"]]
    depths = [f"{d:g}%" if isinstance(d, (int, float)) else str(d) for d in grid["depths"]]
    maps = []
    if own is not None and own["lengths"] == grid["lengths"] and own["depths"] == grid["depths"]:
        maps.append((f"{labels[0]}: accuracy %", _cells(own["table"], "accuracy", 100), False))
    maps.append((f"{labels[1]}: accuracy %", _cells(grid["table"], "accuracy", 100), False))
    if grid.get("baseline"):
        maps.append((f"{labels[1]} minus {labels[0]}: points on paired items",
                     _cells(grid["baseline"]["table"], "change_points", 1), True))
    return [{"title": title, "lengths": lengths, "depths": depths, "values": values,
             "change": change, "colours": [[cell_colour(v, change) for v in row] for row in values],
             "svg": charts.heatmap(lengths, depths, values, change, title)
             if charts.available() else None}
            for title, values, change in maps]


def _mix(a: tuple[int, int, int], b: tuple[int, int, int], t: float) -> str:
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b, strict=True))


def cell_colour(value: float | None, change: bool) -> str:
    """A heatmap cell's background for the table the page shows without matplotlib: accuracy
    red (0) to yellow to green (100); change red (a loss) to white to blue (a gain)."""
    red, yellow, green, white, blue = ((215, 48, 39), (254, 224, 139), (26, 152, 80),
                                       (247, 247, 247), (33, 102, 172))
    if value is None:
        return "#dddddd"
    if change:
        t = max(-1.0, min(1.0, value / 50))
        return _mix(white, blue, t) if t >= 0 else _mix(white, red, -t)
    t = max(0.0, min(1.0, value / 100))
    return _mix(red, yellow, 2 * t) if t < 0.5 else _mix(yellow, green, 2 * t - 1)


def _per_length(grid: Mapping[str, Any]) -> list[list[str]]:
    base = grid.get("baseline")
    if not base:
        return [[length_label(r["length"]), "-", _pct(r["accuracy"]), "-", "-", "-"]
                for r in grid["per_length"]]
    return [[length_label(r["length"]), _pct(r["baseline_accuracy"]), _pct(r["accuracy"]),
             "-" if r["change_points"] is None else f"{r['change_points']:+.1f}",
             str(r["lost"]), str(r["gained"])] for r in base["per_length"]]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _classes(found: Mapping[str, Any] | None, label: str) -> dict[str, Any] | None:
    if not found:
        return None
    return {"label": label, "head": ["length", *found["order"]],
            "rows": [[length_label(r["length"]), *(str(r["counts"][c]) for c in found["order"])]
                     for r in found["per_length"]]}


def long_context_section(data: Mapping[str, Any], labels: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    for task in task_names(data):
        grid, curve = grid_of(data, task), task_value(data, task, "length_curve")
        if grid is None and curve is None:
            continue
        entry: dict[str, Any] = {"task": task, "heatmaps": [], "per_length": [], "classes": [],
                                 "curve": length_curve(curve, labels) if curve else None}
        if grid is not None:
            own = (data.get("grids") or {}).get(task)
            entry["heatmaps"] = _heatmaps(grid, own, labels)
            entry["per_length"] = _per_length(grid)
            base_classes = (grid.get("baseline") or {}).get("classes")
            entry["classes"] = [c for c in (_classes(base_classes, labels[0]),
                                            _classes(grid.get("classes"), labels[1])) if c]
        out.append(entry)
    return out


def length_curve(curve: Mapping[str, Any], labels: Sequence[str] = ()) -> dict[str, Any]:
    buckets = [b for b in curve.get("buckets") or [] if isinstance(b, Mapping)]
    head = list(dict.fromkeys(k for b in buckets for k in b))
    facts = [(k, _fact(curve[k])) for k in curve if k != "buckets" and curve[k] is not None]
    return {"facts": facts, "head": head,
            "rows": [[number(b.get(k)) for k in head] for b in buckets],
            "svg": _curve_svg(buckets, labels) if charts.available() else None}


def _series_names(keys: Sequence[str], labels: Sequence[str]) -> list[str]:
    """With a baseline, the paired means are the two runs' curves: name them by their runs."""
    if len(labels) < 2 or "paired_mean" not in keys:
        return list(keys)
    names = {"baseline_paired_mean": labels[0], "paired_mean": labels[1],
             "mean": f"{labels[1]}, all items"}
    return [names.get(k, k) for k in keys]


def _curve_svg(buckets: Sequence[Mapping[str, Any]], labels: Sequence[str] = ()) -> str | None:
    x_key = next((k for k in X_KEYS if buckets and k in buckets[0]), None)
    if x_key is None:
        return None
    keys = [k for k in SERIES_KEYS if any(isinstance(b.get(k), (int, float)) for b in buckets)]
    if not keys:
        return None
    xs = [b[x_key] for b in buckets]
    series = [(name, [b.get(k) if isinstance(b.get(k), (int, float)) else None for b in buckets])
              for k, name in zip(keys, _series_names(keys, labels), strict=True)]
    logx = all(isinstance(x, (int, float)) and x > 0 for x in xs)
    ticks = [length_label(x) for x in xs] if logx else None
    return charts.line_chart(xs, series, x_key, "score", ticks=ticks)
