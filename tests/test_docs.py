"""The command reference in docs/commands is the click commands' own: a flag added, removed
or reworded without its page changing fails here (docs/generate.py rewrites the pages)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent


def test_every_command_page_is_what_the_commands_say():
    sys.path.insert(0, str(ROOT / "docs"))
    from generate import pages

    stale = [str(p.relative_to(ROOT)) for p, text in pages().items()
             if not p.is_file() or p.read_text() != text]
    assert not stale, f"stale, run docs/generate.py: {stale}"


def test_every_flag_of_every_command_has_a_row_on_its_page():
    from kveval.cli.cli import cli

    for name, command in cli.commands.items():
        text = (ROOT / "docs" / "commands" / f"{name}.md").read_text()
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert all(f"`{flag}`" in text for flag in param.opts), (name, param.opts)
