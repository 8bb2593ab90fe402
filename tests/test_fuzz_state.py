"""Fuzz: what `kveval ab` keeps between calls, holding anything: `DIR/ab.json` (the arguments an
experiment was made with), `servers/LABEL.json` (a server's figures) and `servers/LABEL.pid`
(a started server's record), each a valid record with fields replaced by hostile values
(tests/fuzz.py: wrong types, huge numbers, NaN, deep nesting, control characters), or bytes
that are no JSON, or a path that is no regular file. Read back each is a record whose numbers
are in range, or one line naming the file (exit 2); never a traceback, a hang or a guess."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ab import command, environment, last_line, pids, write_suite

from kveval.errors import KvevalError, RunFileError
from kveval.formats.figures import KvPool, RunFigures, Sending, ServerFigures, Start, read_figures
from kveval.judge.trade import _from_figures
from kveval.run.ab.options import AbOptions
from kveval.run.ab.side import Side
from kveval.run.ab.state import FLAGS, resumed, write_state
from kveval.run.leftover import Record, read_record
from kveval.run.watchdog import PID_MAX
from tests.fuzz import DELETE, dumps, hostile, plant

BYTES = st.sampled_from([b"", b"garbage", b"\xef\xbb\xbf{}", b"\xff\xfe{", b"[1, 2]", b"null",
                         b'{"arguments": {}', b"{" * 100_000, b"x" * (2 << 20)])


def one_line(exc: KvevalError, path: Path) -> None:
    message = str(exc)
    assert "\n" not in message and "\r" not in message
    assert str(path) in message or str(path.parent) in message, message


def read_back(name: str, record: Any, data: bytes | None, reader: Callable[[Path], Any]) -> Any:
    """`record` as JSON (or the bytes `data`, where given) in a file called `name`, read by
    `reader`: what it read, or None where it refused the file in one line naming it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(dumps(record).encode("utf-8", "surrogatepass") if data is None
                         else data)
        try:
            return reader(path)
        except RunFileError as exc:
            one_line(exc, path)
            return None


def options(folder: Path) -> AbOptions:
    suite = folder / "suite.toml"
    suite.write_text('[[task]]\nname = "p"\nadapter = "prompts"\n')
    return AbOptions(("srv", "--port", "{port}"), Side("baseline", (), ()),
                     (Side("candidate", ("--q8",), (("MY_FLAG", "false"),)),), 1, str(suite),
                     None, "auto", False, folder / "ab", 60.0, None, None)


ARGUMENT_PATHS = [("arguments", key) for key in (*FLAGS, "candidates")] + [
    ("arguments", "candidates", "candidate"), ("arguments", "candidates", "candidate", "args"),
    ("arguments", "candidates", "candidate", "env"), ("arguments", "candidates", "other"),
    ("arguments", "serve", 0), ("arguments",), ("forcing",), ("salt",), ("sizing",)]
CHANGES = st.lists(st.tuples(st.sampled_from(ARGUMENT_PATHS),
                             st.one_of(hostile(), st.just(DELETE))), min_size=1, max_size=3)


@settings(max_examples=3 * settings.default.max_examples)
@given(CHANGES)
def test_fuzz_an_experiments_record(changes: list[tuple[tuple[Any, ...], Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        opts = options(Path(tmp))
        path = opts.output / "ab.json"
        path.parent.mkdir()
        state, _ = resumed(path, opts)
        write_state(path, state)
        data = json.loads(path.read_text())
        for where, value in changes:
            plant(data, where, value)
        path.write_text(dumps(data))
        try:
            _, kept = resumed(path, opts)
        except KvevalError as exc:
            one_line(exc, path)
            return
        concurrency = kept.concurrency
        assert concurrency is None or (type(concurrency) is int and 1 <= concurrency <= 4096)


@given(BYTES)
def test_an_experiments_record_that_is_no_json_is_one_line(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        opts = options(Path(tmp))
        path = opts.output / "ab.json"
        path.parent.mkdir()
        path.write_bytes(data)
        with pytest.raises(KvevalError) as raised:
            resumed(path, opts)
        one_line(raised.value, path)


def figures() -> dict[str, Any]:
    made = ServerFigures("baseline", ("srv", "--port", "{port}"), {"MY_FLAG": "false"},
                         (Start(8000, 1.5, "2026-01-02T03:04:05+00:00"),),
                         KvPool(1024, 16.0, "f16", 2.0, 512, ("a line",)),
                         RunFigures(1, (Sending(4, 40, 1.0, (0.5, 0.7), 8),), 4, 0.1, 0.2))
    return msgspec.to_builtins(made)  # type: ignore[no-any-return]


FIGURE_PATHS = [(key,) for key in figures()] + [
    ("starts", 0, "port"), ("starts", 0, "ready_s"), ("starts", 0, "at"), ("kv", "tokens"),
    ("kv", "bytes_per_token"), ("kv", "max_concurrency"), ("run", "concurrency"),
    ("run", "sent", 0, "wall_s"), ("run", "sent", 0, "output_tokens"), ("run", "sent", 0,
                                                                        "load_1m"),
    ("run", "sent", 0, "cpus"), ("speed",), ("version",)]


@given(st.lists(st.tuples(st.sampled_from(FIGURE_PATHS), st.one_of(hostile(), st.just(DELETE))),
                min_size=1, max_size=3), st.one_of(st.none(), BYTES))
def test_fuzz_a_servers_figures(changes: list[tuple[tuple[Any, ...], Any]],
                                data: bytes | None) -> None:
    found = figures()
    for where, value in changes:
        plant(found, where, value)
    read = read_back("baseline.json", found, data, read_figures)
    if read is not None:
        json.dumps(_from_figures(read), allow_nan=False)  # the trade's figures: bounded


RECORD_PATHS = [("pid",), ("start_ticks",), ("boot_id",), ("label",), ("owner",),
                ("owner_ticks",)]


@given(st.lists(st.tuples(st.sampled_from(RECORD_PATHS), st.one_of(
    hostile(), st.just(DELETE), st.sampled_from([0, -1, PID_MAX, PID_MAX + 1, 2**63, 2**70]))),
    min_size=1, max_size=3), st.one_of(st.none(), BYTES))
def test_fuzz_a_servers_record(changes: list[tuple[tuple[Any, ...], Any]],
                               data: bytes | None) -> None:
    record: dict[str, Any] = {"pid": 4321, "start_ticks": 99, "boot_id": "b", "label": "x",
                              "owner": 1234, "owner_ticks": 5}
    for where, value in changes:
        plant(record, where, value)
    read = read_back("baseline.pid", record, data, read_record)
    if read is not None:
        assert isinstance(read, Record) and 1 <= read.pid <= PID_MAX
        assert read.owner is None or 1 <= read.owner <= PID_MAX


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_an_experiments_record_that_is_no_regular_file_is_one_line(tmp_path: Path,
                                                                   kind: str) -> None:
    opts = options(tmp_path)
    path = opts.output / "ab.json"
    path.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero")
    with pytest.raises(KvevalError) as raised:
        resumed(path, opts)
    one_line(raised.value, path)


@pytest.mark.parametrize("record", ['{"arguments": {"noise_runs": "two"}}',
                                    '{"arguments": {"serve": [1, null]}}', "{not json"])
def test_ab_with_a_record_it_cannot_read_is_one_line_exit_2(tmp_path: Path,
                                                            record: str) -> None:
    (tmp_path / "ab").mkdir()
    (tmp_path / "ab" / "ab.json").write_text(record)
    done = subprocess.run(command(tmp_path, write_suite(tmp_path, 4)), capture_output=True,
                          text=True, timeout=60, env=environment())
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert str(tmp_path / "ab") in last_line(done.stderr) and not pids(tmp_path)
