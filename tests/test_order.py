"""`kveval run --order`: items sent in the data's order or shuffled (seed recorded), files pair."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_server import FakeServer

from kveval.cli.cli import main
from kveval.formats.reader import read_run

PROMPTS = [f"prompt number {i}" for i in range(30)]


def kveval(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    out, _ = capsys.readouterr()
    code = exit_info.value.code
    return (code if isinstance(code, int) else 0), out


def sent(server: FakeServer) -> list[str]:
    """The prompts of the answered requests, in the order the server received them."""
    bodies = [r for r in server.requests if r.get("max_tokens") != 1]  # not the pre-flight
    return [(b.get("prompt") or b["messages"][-1]["content"]) for b in bodies]


def run(capsys: Any, server: FakeServer, tmp_path: Path, out: str, *extra: str) -> int:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    code, _ = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "prompts",
                     "--prompts", str(prompts), "--concurrency", "1", "-o",
                     str(tmp_path / out), *extra)
    return code


def test_data_order_is_the_default(capsys: Any, fake_server: FakeServer, tmp_path: Path) -> None:
    assert run(capsys, fake_server, tmp_path, "a.jsonl") == 0
    assert sent(fake_server) == PROMPTS
    header = read_run(tmp_path / "a.jsonl").header
    assert (header.order, header.order_seed) == ("data", None)


def test_shuffle_sends_another_order_records_its_seed_and_pairs(
        capsys: Any, fake_server: FakeServer, tmp_path: Path) -> None:
    assert run(capsys, fake_server, tmp_path, "a.jsonl") == 0
    fake_server.requests.clear()
    assert run(capsys, fake_server, tmp_path, "b.jsonl", "--order", "shuffle") == 0
    order = sent(fake_server)
    assert order != PROMPTS and sorted(order) == sorted(PROMPTS)
    header = read_run(tmp_path / "b.jsonl").header
    assert header.order == "shuffle" and isinstance(header.order_seed, int)
    code, out = kveval(capsys, "compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"),
                       "--json")
    assert code == 0
    assert json.loads(out)["pairing"]["pairs"] == len(PROMPTS)


def test_resume_keeps_the_shuffled_order(capsys: Any, fake_server: FakeServer,
                                         tmp_path: Path) -> None:
    assert run(capsys, fake_server, tmp_path, "s.jsonl", "--order", "shuffle") == 0
    first = sent(fake_server)
    path = tmp_path / "s.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:11]))  # 10 items left
    fake_server.requests.clear()
    assert run(capsys, fake_server, tmp_path, "s.jsonl", "--resume") == 0
    kept = {item.request["messages"][-1]["content"] for item in read_run(path).items[:10]}
    assert sent(fake_server) == [p for p in first if p not in kept]
    assert read_run(path).header.order == "shuffle"
