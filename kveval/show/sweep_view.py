"""A sweep of candidates (`kveval ab` with several) in words, JSON and one page: a row per
candidate with its verdict, its costs and what it bought, each ratio to the baseline's setup
with the restarts' range; a chart of cost against memory bought, the restarts as the
reference cloud; each candidate's name links to its own full page (DIR/NAME.html)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kveval.judge.sweep import Row
from kveval.show.blocks import Heading, Table
from kveval.show.words import fixed

HEADER = ("candidate", "verdict", "points lost", "answers changed", "KL rise",
          "KV bytes/token", "tokens in memory", "output tok/s", "latency p50")


def _signed(value: float | None, digits: int, unit: str = "") -> str:
    return "-" if value is None else fixed(value, digits, "+") + unit


def _ratio(found: Mapping[str, Any] | None) -> str:
    if not found:
        return "-"
    text = f"{found['ratio']:.2f}x"
    low, high = found.get("noise_range") or (None, None)
    if low is not None and found.get("setup_runs", 0) > 1:
        text += f" ({low:.2f}-{high:.2f}x)"
    return text


def _of(text: str, task: str | None) -> str:
    """A worst-of figure with the task it is of."""
    return f"{text} ({task})" if task and text != "-" else text


def cells(r: Row) -> tuple[str, ...]:
    c, task = r.costs, r.costs.worst.get
    kl = _signed(c.kl_rise, 4) + (" forced" if c.forced and c.kl_rise is not None else "")
    return (r.name, r.verdict.upper(), _of(_signed(c.points_lost, 1), task("points_lost")),
            _of(_signed(None if c.drift is None else 100 * c.drift, 1, "%"), task("drift")),
            _of(kl, task("kl_rise")),
            *(_ratio(r.bought.get(k)) for k in ("kv_bytes_per_token",
                                                 "kv_tokens_in_same_memory",
                                                 "output_tokens_per_s", "latency_p50_s")))


def cautions(rows: Sequence[Row]) -> list[str]:
    """Each candidate's speed caution (show/trade_view.py), where its ratios have one."""
    from kveval.show.trade_view import caution

    found = [caution({"ratio": r.bought, "speed_caveats": r.speed_caveats}) for r in rows]
    return [f"{r.name}: {line}" for r, line in zip(rows, found, strict=True) if line]


def blocks(rows: Sequence[Row], verdict: str, pages: Mapping[str, str]) -> list[Any]:
    shown = [f"{r.name}: {', '.join(r.costs.shown)}" for r in rows if r.costs.shown]
    return [Heading(f"kveval ab: {verdict}"),
            "each candidate against the one pool of the baseline and its restarts, gated at "
            "the gate's level as it would be alone; each cost is its worst task's (named); "
            "ratios to the baseline's setup (its restarts' range)",
            Table(HEADER, tuple(cells(r) for r in rows)), *cautions(rows),
            *(f"shown: {line}" for line in shown),
            *(f"{name}: its full verdict {path}" for name, path in pages.items())]


def sweep_json(rows: Sequence[Row], gates: Mapping[str, dict[str, Any]], code: int,
               verdict: str, pages: Mapping[str, str]) -> dict[str, Any]:
    """gate.json of a sweep: the sweep's verdict and each candidate's whole gate."""
    return {"command": "ab", "verdict": verdict, "exit_code": code,
            "candidates": [{"name": r.name, "verdict": r.verdict, "exit_code": r.exit_code,
                            "page": pages.get(r.name), "costs": _costs_json(r),
                            "bought": r.bought, "gate": gates[r.name]} for r in rows],
            "summary": verdict}


def _costs_json(r: Row) -> dict[str, Any]:
    c = r.costs
    return {"points_lost": c.points_lost, "answers_changed_beyond_restarts": c.drift,
            "kl_rise": c.kl_rise, "kl_forced": c.forced, "shown": list(c.shown),
            "worst_task": c.worst}


def _cloud(gates: Mapping[str, dict[str, Any]]) -> list[tuple[float, float]]:
    """The restarts' own points: their memory ratio (1 by the setup) and KL over the floor."""
    found = []
    for gate in gates.values():
        for task in gate.get("tasks") or []:
            entry = task.get("forced_divergence") or task.get("divergence") or {}
            floor = (entry.get("noise") or {}).get("kl_mean")
            for run in entry.get("noise_runs") or []:
                if isinstance(run.get("kl_mean"), float) and isinstance(floor, float):
                    found.append((1.0, run["kl_mean"] - floor))
        break  # the pool is the same in every candidate's gate
    return found


def chart(rows: Sequence[Row], gates: Mapping[str, dict[str, Any]]) -> str | None:
    from kveval.show import charts

    points = [(r.name, r.verdict, (r.bought.get("kv_tokens_in_same_memory") or {})
               .get("ratio"), r.costs.kl_rise) for r in rows]
    known = [(n, v, x, y) for n, v, x, y in points if x is not None and y is not None]
    if not known or not charts.available():
        return None
    return charts.scatter_chart(known, _cloud(gates), "tokens in the same memory (x the "
                                "baseline's setup)", "KL rise over the restarts (nats/token)")


def position_charts(gates: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per context task: every candidate's KL and perplexity change by position on one
    chart, the restarts (shared by every candidate) a band (show/view_context.py)."""
    from kveval.show.view_context import chart as context_chart

    found: dict[str, list[tuple[str, Any]]] = {}
    floors: dict[str, list[Any]] = {}
    for name, gate in gates.items():
        for entry in gate.get("tasks") or []:
            context = entry.get("context") if isinstance(entry, dict) else None
            if isinstance(context, dict) and isinstance(context.get("candidate"), dict):
                found.setdefault(entry["task"], []).append(
                    (name, context["candidate"].get("buckets") or []))
                floors.setdefault(entry["task"], [n.get("buckets") or [] for n in
                                                  context.get("noise_runs") or []])
    return [{"task": task, "svg": _svg_of(context_chart(lines, floors[task]))}
            for task, lines in found.items()]


def _svg_of(markup: str | None) -> Any:
    from kveval.show.html import _svg

    return _svg(markup)


def page(rows: Sequence[Row], gates: Mapping[str, dict[str, Any]], verdict: str,
         pages: Mapping[str, str]) -> str:
    from kveval import __version__
    from kveval.show.html import _environment, _svg

    data = {"verdict": verdict, "header": list(HEADER),
            "rows": [{"cells": list(cells(r)), "page": pages.get(r.name),
                      "shown": list(r.costs.shown)} for r in rows],
            "cautions": cautions(rows),
            "chart": _svg(chart(rows, gates)), "positions": position_charts(gates),
            "version": __version__}
    return str(_environment().get_template("sweep.html.j2").render(**data))
