"""Long-context results as a grid: accuracy per length, length x depth, change per cell.

From a run's item records (meta `target_tokens` and `depth`, written by the needle and
evidence adapters): accuracy per length with a Wilson 95% interval, a length x depth
accuracy table, with a baseline run the change per cell on paired items (same task,
item_id and prompt), and the answer classes per length (evidence: exact, wrong_record,
corrupted, no_answer). Items with status "error" are counted apart, never scored as wrong.

`section` returns plain JSON-ready dicts; `render_text` and `render_markdown` print them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kveval.formats.records import ItemRecord
from kveval.safe import markdown

CLASS_ORDERS = {
    "evidence_class": ("exact", "wrong_record", "corrupted", "no_answer"),
    "needle_class": ("exact", "wrong_key", "corrupted", "no_answer"),
    "mrcr_class": ("exact", "partial", "wrong_piece", "no_prefix"),
}


# ---------------------------------------------------------------- computing


def _grid_items(task: str, items: Iterable[ItemRecord]) -> list[ItemRecord]:
    return [r for r in items
            if r.task == task and "target_tokens" in r.meta and "depth" in r.meta]


def _scored(items: Iterable[ItemRecord]) -> list[ItemRecord]:
    return [r for r in items if r.ok and r.correct is not None]


def wilson(k: int, n: int) -> list[float] | None:
    """The Wilson score 95% interval of k/n, or None when n is 0."""
    if n == 0:
        return None
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return [float(ci.low), float(ci.high)]


def _accuracy(items: Sequence[ItemRecord]) -> dict[str, Any]:
    scored = _scored(items)
    k, n = sum(bool(r.correct) for r in scored), len(scored)
    return {"n": n, "correct": k, "accuracy": k / n if n else None,
            "errors": sum(not r.ok for r in items)}


def _by(items: Iterable[ItemRecord], *keys: str) -> dict[tuple[Any, ...], list[ItemRecord]]:
    groups: dict[tuple[Any, ...], list[ItemRecord]] = {}
    for r in items:
        groups.setdefault(tuple(r.meta[k] for k in keys), []).append(r)
    return groups


def per_length(items: Sequence[ItemRecord], lengths: Sequence[int]) -> list[dict[str, Any]]:
    groups = _by(items, "target_tokens")
    rows = []
    for length in lengths:
        group = groups.get((length,), [])
        row = {"length": length, **_accuracy(group)}
        row["ci"] = wilson(row["correct"], row["n"])
        measured = [r.meta["measured_tokens"] for r in group
                    if isinstance(r.meta.get("measured_tokens"), int)]
        row["measured_tokens"] = round(sum(measured) / len(measured)) if measured else None
        rows.append(row)
    return rows


def table(items: Sequence[ItemRecord], lengths: Sequence[int],
          depths: Sequence[Any]) -> list[dict[str, Any]]:
    """One row per length, one cell per depth: n, correct, accuracy, errors."""
    groups = _by(items, "target_tokens", "depth")
    return [{"length": length,
             "cells": [{"depth": depth, **_accuracy(groups.get((length, depth), []))}
                       for depth in depths]}
            for length in lengths]


def _pairs(items: Sequence[ItemRecord], baseline: Sequence[ItemRecord],
           ) -> tuple[list[tuple[ItemRecord, ItemRecord]], int, int]:
    """Paired scored items (candidate, baseline), unpaired count, incomparable count."""
    base = {r.key: r for r in baseline}
    pairs, unpaired, incomparable = [], 0, 0
    for r in items:
        other = base.get(r.key)
        if other is None:
            unpaired += 1
        elif other.prompt_sha256 != r.prompt_sha256:
            incomparable += 1
        elif r.ok and other.ok and r.correct is not None and other.correct is not None:
            pairs.append((r, other))
    return pairs, unpaired, incomparable


def _change(pairs: Sequence[tuple[ItemRecord, ItemRecord]]) -> dict[str, Any]:
    n = len(pairs)
    now = sum(bool(r.correct) for r, _ in pairs)
    before = sum(bool(b.correct) for _, b in pairs)
    return {
        "pairs": n,
        "baseline_accuracy": before / n if n else None,
        "accuracy": now / n if n else None,
        "change_points": 100.0 * (now - before) / n if n else None,
        "lost": sum(bool(b.correct) and not r.correct for r, b in pairs),
        "gained": sum(bool(r.correct) and not b.correct for r, b in pairs),
    }


def changes(items: Sequence[ItemRecord], baseline: Sequence[ItemRecord],
            lengths: Sequence[int], depths: Sequence[Any]) -> dict[str, Any]:
    """Per length and per cell: accuracy change in points on paired items."""
    pairs, unpaired, incomparable = _pairs(items, baseline)
    by_length: dict[int, list[tuple[ItemRecord, ItemRecord]]] = {}
    by_cell: dict[tuple[int, Any], list[tuple[ItemRecord, ItemRecord]]] = {}
    for pair in pairs:
        length, depth = pair[0].meta["target_tokens"], pair[0].meta["depth"]
        by_length.setdefault(length, []).append(pair)
        by_cell.setdefault((length, depth), []).append(pair)
    return {
        "pairs": len(pairs), "unpaired": unpaired, "incomparable": incomparable,
        "per_length": [{"length": length, **_change(by_length.get(length, []))}
                       for length in lengths],
        "table": [{"length": length,
                   "cells": [{"depth": depth, **_change(by_cell.get((length, depth), []))}
                             for depth in depths]}
                  for length in lengths],
    }


def _class_field(items: Iterable[ItemRecord]) -> str | None:
    for r in items:
        for name in CLASS_ORDERS:
            if name in r.meta:
                return name
    return None


def classes(items: Sequence[ItemRecord], lengths: Sequence[int]) -> dict[str, Any] | None:
    """Answer classes per length, with the mean edit distance of corrupted answers."""
    name = _class_field(items)
    if name is None:
        return None
    order = CLASS_ORDERS[name]
    groups = _by([r for r in items if r.ok and name in r.meta], "target_tokens")
    rows = []
    for length in lengths:
        group = groups.get((length,), [])
        counts = {c: sum(r.meta[name] == c for r in group) for c in order}
        distances = [r.meta.get("edit_distance") for r in group if r.meta[name] == "corrupted"]
        known = [d for d in distances if isinstance(d, int)]
        rows.append({"length": length, "counts": counts,
                     "corrupted_edit_distance": sum(known) / len(known) if known else None})
    return {"field": name, "order": list(order), "per_length": rows}


def section(task_name: str, items: Sequence[ItemRecord],
            baseline_items: Sequence[ItemRecord] | None = None) -> dict[str, Any] | None:
    """The grid section of `kveval score` for one task, or None when its items carry no
    length and depth."""
    mine = _grid_items(task_name, items)
    if not mine:
        return None
    base = _grid_items(task_name, baseline_items) if baseline_items is not None else None
    every = mine + (base or [])
    lengths = sorted({r.meta["target_tokens"] for r in every})
    depths = sorted({r.meta["depth"] for r in every})
    result: dict[str, Any] = {
        "task": task_name, "lengths": lengths, "depths": depths,
        "items": len(mine), "errors": sum(not r.ok for r in mine),
        "per_length": per_length(mine, lengths), "table": table(mine, lengths, depths),
        "classes": classes(mine, lengths), "baseline": None,
    }
    if base is not None:
        result["baseline"] = {
            "items": len(base), "errors": sum(not r.ok for r in base),
            "per_length": per_length(base, lengths), "classes": classes(base, lengths),
            **changes(mine, base, lengths, depths),
        }
    return result


# ---------------------------------------------------------------- rendering


def length_label(tokens: int) -> str:
    """1024 -> 1k, 1536 -> 1.5k, 3000 -> 3000"""
    return f"{tokens / 1024:g}k" if (tokens * 4) % 1024 == 0 else str(tokens)


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}"


def _signed(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:+.{digits}f}"


def _ci(ci: list[float] | None) -> str:
    return "-" if ci is None else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _tables(section: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every table in the section, in print order."""
    task, depths = section["task"], section["depths"]
    depth_heads = [f"{d:g}%" for d in depths]
    tables = [(
        f"{task}: accuracy by context length (Wilson 95%)",
        ["length", "measured", "n", "correct", "accuracy %", "95% CI", "errors"],
        [[length_label(r["length"]), str(r["measured_tokens"] or "-"), str(r["n"]),
          str(r["correct"]), _pct(r["accuracy"]), _ci(r["ci"]), str(r["errors"])]
         for r in section["per_length"]],
    ), (
        f"{task}: accuracy % by length x depth",
        ["length", *depth_heads],
        [[length_label(row["length"]), *(_pct(c["accuracy"], 0) for c in row["cells"])]
         for row in section["table"]],
    )]
    if section["classes"]:
        tables.append(_class_table(task, section["classes"]))
    base = section["baseline"]
    if base:
        tables += [(
            f"{task}: change against the baseline on {base['pairs']} paired items (points)",
            ["length", "pairs", "baseline %", "this run %", "change", "lost", "gained"],
            [[length_label(r["length"]), str(r["pairs"]), _pct(r["baseline_accuracy"]),
              _pct(r["accuracy"]), _signed(r["change_points"]), str(r["lost"]),
              str(r["gained"])] for r in base["per_length"]],
        ), (
            f"{task}: change in points by length x depth",
            ["length", *depth_heads],
            [[length_label(row["length"]), *(_signed(c["change_points"], 0) for c in row["cells"])]
             for row in base["table"]],
        )]
        if base["classes"]:
            tables.append(_class_table(f"{task} (baseline)", base["classes"]))
    return tables


def _class_table(title: str, found: dict[str, Any]) -> tuple[str, list[str], list[list[str]]]:
    order = found["order"]
    return (
        f"{title}: answers by class",
        ["length", *order, "corrupted: mean edit distance"],
        [[length_label(r["length"]), *(str(r["counts"][c]) for c in order),
          "-" if r["corrupted_edit_distance"] is None else f"{r['corrupted_edit_distance']:.1f}"]
         for r in found["per_length"]],
    )


def _notes(section: dict[str, Any]) -> list[str]:
    notes = []
    if section["errors"]:
        notes.append(f"{section['errors']} of {section['items']} items failed (status error): "
                     "counted apart, not scored")
    base = section["baseline"]
    if base and (base["unpaired"] or base["incomparable"]):
        notes.append(f"against the baseline: {base['unpaired']} items without a partner, "
                     f"{base['incomparable']} with a different prompt (left out)")
    return notes


def render_text(section: dict[str, Any]) -> str:
    blocks = []
    for title, header, rows in _tables(section):
        widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
        lines = [title]
        for row in (header, *rows):
            cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in
                                                 zip(row[1:], widths[1:], strict=True)]
            lines.append("  " + "  ".join(cells).rstrip())
        blocks.append("\n".join(lines))
    blocks += [f"note: {note}" for note in _notes(section)]
    return "\n\n".join(blocks)


def render_markdown(section: dict[str, Any]) -> str:
    blocks = []
    for title, header, rows in _tables(section):
        lines = [f"**{markdown(title)}**", "", "| " + " | ".join(map(markdown, header)) + " |",
                 "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
        lines += ["| " + " | ".join(map(markdown, row)) + " |" for row in rows]
        blocks.append("\n".join(lines))
    blocks += [f"*{markdown(note)}*" for note in _notes(section)]
    return "\n\n".join(blocks)
