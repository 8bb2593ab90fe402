"""Renderings of verdicts: terminal text, a Markdown block to paste into a PR, and JSON.

A report is first a list of blocks (show/blocks.py); `to_text` (show/text.py) and
`to_markdown` (show/markdown.py) render the same blocks two ways. JSON (show/json_out.py) is
built separately from the verdict objects as plain dicts, so its shape does not depend on the
layout. This module gathers the public names in one place for the commands.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kveval.judge.compare import Side
from kveval.judge.verdict import Family
from kveval.show.blocks import Block, Heading, Note, Rendered, SideBySide, Table
from kveval.show.compare_view import compare_blocks
from kveval.show.curves import attach as attach_curves
from kveval.show.curves import blocks as curve_blocks
from kveval.show.gate_view import gate_blocks
from kveval.show.json_gate import cannot_judge_json, gate_json
from kveval.show.json_out import compare_json, dumps, score_json
from kveval.show.markdown import to_markdown
from kveval.show.score_view import TaskExtras, score_blocks
from kveval.show.text import to_text

__all__ = [
    "attach_curves", "curve_blocks", "noise_curves_json",
    "Block", "Heading", "Note", "Rendered", "SideBySide", "Table", "TaskExtras",
    "cannot_judge_json", "compare_blocks", "compare_json", "dumps", "gate_blocks", "gate_json",
    "score_blocks", "score_json", "to_markdown", "to_text",
]


def noise_curves_json(base: Side, noises: Sequence[Side], family: Family) -> list[dict[str, Any]]:
    """compare's `noise_length_curves`: each noise run's curves against the baseline."""
    from kveval.show.curves import noise_json

    return noise_json(base, noises, family.curves)
