"""A terminal that is not UTF-8 (`LC_ALL=C PYTHONUTF8=0`, `PYTHONIOENCODING=ascii`): what it
cannot show is written as \\uXXXX escapes, never a UnicodeEncodeError; --json stays JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_show_hostile import prompts_run

REPO = Path(__file__).resolve().parents[1]
ASCII_TERMINALS = [{"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0",
                    "PYTHONCOERCECLOCALE": "0"}, {"PYTHONIOENCODING": "ascii"}]


def kveval(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    environ = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LANG", "LC_CTYPE")}
    return subprocess.run([sys.executable, "-m", "kveval.cli", *args], capture_output=True,
                          env={**environ, "PYTHONPATH": str(REPO), **env}, timeout=120)


@pytest.fixture
def runs(tmp_path: Path) -> tuple[str, str, str]:
    answers = [f"R\u00e9ponse {i} \u2014 \u2713 \U0001F600" for i in range(30)]
    changed = [*answers[:3], "autre r\u00e9ponse \u00fc", *answers[4:]]
    return (prompts_run(tmp_path / "a.jsonl", "a", answers),
            prompts_run(tmp_path / "b.jsonl", "b", changed),
            prompts_run(tmp_path / "n.jsonl", "n", answers))


@pytest.mark.parametrize("env", ASCII_TERMINALS)
def test_compare_show_escapes_what_the_terminal_cannot_take(
        env: dict[str, str], runs: tuple[str, str, str]) -> None:
    done = kveval(env, "compare", runs[0], runs[1], "--show", "5")
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert b"Traceback" not in done.stderr
    shown = done.stdout.decode("ascii")  # nothing but ASCII reached the terminal
    assert "autre r\\u00e9ponse \\u00fc" in shown
    assert "\\ud83d\\ude00" in shown  # beyond the BMP: its two UTF-16 units


@pytest.mark.parametrize("env", ASCII_TERMINALS)
def test_gate_on_an_ascii_terminal_judges_and_its_json_reads(
        env: dict[str, str], runs: tuple[str, str, str]) -> None:
    args = ("gate", "--baseline", runs[0], "--candidate", runs[1], "--noise", runs[2])
    text = kveval(env, *args)
    assert text.returncode in (0, 1, 2) and b"Traceback" not in text.stderr
    assert text.stdout.decode("ascii").strip()
    as_json = kveval(env, *args, "--json")
    assert as_json.returncode == text.returncode
    assert json.loads(as_json.stdout.decode("ascii"))["verdict"]
