"""Blocks as a Markdown block to paste into a PR. Every string is escaped with
`kveval.safe.markdown` (headings, prose, warnings, table cells, answers): text read from a run
file renders as the same text and cannot inject a heading, a link or raw HTML."""

from __future__ import annotations

from collections.abc import Sequence

from kveval.safe import markdown as escape
from kveval.show.blocks import SIDE_LINES, Block, Heading, Note, Rendered, SideBySide, Table


def to_markdown(blocks: Sequence[Block]) -> str:
    return "\n\n".join(_render(block, i == 0) for i, block in enumerate(blocks)) + "\n"


def _render(block: Block, first: bool) -> str:
    if isinstance(block, Heading):
        return ("### " if first else "#### ") + _line(block.text)
    if isinstance(block, Note):
        return f"> **warning:** {_line(block.text)}"
    if isinstance(block, Table):
        return _md_table(block)
    if isinstance(block, SideBySide):
        return _md_side_by_side(block)
    if isinstance(block, Rendered):
        return block.markdown
    return _line(block)


def _line(text: str) -> str:
    """One paragraph: escaped, its line breaks kept as hard breaks."""
    return "<br>".join(escape(part) for part in text.split("\n"))


def _md_cell(text: str) -> str:
    return _line(text) or " "


def _md_table(table: Table) -> str:
    lines = ["| " + " | ".join(_md_cell(h) for h in table.header) + " |",
             "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _md_side_by_side(block: SideBySide) -> str:
    limit = 80 * SIDE_LINES
    table = Table((block.left_label, block.right_label),
                  ((block.left[:limit], block.right[:limit]),))
    return (f"<details><summary>{_line(block.title)}</summary>\n\n{_md_table(table)}"
            "\n\n</details>")
