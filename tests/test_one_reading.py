"""One reading of a run file for every command: an item written twice, its copies differing
only where judging never looks (latency, usage, request, the adapter's own meta), is refused
by gate, score, compare, report and `run --resume` alike, with the same line; fuzzed, copies
differing in any fields (or in none, written in another key order) are read alike by all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clirun import kveval
from fake_server import Behaviour, FakeServer
from hypothesis import given, settings
from hypothesis import strategies as st

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


JUDGED: dict[str, Any] = {"output": "#### 19", "extracted": "19", "correct": False,
                          "finish_reason": "length", "status": "error", "error": "cut"}


def copied(path: Path, fields: list[str], reordered: bool, at_end: bool) -> Path:
    """The run file with one item written again, `fields` changed in the copy."""
    lines = path.read_bytes().splitlines(keepends=True)
    copy = json.loads(lines[2])
    for field in fields:
        if field == "meta.index":
            copy["meta"] = {**copy.get("meta", {}), **CHANGES[field]}
        else:
            copy.update(CHANGES[field] if field in CHANGES else {field: JUDGED[field]})
    if reordered:
        copy = dict(reversed(copy.items()))
    line = json.dumps(copy, indent=None if not reordered else 0).replace("\n", " ")
    at = len(lines) if at_end else 3
    twice = path.with_name(f"twice-{path.name}")
    twice.write_bytes(b"".join([*lines[:at], line.encode() + b"\n", *lines[at:]]))
    return twice


def test_every_command_reads_an_item_written_twice_alike(capsys: Any, tmp_path: Path,
                                                         gsm8k_dir: Path) -> None:
    """Identical copies (however written) are one item to every command; copies that differ
    anywhere are the same one line from each."""
    base = tmp_path / "r.jsonl"
    with FakeServer(Behaviour(answer=lambda body: "#### 18")) as server:
        argv = ["run", "--endpoint", server.base_url, "--task", "gsm8k", "--data",
                str(gsm8k_dir), "--limit", "4", "-o", str(base)]
        assert kveval(capsys, *argv)[0] == 0
        sent = len(server.requests)

        @settings(max_examples=max(4, settings.default.max_examples // 5))
        @given(st.lists(st.sampled_from(sorted([*CHANGES, *JUDGED])), unique=True,
                        max_size=3), st.booleans(), st.booleans())
        def fuzz(fields: list[str], reordered: bool, at_end: bool) -> None:
            twice = copied(base, fields, reordered, at_end)
            said = {name: kveval(capsys, *args) for name, args in
                    commands(base, twice, gsm8k_dir, server.base_url).items()}
            lines = {name: err.splitlines()[0] if err else "" for name, (_, _, err) in
                     said.items()}
            refused = {name for name, line in lines.items() if "appears twice" in line}
            assert refused == (set(said) if fields else set()), lines
            assert len({lines[name] for name in refused}) <= 1, lines
            if not fields:  # one item: nothing missing, nothing sent
                assert said["run --resume"][0] == 0 and len(read_run(twice).items) == 4
                assert len(server.requests) == sent
        fuzz()
