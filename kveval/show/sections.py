"""Sections every report shares: the runs compared, what differs in their setups, the pairing."""

from __future__ import annotations

from kveval.judge.compare import Pairing, Side
from kveval.judge.verdict import Setup
from kveval.show.blocks import MAX_DIFFERENCES, Block, Note, Table


def sides_block(*named: tuple[str, Side | None]) -> Table:
    rows = tuple((role, side.label, side.path) for role, side in named if side is not None)
    return Table(("run", "label", "file"), rows)


def setup_blocks(setup: Setup | None) -> list[Block]:
    if setup is None or not setup.models:
        return []
    base, cand = setup.labels[0], setup.labels[1]
    rows = [("model", _arrow(setup.models[0], setup.models[1]))]
    shown = [d for d in setup.differences if d.key != "model"]
    rows += [(d.key, _arrow(d.base, d.other)) for d in shown[:MAX_DIFFERENCES]]
    if len(shown) > MAX_DIFFERENCES:
        rows.append(("...", f"and {len(shown) - MAX_DIFFERENCES} more differences"))
    blocks: list[Block] = [Table(("setup", f"{base} → {cand}"), tuple(rows))]
    return blocks + [Note(w) for w in setup.warnings]


def _arrow(a: str | None, b: str | None) -> str:
    a, b = _short(a), _short(b)
    return a if a == b else f"{a} → {b}"


def _short(value: str | None, limit: int = 60) -> str:
    if value is None:
        return "(absent)"
    return value if len(value) <= limit else value[: limit - 3] + "..."


def not_forced_lines(*sides: Side | None) -> list[str]:
    """One line per teacher-forced run that left baseline items out, with the count."""
    from kveval.formats.unforced import sentence, total

    lines = []
    for side in sides:
        found = side.not_forced if side is not None else {}
        if found and side is not None:
            lines.append(f"{side.label}: {total(found)} baseline item(s) not teacher-forced: "
                         f"{sentence(found)}")
    return lines


def pairing_line(pairing: Pairing, base: str, other: str) -> str:
    parts = [f"{len(pairing.pairs)} paired items"]
    if pairing.only_base:
        parts.append(f"{pairing.only_base} only in {base}")
    if pairing.only_other:
        parts.append(f"{pairing.only_other} only in {other}")
    if pairing.with_errors:
        parts.append(f"{pairing.with_errors} left out as errors")
    return "pairing: " + "; ".join(parts)
