"""The command reference in docs/commands is the click commands' own: a flag added, removed
or reworded without its page changing fails here (docs/generate.py rewrites the pages)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click
import pytest

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


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """A heading's anchor as a code host makes it: lower case, punctuation dropped, spaces
    to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {_slug(m[1]) for m in re.finditer(r"^#+ (.+)$", text, flags=re.M)}


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return [m for m in LINK.findall(text) if not m.startswith(("http://", "https://", "mailto:"))]


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_of_the_readme_and_docs_reaches_a_page_and_its_heading(page: Path):
    broken = []
    for link in _links(page):
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists() or (anchor and path.suffix == ".md"
                                 and anchor not in _anchors(path)):
            broken.append(link)
    assert not broken, broken


def test_the_readme_stays_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def test_no_page_promises_a_cpu_llama_server_restart_is_bit_for_bit_with_several_slots():
    """With several slots batching moves a CPU llama-server's restart too (measured: 3 of 30
    answers and 9 of 30 items' log-probabilities at -np 2): the floor is 0 with one slot."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = " ".join(" ".join(page.read_text().split()) for page in pages)
    assert "On a CPU llama-server a forced restart repeats" not in text
    assert "On a CPU llama-server the floor is 0 only with one slot (`-np 1`)" in text
    assert "3 of 30 answers changed and the log-probabilities differed on 9 of 30 GSM8K" in text
