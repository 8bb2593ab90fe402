"""One reading of a run file for every command: an item written twice, its copies differing
only where judging never looks (latency, usage, request, the adapter's own meta), is refused
by gate, score, compare, report and `run --resume` alike, with the same line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clirun import kveval
from fake_server import Behaviour, FakeServer

from kveval.formats.reader import read_run

CHANGES: dict[str, Any] = {
    "latency": {"latency_s": 9.5}, "usage": {"usage": {"completion_tokens": 99}},
    "request": {"request": {"prompt": "another", "max_tokens": 8}}, "meta.index": {"index": 7},
}


def with_a_second_copy(path: Path, change: str) -> Path:
    """The run file with its first item written again, `change` made in the copy."""
    lines = path.read_bytes().splitlines(keepends=True)
    copy = json.loads(lines[1])
    if change == "meta.index":
        copy["meta"] = {**copy.get("meta", {}), **CHANGES[change]}
    else:
        copy.update(CHANGES[change])
    twice = path.with_name(f"twice-{path.name}")
    twice.write_bytes(b"".join(lines) + json.dumps(copy).encode() + b"\n")
    return twice


def commands(base: Path, twice: Path, data: Path, url: str) -> dict[str, list[str]]:
    b, t = str(base), str(twice)
    return {
        "gate": ["gate", "--baseline", b, "--candidate", t],
        "score": ["score", t, "--baseline", b],
        "compare": ["compare", b, t],
        "report": ["report", "--baseline", b, "--candidate", t, "-o", str(base.parent / "p.html")],
        "run --resume": ["run", "--endpoint", url, "--task", "gsm8k", "--data", str(data),
                         "--limit", "4", "-o", t, "--resume"],
    }


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_every_command_refuses_an_item_written_twice_with_the_same_line(
        change: str, capsys: Any, tmp_path: Path, gsm8k_dir: Path) -> None:
    base = tmp_path / "r.jsonl"
    with FakeServer(Behaviour(answer=lambda body: "#### 18")) as server:
        argv = ["run", "--endpoint", server.base_url, "--task", "gsm8k", "--data",
                str(gsm8k_dir), "--limit", "4", "-o", str(base)]
        assert kveval(capsys, *argv)[0] == 0
        twice = with_a_second_copy(base, change)
        said = {name: kveval(capsys, *args)
                for name, args in commands(base, twice, gsm8k_dir, server.base_url).items()}
    item_id = read_run(base).items[0].item_id
    line = f"kveval: error: {twice}:6: gsm8k {item_id} appears twice with different content"
    for name, (code, out, err) in said.items():
        assert code == 2, (name, err)
        assert err.startswith(line) and err.count("\n") == 1, (name, err)
        assert "Traceback" not in out + err
