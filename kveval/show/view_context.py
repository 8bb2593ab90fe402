"""The page's context section: KL and perplexity change by position for each context task,
each candidate a line and the restarts a band, with the table by bucket (read from the gate's
`--json` task entries: show/context_view.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kveval.judge.sweep import json_number
from kveval.show import charts
from kveval.show.context_view import percent_change, share
from kveval.show.view import task_names, task_value
from kveval.show.view_detail import number

HEAD = ("run", "positions", "scored", "mean KL", "KL p99", "perplexity", "same top")


def _series(buckets: Sequence[Mapping[str, Any]], key: str) -> list[float | None]:
    return [json_number(b.get(key)) for b in buckets]


def _band(runs: Sequence[Sequence[Mapping[str, Any]]], key: str,
          count: int) -> list[tuple[float, float]] | None:
    if not runs:
        return None
    columns = [[v for run in runs if (v := _series(run, key)[i]) is not None]
               for i in range(count)]
    return [(min(c), max(c)) if c else (float("nan"), float("nan")) for c in columns]


def chart(candidates: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
          noises: Sequence[Sequence[Mapping[str, Any]]]) -> str | None:
    """Both panels, for one or more candidates against one floor."""
    if not candidates or not charts.available():
        return None
    labels = [str(b.get("label")) for b in candidates[0][1]]
    panels = [charts.PositionPanel(title, [(name, _series(b, key)) for name, b in candidates],
                                   _band(noises, key, len(labels)))
              for title, key in (("mean KL (nats)", "kl_mean"),
                                 ("perplexity change (%)", "ppl_change_pct"))]
    return charts.position_chart(labels, panels)


def _rows(label: str, buckets: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    return [[label, str(b.get("label")), number(b.get("positions")), number(b.get("kl_mean")),
             number(b.get("kl_p99")), percent_change(json_number(b.get("ppl_change_pct"))),
             share(json_number(b.get("same_top")))] for b in buckets]


def _task(task: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    cand = entry.get("candidate") or {}
    noises = [n for n in entry.get("noise_runs") or [] if isinstance(n, Mapping)]
    rows = _rows(str(cand.get("label")), cand.get("buckets") or [])
    for n in noises:
        rows += _rows(str(n.get("label")), n.get("buckets") or [])
    svg = chart([(str(cand.get("label")), cand.get("buckets") or [])],
                [n.get("buckets") or [] for n in noises])
    return {"task": task, "svg": svg, "head": HEAD, "rows": rows,
            "summary": entry.get("summary")}


def context_section(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = []
    for task in task_names(data):
        entry = task_value(data, task, "context")
        if isinstance(entry, Mapping) and isinstance(entry.get("candidate"), Mapping):
            found.append(_task(task, entry))
    return found
