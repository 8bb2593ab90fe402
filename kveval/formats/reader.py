"""Typed reading of a run file: msgspec decodes and validates every line in one pass.

Every field is checked against the record types of formats/records.py, so a malformed file
is one line naming the place (`fp8.jsonl:17: correct: expected bool, got str`) and never a
wrong verdict; fields this kveval does not know are skipped (forward compatibility).

msgspec rather than pydantic (which comes with openai): msgspec is strict by default, where
pydantic's lax mode reads `"correct": "no"` as False and `"latency_s": "1.5"` as 1.5, and on
bench/read_runs.py's three 100k-item files it decoded the item lines into the same dataclass
in 1.15 s of CPU against pydantic's 1.8 s. Records are msgspec Structs themselves (0.8 s):
decoded straight from the line, nothing converted after.

The garbage collector is paused while a file is read: its passes over hundreds of thousands
of new, still-growing containers would cost more than the decoding itself.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import msgspec

from kveval.errors import KvevalError, RunFileError
from kveval.formats import limits
from kveval.formats.checks import record_problem
from kveval.formats.lean import Judged, Shared, indexed
from kveval.formats.records import SCHEMA_VERSION, ItemRecord, Run, RunHeader
from kveval.safe import one_line

_MESSAGE = re.compile(r"(?P<what>.*?)(?: - at `\$(?P<where>[^`]*)`)?", re.S)


def describe(exc: msgspec.DecodeError) -> str:
    """msgspec's message as one line: 'correct: expected bool, got str'."""
    match = _MESSAGE.fullmatch(str(exc))
    assert match is not None  # the pattern matches any text
    what = match["what"].replace("`", "").replace(" | null", "")
    what = what.replace("Invalid enum value", "invalid value").replace(
        "Object missing required field", "missing field")
    what = what[:1].lower() + what[1:]
    where = (match["where"] or "").lstrip(".")
    return one_line(f"{where}: {what}" if where else what)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse_header(line: bytes, path: Path) -> RunHeader:
    try:
        data = msgspec.json.decode(line)
    except msgspec.DecodeError:
        raise RunFileError(f"{path}: line 1 is not JSON; not a kveval run file") from None
    except RecursionError:
        raise RunFileError(f"{path}:1: {limits.DEPTH_MESSAGE}") from None
    if limits.too_deep(data):
        raise RunFileError(f"{path}:1: {limits.DEPTH_MESSAGE}")
    if not isinstance(data, dict) or data.get("type") != "run":
        raise RunFileError(f"{path}: line 1 is not a kveval run header")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RunFileError(f"{path}: schema_version {one_line(repr(version))[:40]} is not "
                           f"supported (this kveval reads {SCHEMA_VERSION})")
    try:
        header: RunHeader = msgspec.convert(data, RunHeader)
    except msgspec.ValidationError as exc:
        raise RunFileError(f"{path}:1: {describe(exc)}") from None
    return header


def _check(record: ItemRecord, line: bytes, path: Path, number: int, lean: bool) -> None:
    """What its types cannot say holds (formats/checks.py) and its free JSON nests at most
    MAX_DEPTH deep; else RunFileError."""
    problem = record_problem(record.meta, record.logprobs)
    if problem is None and (record.meta if lean else _bracketed(line)):
        problem = _depth_problem(record, lean)
    if problem is not None:
        raise RunFileError(f"{path}:{number}: {one_line(problem)}")


def _bracketed(line: bytes) -> bool:
    """Whether the line could nest deeper than MAX_DEPTH: one with fewer brackets cannot."""
    return line.count(b"[") + line.count(b"{") > limits.MAX_DEPTH


def _depth_problem(record: ItemRecord, lean: bool) -> str | None:
    """The free JSON a reading keeps, walked: judging keeps only `meta` (its containers:
    most hold none); a full reading (resume, teacher forcing) keeps request and usage too."""
    if lean:
        for key, value in record.meta.items():
            if isinstance(value, (dict, list)) and limits.too_deep(value):
                return f"meta.{key}: {limits.DEPTH_MESSAGE}"
        return None
    free = {"meta": record.meta, "request": record.request, "usage": record.usage}
    deep = next((name for name, value in free.items() if limits.too_deep(value)), None)
    return None if deep is None else f"{deep}: {limits.DEPTH_MESSAGE}"


def _bad_line(path: Path, number: int, exc: msgspec.DecodeError) -> RunFileError:
    if isinstance(exc, msgspec.ValidationError):
        return RunFileError(f"{path}:{number}: {describe(exc)}")
    if "UTF-8" in str(exc):
        return RunFileError(f"{path}:{number}: not UTF-8 text")
    return RunFileError(f"{path}:{number}: line is not JSON")


def _duplicate(path: Path, number: int, record: ItemRecord) -> RunFileError:
    task, item_id = (one_line(part)[:200] for part in record.key)
    return RunFileError(f"{path}:{number}: {task} {item_id} appears twice with different "
                        "content; a run file holds one record per item")


class _Kept:
    """A file's records in the order first read, each (task, item_id) once: a repeat equal
    in every field is dropped, a differing one refused. A lean record lacks fields to tell
    them apart by, so a lean reading only notes the repeat (`repeated`): read_run_file then
    reads the file in full, and every command reads one item written twice the same way."""

    def __init__(self, lean: bool) -> None:
        self.items: list[ItemRecord] = []
        self.ids: dict[str, dict[str, ItemRecord]] = {}  # task -> item_id -> record
        self.lean = lean
        self.repeated = False

    def add(self, record: ItemRecord, path: Path, number: int) -> None:
        old = indexed(self.ids, record)
        if old is None:
            self.items.append(record)
        elif self.lean:
            self.repeated = True
        elif old != record:
            raise _duplicate(path, number, record)


def parse_items(fh: IO[bytes], path: Path, shared: Shared | None) -> tuple[_Kept, bool]:
    """The item lines after the header, and whether the last one was cut short (a crash
    mid-write: no newline and no JSON). Identical repeats of a record are kept once. With
    `shared` (judging), records are read lean and share what is alike with other runs."""
    decode = msgspec.json.Decoder(Judged if shared else ItemRecord).decode
    lean = shared.lean if shared else None
    kept = _Kept(lean is not None)
    for number, line in limits.lines(fh, path, first=2):
        try:
            record = decode(line)
        except msgspec.DecodeError as exc:
            if not line.strip():
                continue
            if not line.endswith(b"\n") and not isinstance(exc, msgspec.ValidationError):
                return kept, True
            raise _bad_line(path, number, exc) from None
        except RecursionError:
            raise RunFileError(f"{path}:{number}: {limits.DEPTH_MESSAGE}") from None
        _check(record, line, path, number, lean is not None)
        kept.add(record if lean is None else lean(record), path, number)
    return kept, False


def read_run_file(path: Path, shared: Shared | None = None) -> Run:
    """Read and validate a run file (see reader.read_run)."""
    try:
        with limits.open_regular(path) as fh, _gc_paused():
            first = fh.readline(limits.MAX_LINE_BYTES + 1)
            if not first.strip():
                raise RunFileError(f"{path}: empty file; not a kveval run file")
            if len(first) > limits.MAX_LINE_BYTES:
                raise RunFileError(f"{path}:1: line longer than the "
                                   f"{limits.size_text(limits.MAX_LINE_BYTES)} cap on a "
                                   "run-file line")
            header = parse_header(first, path)
            kept, truncated = parse_items(fh, path, shared)
    except FileNotFoundError:
        raise RunFileError(f"{path}: no such run file") from None
    except IsADirectoryError:
        raise RunFileError(f"{path}: is a folder, not a run file") from None
    except OSError as exc:
        raise RunFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if kept.repeated:  # the one rule for an item written twice: the full reading's
        read_run_file(path)
    return Run(header=header, items=kept.items, path=path, truncated_tail=truncated)


def read_run(path: str | Path, *, judging: bool = False, shared: Shared | None = None) -> Run:
    """Read a run file, every field validated; raise RunFileError with one clear line
    (`fp8.jsonl:17: correct: expected bool, got str`) when it cannot be read.

    `judging=True` leaves out what judging never reads, the largest part of a record: each
    item's `request` ({}), `usage` and `latency_s` (None). A resumed run needs them all.
    Runs judged together are best read with one `shared` (formats/reader.py: Shared): each
    value the runs hold alike for an item is then kept once. It implies `judging`.
    """
    if judging and shared is None:
        shared = Shared()
    return read_run_file(Path(path), shared)


def read_answer_array(path: str | Path) -> list[str]:
    """Read the tutorial format: a JSON array of answer strings, paired by position."""
    path = Path(path)
    try:
        data = limits.loads(limits.read_whole(path).decode("utf-8"), str(path))
    except FileNotFoundError:
        raise RunFileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunFileError(f"{path}: not a JSON array of answers ({exc})") from None
    if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
        raise RunFileError(f"{path}: not a JSON array of answer strings")
    return data


def is_answer_array(path: str | Path) -> bool:
    """True when the file starts with '[' (the tutorial's JSON array), not a run header."""
    try:
        with limits.open_regular(path) as fh:
            return fh.read(64).decode("utf-8", "ignore").lstrip().startswith("[")
    except (OSError, UnicodeDecodeError, KvevalError):  # read_run says what is wrong with it
        return False
