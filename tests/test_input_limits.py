"""Input limits: regular files only, bounded nesting, line length and file size, each one line
naming the file and the cap, exit 2, never a traceback nor a hang."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from kveval.formats import limits
from tests.clirun import kveval
from tests.test_reader import good, header, item, lines, write

DEAD = "http://127.0.0.1:9/v1"  # nothing listens: every case fails before the network


def deep_line(field: str, levels: int) -> bytes:
    """An item line whose `field` holds `levels` nested arrays (json.dumps cannot write
    them that deep, so the text is spliced in)."""
    text = json.dumps(item(9, **{field: {"x": "DEEP"}}))
    return (text.replace('"DEEP"', "[" * levels + "]" * levels) + "\n").encode()


def one_line_error(code: int, err: str, *words: str) -> None:
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err
    assert all(word in err for word in words), err


@pytest.mark.parametrize(("field", "levels"), [("meta", 1000), ("meta", 70),
                                               ("request", 200_000)])
@pytest.mark.parametrize("command", ["compare", "score", "gate", "resume"])
def test_deep_nesting_in_a_run_file_is_one_line(capsys: Any, tmp_path: Path, field: str,
                                                levels: int, command: str) -> None:
    base = write(tmp_path / "a.jsonl", good())
    deep = write(tmp_path / "b.jsonl", good() + deep_line(field, levels))
    args = {"compare": ("compare", base, deep), "score": ("score", deep),
            "gate": ("gate", "--baseline", base, "--candidate", deep),
            "resume": ("run", "--endpoint", DEAD, "--task", "gsm8k", "-o", deep, "--resume")}
    code, _, err = kveval(capsys, *args[command])
    one_line_error(code, err, "b.jsonl:6:", "nested deeper than the cap of 64 levels")


def test_a_deep_header_is_one_line(capsys: Any, tmp_path: Path) -> None:
    line = json.dumps(header(fingerprint={"x": "DEEP"})).replace('"DEEP"', "[" * 100 + "]" * 100)
    path = write(tmp_path / "a.jsonl", (line + "\n").encode() + good()[good().index(b"\n") + 1:])
    code, _, err = kveval(capsys, "score", path)
    one_line_error(code, err, "a.jsonl:1:", "nested deeper")


def test_a_deep_answer_array_is_one_line(capsys: Any, tmp_path: Path) -> None:
    a = tmp_path / "a.json"
    a.write_text('["x"]')
    b = tmp_path / "b.json"
    b.write_text("[" * 100_000 + "]" * 100_000)
    code, _, err = kveval(capsys, "compare", str(a), str(b))
    one_line_error(code, err, "b.json: nested deeper")


@pytest.fixture
def fifo(tmp_path: Path) -> str:
    path = tmp_path / "pipe.jsonl"
    os.mkfifo(path)
    return str(path)


@pytest.mark.parametrize("command", ["score", "gate", "compare", "report", "prompts",
                                     "resume", "teacher", "suite"])
def test_a_named_pipe_is_refused_at_once(capsys: Any, tmp_path: Path, fifo: str,
                                         command: str) -> None:
    """A reader that opened the pipe would block until killed."""
    base = write(tmp_path / "a.jsonl", good())
    run = ("run", "--endpoint", DEAD)
    args = {"score": ("score", fifo), "compare": ("compare", base, fifo),
            "gate": ("gate", "--baseline", base, "--candidate", fifo),
            "report": ("report", "--baseline", fifo, "--candidate", base, "-o",
                       str(tmp_path / "p.html")),
            "prompts": (*run, "--task", "prompts", "--prompts", fifo, "-o",
                        str(tmp_path / "r.jsonl")),
            "resume": (*run, "--task", "gsm8k", "-o", fifo, "--resume"),
            "teacher": (*run, "--teacher-force", fifo, "-o", str(tmp_path / "t.jsonl")),
            "suite": (*run, "--suite", fifo, "-o", str(tmp_path / "r.jsonl"))}
    code, _, err = kveval(capsys, *args[command])
    assert code == 2 and "Traceback" not in err
    assert "pipe.jsonl" in err and ("named pipe" in err or "no such run file" in err), err


def test_a_device_is_refused_at_once(capsys: Any, tmp_path: Path) -> None:
    """`/dev/zero` would be read until memory runs out."""
    base = write(tmp_path / "a.jsonl", good())
    code, _, err = kveval(capsys, "gate", "--baseline", base, "--candidate", "/dev/zero")
    one_line_error(code, err, "/dev/zero: is a character device, not a regular file")


def test_a_line_past_the_cap_is_one_line(capsys: Any, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_LINE_BYTES", 4 * limits.MiB)
    path = write(tmp_path / "a.jsonl",
                 lines(header(), [item(0), item(1, output="x" * (5 * limits.MiB))]))
    code, _, err = kveval(capsys, "score", path)
    one_line_error(code, err, "a.jsonl:3: line longer than the 4 MiB cap")


def test_a_file_past_the_cap_is_one_line(capsys: Any, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_WHOLE_BYTES", limits.MiB)
    a = tmp_path / "a.json"
    a.write_text(json.dumps(["x" * limits.MiB]))
    code, _, err = kveval(capsys, "compare", str(a), str(a))
    one_line_error(code, err, "above the 1 MiB cap")


def test_a_deep_suite_is_one_line(capsys: Any, tmp_path: Path) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text("[[task]]\nname = \"gsm8k\"\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    code, _, err = kveval(capsys, "run", "--endpoint", DEAD, "--suite", str(suite),
                          "-o", str(tmp_path / "r.jsonl"))
    one_line_error(code, err, "s.toml: nested deeper")
