"""The blocks a report is made of: a heading, a line of prose, a warning, a table, two answers
side by side, or a section another module renders itself. `text.to_text` and
`markdown.to_markdown` render the same blocks two ways; JSON is built apart (show/json_out.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WIDTH = 100  # terminal width of side-by-side answers
SIDE_LINES = 12  # lines of each answer shown side by side
CONTEXT = 40  # characters shown before the first difference
MAX_DIFFERENCES = 20  # fingerprint differences listed before "... and N more"


@dataclass(frozen=True)
class Heading:
    text: str


@dataclass(frozen=True)
class Note:
    text: str  # a warning


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class SideBySide:
    title: str
    left_label: str
    right_label: str
    left: str
    right: str


@dataclass(frozen=True)
class Rendered:
    """A section another module renders itself (e.g. a long-context length x depth grid)."""

    text: str
    markdown: str
    data: dict[str, Any]  # its JSON form


Block = str | Heading | Note | Table | SideBySide | Rendered  # a str is one line of prose
