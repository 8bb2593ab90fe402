"""The page's later sections: collapse and divergence, and the changed answers side by side
(long context: view_long.py).

Collapse, divergence and length curves are read by their `--json` keys and drawn from
whatever numbers they hold, so a field added to them shows up in their table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kveval.safe import unit_at
from kveval.show import charts
from kveval.show.view import as_list, task_names, task_value


def length_label(tokens: Any) -> str:
    if not isinstance(tokens, int):
        return str(tokens)
    return f"{tokens / 1024:g}k" if (tokens * 4) % 1024 == 0 else str(tokens)


def number(value: Any) -> str:
    if isinstance(value, list) and all(isinstance(v, (int, float)) for v in value):
        return "[" + ", ".join(number(v) for v in value) + "]"
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


# ---------------------------------------------------------------- 6. collapse, divergence


def flat_rows(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Scalars of a nested dict as (dotted key, text); long lists are summarised."""
    if isinstance(value, Mapping):
        return [row for k, v in value.items()
                for row in flat_rows(v, f"{prefix}.{k}" if prefix else str(k))]
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        return [row for i, v in enumerate(value)  # e.g. noise_runs: one entry per run
                for row in flat_rows({k: x for k, x in v.items() if k != "label"},
                                     f"{prefix}.{v.get('label', i)}")]
    if isinstance(value, list):
        shown = "" if len(value) > 8 else ": " + ", ".join(number(v) for v in value)
        return [(prefix, f"{len(value)} values{shown}")]
    return [(prefix, number(value))]


def _positions(divergence: Mapping[str, Any]) -> list[float] | None:
    found = divergence.get("positions")
    if isinstance(found, Mapping):
        found = found.get("kl")
    if not isinstance(found, list) or not found:
        return None
    values = [v.get("kl") if isinstance(v, Mapping) else v for v in found]
    return [float(v) for v in values if isinstance(v, (int, float))] or None


SHARES = ("truncated", "empty")  # collapse counts drawn as shares of each run's answers


def collapse_sides(collapse: Mapping[str, Any], labels: Sequence[str],
                   ) -> list[tuple[str, Mapping[str, Any]]]:
    """(run label, figures) per run: the candidate's at the top level, the baseline's and
    each noise run's inside. `labels`: baseline, candidate, noise runs."""
    sides: list[tuple[str, Mapping[str, Any]]] = []
    if isinstance(collapse.get("baseline"), Mapping):
        sides.append((labels[0], collapse["baseline"]))
    sides.append((labels[1], collapse))
    noise = [n for n in as_list(collapse.get("noise")) if isinstance(n, Mapping)]
    names = list(labels[2:]) + [f"noise {i + 1}" for i in range(len(noise))]
    return sides + list(zip(names, noise, strict=False))


def _share(side: Mapping[str, Any], key: str) -> float | None:
    count, answers = side.get(key), side.get("answers")
    if isinstance(count, (int, float)) and isinstance(answers, int) and answers > 0:
        return count / answers
    return None


def collapsed(sides: Sequence[tuple[str, Mapping[str, Any]]]) -> bool:
    """Any run with a truncated or an empty answer: only then is collapse worth a look."""
    return any((side.get(k) or 0) > 0 for _, side in sides for k in SHARES
               if isinstance(side.get(k), (int, float)))


def collapse_table(sides: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    head = [k for k in dict.fromkeys(k for _, side in sides for k in side)
            if all(not isinstance(side.get(k), (Mapping, list)) for _, side in sides)]
    rows = [[label, *(number(side.get(k)) for k in head)] for label, side in sides]
    svg = None
    if charts.available():
        series = tuple((label, tuple(_share(side, k) for k in SHARES)) for label, side in sides)
        svg = charts.bar_chart(list(SHARES), [charts.Bars("share of answers %", series,
                                                          full=False)], charts.COLOURS)
    return {"head": ["run", *head], "rows": rows, "svg": svg}


def _kl_svg(divergence: Any) -> str | None:
    kl = _positions(divergence) if isinstance(divergence, Mapping) else None
    if not kl or not charts.available():
        return None
    return charts.line_chart(list(range(len(kl))), [("KL", kl)], "answer token position",
                             "KL (nats)")


# The per-run figures of a task's "divergence" JSON, drawn as one row per run
DIVERGENCE_COLUMNS = {"items": "items", "positions": "positions", "kl_mean": "KL mean",
                      "kl_p99": "KL p99", "top1_agreement": "top-1 same",
                      "dlogp_mean": "mean |dlogp|", "flip_margin_median": "flip margin",
                      "flips": "flips"}


def _divergence_cell(run: Mapping[str, Any], key: str) -> str:
    value = run.get(key)
    if key == "top1_agreement" and isinstance(value, (int, float)):
        return f"{100 * value:.1f}%"
    if isinstance(value, list):  # per-position figures: drawn as the KL chart
        return f"{len(value)} values"
    return number(value)


def divergence_view(divergence: Mapping[str, Any], candidate: str) -> dict[str, Any]:
    """The candidate's and each noise run's figures as a table, the sentence, the rest
    (the test, --max-kl) as dotted facts."""
    noise = [n for n in as_list(divergence.get("noise_runs")) if isinstance(n, Mapping)]
    if not noise and isinstance(divergence.get("noise"), Mapping):
        noise = [{"label": "noise", **divergence["noise"]}]
    runs = [(candidate, divergence)] + [(str(n.get("label", "noise")), n) for n in noise]
    rows = [[label, *(_divergence_cell(run, k) for k in DIVERGENCE_COLUMNS)] for label, run in runs]
    rest = {k: v for k, v in divergence.items()
            if k not in DIVERGENCE_COLUMNS and k not in ("noise", "noise_runs", "summary")}
    return {"head": ["run", *DIVERGENCE_COLUMNS.values()], "rows": rows,
            "summary": divergence.get("summary"), "facts": flat_rows(rest)}


def extras_section(data: Mapping[str, Any], labels: Sequence[str]) -> list[dict[str, Any]]:
    """Per task: collapse (when some answer was cut off or empty) and divergence."""
    out = []
    for task in task_names(data):
        collapse = task_value(data, task, "collapse")
        sides = collapse_sides(collapse, labels) if isinstance(collapse, Mapping) else []
        divergence = task_value(data, task, "divergence")
        if not collapsed(sides) and divergence is None:
            continue
        out.append({"task": task, "collapse": collapse_table(sides) if collapsed(sides) else None,
                    "divergence": (divergence_view(divergence, labels[1])
                                   if isinstance(divergence, Mapping) else None),
                    "kl_svg": _kl_svg(divergence)})
    return out


# ---------------------------------------------------------------- 7. changed answers


def _split(side: Mapping[str, Any], first: int) -> dict[str, Any]:
    """The answer around its first difference; the marked part is a whole escape sequence
    or character cluster (safe.unit_at), so stripping controls cannot leave half of one."""
    text = side["text"]
    start, end = unit_at(text, max(first - side.get("skipped", 0), 0))
    return {"same": text[:start], "first": text[start:end], "rest": text[end:],
            "skipped": side.get("skipped", 0), "cut": side["cut"],
            "extracted": side.get("extracted"),
            "mark": {True: "right", False: "wrong", None: "unscored"}[side.get("correct")],
            "finish_reason": side.get("finish_reason")}


def changed_section(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for task in data.get("changed") or []:
        if not task["changed"]:
            continue
        items = [{"item_id": c["item_id"], "reference": c["reference"],
                  "first": c["first_difference"], "ratio": f"{c['prefix_ratio']:.3f}",
                  "size": c["changed_chars"],
                  "baseline": _split(c["baseline"], c["first_difference"] or 0),
                  "candidate": _split(c["candidate"], c["first_difference"] or 0)}
                 for c in task["shown"]]
        out.append({"task": task["task"], "pairs": task["pairs"], "changed": task["changed"],
                    "items": items, "hidden": task["changed"] - len(items)})
    return out
