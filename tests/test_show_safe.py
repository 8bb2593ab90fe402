"""Text from run files (labels, model ids, answers) cannot drive a terminal or inject Markdown."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kveval.formats.records import ItemRecord
from tests.clirun import kveval
from tests.test_cli_verdicts import header, prompt_items, write

EVIL_LABEL = "x\x1b[31mred\x07\n# heading [l](http://e)"
EVIL_MODEL = "m\x1b]0;title\x07odel # x"
EVIL_ANSWER = "answer \x1b[2J# x [l](http://e) <b>bold</b> | cell\x00"


def _items(changed: bool) -> list[ItemRecord]:
    items = prompt_items(20, set())
    last = items[-1]
    items[-1] = ItemRecord(task=last.task, item_id=last.item_id, prompt_sha256=last.prompt_sha256,
                           request={}, status="ok", output=EVIL_ANSWER if changed else "plain")
    return items


@pytest.fixture
def evil(tmp_path: Path) -> dict[str, str]:
    return {
        "a": write(tmp_path / "a.jsonl", header(EVIL_LABEL, model=EVIL_MODEL), _items(False)),
        "b": write(tmp_path / "b.jsonl", header("b\x1b[0m", model="other", concurrency=4),
                   _items(True)),
        "n": write(tmp_path / "n.jsonl", header("n", model=EVIL_MODEL), _items(False)),
    }


def _no_controls(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x00" not in text


def test_text_strips_escape_sequences_everywhere(evil, capsys):
    for args in (["compare", evil["a"], evil["b"], "--noise", evil["n"], "--show", "1"],
                 ["gate", "--baseline", evil["a"], "--candidate", evil["b"], "--noise",
                  evil["n"]]):
        code, out, _ = kveval(capsys, *args)
        assert code in (0, 1)
        _no_controls(out)
        assert "xred" in out and "model # x" in out


def test_markdown_escapes_every_line(evil, capsys):
    for args in (["compare", evil["a"], evil["b"], "--noise", evil["n"], "--show", "1"],
                 ["gate", "--baseline", evil["a"], "--candidate", evil["b"], "--noise",
                  evil["n"]]):
        code, out, _ = kveval(capsys, *args + ["--markdown"])
        _no_controls(out)
        assert "[l](http://e)" not in out and r"\[l\]\(http://e\)" in out
        assert "<b>" not in out
        headings = [line for line in out.splitlines() if re.match(r"\s*#", line)]
        assert all(line.startswith(("### kveval", "#### ")) for line in headings), headings
        assert not re.search(r"(^|\s)# ", out.replace(r"\#", ""))


def test_markdown_escapes_warnings(evil, capsys):
    _, out, _ = kveval(capsys, "compare", evil["a"], evil["b"], "--noise", evil["n"], "--markdown")
    warnings = [line for line in out.splitlines() if line.startswith("> **warning:**")]
    assert warnings and all("\x1b" not in w for w in warnings)
    assert any(r"\#" in w or r"\[" in w for w in warnings)


def test_json_keeps_strings_as_they_are(evil, capsys):
    import json

    _, out, _ = kveval(capsys, "compare", evil["a"], evil["b"], "--json")
    assert json.loads(out)["baseline"]["label"] == EVIL_LABEL


def test_grid_sections_escape_a_hostile_task_name(tmp_path, capsys):
    task = "# evil [l](http://e)"
    items = [ItemRecord(task=task, item_id=f"n{i}", prompt_sha256=f"n{i}", request={},
                        status="ok", output="1234567", correct=i % 2 == 0,
                        meta={"target_tokens": 1024, "depth": 50, "measured_tokens": 1000})
             for i in range(4)]
    path = write(tmp_path / "g.jsonl", header("g"), items)
    code, out, _ = kveval(capsys, "score", path, "--markdown")
    assert code == 0 and "accuracy by context length" in out
    assert "[l](http://e)" not in out and not re.search(r"(^|\*\*)# ", out, re.M)
