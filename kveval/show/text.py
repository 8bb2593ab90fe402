"""Blocks as terminal text. Every string passes through `kveval.safe.terminal`: a model id,
label or answer read from a file cannot move the cursor or recolour the terminal."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from itertools import zip_longest

from kveval.safe import terminal
from kveval.show.blocks import SIDE_LINES, WIDTH, Block, Heading, Note, Rendered, SideBySide, Table


def to_text(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        out += _lines(block, first=not out)
    return "\n".join(_squeeze(out)).strip("\n") + "\n"


def _lines(block: Block, first: bool) -> list[str]:
    if isinstance(block, Heading):
        return [terminal(block.text)] if first else ["", terminal(block.text)]
    if isinstance(block, Note):
        return [f"warning: {terminal(block.text)}"]
    if isinstance(block, Table):
        return ["", *_text_table(block), ""]
    if isinstance(block, SideBySide):
        return ["", *_text_side_by_side(block)]
    if isinstance(block, Rendered):
        return ["", terminal(block.text), ""]
    return [terminal(block)]


def _squeeze(lines: list[str]) -> list[str]:
    """No two blank lines in a row."""
    return [line for i, line in enumerate(lines) if line or i == 0 or lines[i - 1]]


def _cell(text: str) -> str:
    return " ".join(terminal(text).split("\n"))


def _text_table(table: Table) -> list[str]:
    rows = [tuple(_cell(c) for c in row) for row in (table.header, *table.rows)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(table.header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def _wrap(text: str, width: int) -> list[str]:
    """The first SIDE_LINES wrapped lines of `text`, then "..." if there are more. textwrap
    is quadratic on one long word (a 3 MB answer took 7 s); each line is cut first to the
    part those lines can show, with a margin that leaves the greedy breaks unchanged, so the
    work is linear in the answer."""
    keep = (SIDE_LINES + 2) * width
    lines: list[str] = []
    for line in terminal(text).splitlines() or [""]:
        lines += textwrap.wrap(line[:keep], width, drop_whitespace=False) or [""]
        if len(lines) > SIDE_LINES:
            break
    return lines[:SIDE_LINES] + (["..."] if len(lines) > SIDE_LINES else [])


def _text_side_by_side(block: SideBySide) -> list[str]:
    width = (WIDTH - 3) // 2
    left, right = _wrap(block.left, width), _wrap(block.right, width)
    lines = [terminal(block.title),
             f"{_cell(block.left_label):<{width}} | {_cell(block.right_label)}"]
    lines += [f"{a:<{width}} | {b}".rstrip() for a, b in zip_longest(left, right, fillvalue="")]
    return lines
