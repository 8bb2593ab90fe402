"""Answers that attack the renderings: a 100 MB word wrapped side by side in linear time, an
answer of millions of words judged in bounded memory, and a first-difference marker that
never splits an escape sequence or a character cluster."""

from __future__ import annotations

import re
import resource
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kveval.safe import terminal, unit_at
from kveval.show.blocks import SIDE_LINES
from kveval.show.text import _wrap
from tests.clirun import kveval
from tests.test_reader import header, item, lines, write

PROMPTS_TASK = [{"name": "prompts", "adapter": "prompts", "api": "chat", "max_tokens": 32,
                 "stop": [], "temperature": 0.0, "limit": None, "params": {}}]


def textwrap_wrap(text: str, width: int) -> list[str]:
    """The wrapping as it was: textwrap over every whole line."""
    found = [part for line in terminal(text).splitlines() or [""]
             for part in (textwrap.wrap(line, width, drop_whitespace=False) or [""])]
    return found[:SIDE_LINES] + (["..."] if len(found) > SIDE_LINES else [])


PIECES = st.sampled_from(["a", "bb", " ", "  ", "\t", "\n", "-", "word", "x" * 60, "x" * 700,
                          "é", "a-b", "\n\n", "\x1b[31m", "e\u0301"])


@given(st.lists(PIECES, max_size=60).map("".join), st.sampled_from([10, 48]))
def test_the_linear_wrap_gives_textwraps_lines(text: str, width: int) -> None:
    assert _wrap(text, width) == textwrap_wrap(text, width)


def prompts_run(path: Path, label: str, answers: list[str]) -> str:
    rows = [item(i, task="prompts", item_id=f"p{i}", output=text, extracted=None,
                 reference=None, correct=None, correct_strict=None)
            for i, text in enumerate(answers)]
    return write(path, lines(header(label=label, tasks=PROMPTS_TASK), rows))


def test_compare_show_wraps_only_what_it_shows(capsys: Any, tmp_path: Path,
                                               monkeypatch: Any) -> None:
    """textwrap is quadratic on one long word (a 100 MB answer ran past 120 s): it is only
    ever given the part of a line that the shown lines can hold. bench/show_wrap.py times
    it."""
    big = "x" * 3_000_000
    a = prompts_run(tmp_path / "a.jsonl", "a", [big])
    b = prompts_run(tmp_path / "b.jsonl", "b", ["y" + big[1:]])
    given_lengths: list[int] = []
    wrap = textwrap.wrap
    monkeypatch.setattr(textwrap, "wrap", lambda text, *a, **k: (
        given_lengths.append(len(text)), wrap(text, *a, **k))[1])
    code, out, err = kveval(capsys, "compare", a, b, "--show", "1")
    assert code == 0, err
    assert given_lengths and max(given_lengths) <= (SIDE_LINES + 2) * 50
    shown = [line for line in out.splitlines() if line.startswith(("y", "x")) and " | " in line]
    assert len(shown) == SIDE_LINES and out.count("...") >= 1


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_an_answer_of_millions_of_words_is_compared_within_a_gigabyte(tmp_path: Path) -> None:
    """The repetition score built every word 4-gram of the whole answer: 7 million words
    took 1.4 GB, and `ulimit -v` turned it into a MemoryError traceback (100 MB of words:
    6.5 GB). It reads an answer's first REPETITION_CHARS characters."""
    words = "ab " * 7_000_000
    a = prompts_run(tmp_path / "a.jsonl", "a", [words])
    b = prompts_run(tmp_path / "b.jsonl", "b", ["y" + words[1:]])
    proc = subprocess.run([sys.executable, "-m", "kveval.cli", "compare", a, b, "--show", "1"],
                          capture_output=True, text=True, preexec_fn=limit_memory,
                          cwd=Path(__file__).resolve().parents[1], timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "changed 1 of 1 answers" in proc.stdout, proc.stdout


def test_unit_at_never_splits_an_escape_or_a_cluster() -> None:
    assert unit_at("\x1b[31mRED", 0) == (0, 6)  # the escape and the R it colours
    assert unit_at("\x1b[31mRED", 3) == (0, 6)  # inside the escape: moved to its start
    assert unit_at("e\u0301x", 1) == (0, 2)  # a combining accent stays with its letter
    flag = "a\U0001F1E9\U0001F1EAb"
    assert unit_at(flag, 2) == (1, 3)  # both halves of a flag
    family = "\U0001F468\u200d\U0001F469\u200d\U0001F467!"
    assert unit_at(family, 2) == (0, 5)  # a joined emoji whole
    assert unit_at("ab", 2) == (2, 2)


def test_the_pages_marker_holds_a_whole_visible_character(capsys: Any, tmp_path: Path) -> None:
    base = prompts_run(tmp_path / "b.jsonl", "b", ["RED", "caf\u00e9", "x"])
    cand = prompts_run(tmp_path / "c.jsonl", "c", ["\x1b[31mRED", "cafe\u0301", "x"])
    page = tmp_path / "page.html"
    code, _, err = kveval(capsys, "report", "--baseline", base, "--candidate", cand,
                          "-o", str(page))
    text = page.read_text()
    assert "<mark></mark>" not in text and "[31m" not in text
    assert "<mark>R</mark>" in text  # the escape is stripped, the R it coloured marked
    assert "<mark>e\u0301</mark>" in text  # the accent is not cut from its letter
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", text)
