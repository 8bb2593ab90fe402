"""Typed reading of a run file: msgspec decodes and validates every line in one pass.

Every field is checked against the record types of formats/records.py, so a malformed file
is one line naming the place (`fp8.jsonl:17: correct: expected bool, got str`) and never a
wrong verdict; fields this kveval does not know are skipped (forward compatibility).

msgspec rather than pydantic (which comes with openai): msgspec is strict by default, where
pydantic's lax mode reads `"correct": "no"` as False and `"latency_s": "1.5"` as 1.5, and on
bench/read_runs.py's three 100k-item files it decoded the item lines into the same dataclass
in 1.2 s of CPU against pydantic's 1.9 s.

The garbage collector is paused while a file is read: its passes over hundreds of thousands
of new, still-growing containers would cost more than the decoding itself.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import re
import sys
import typing
from collections.abc import Callable, Iterator
from dataclasses import MISSING, fields
from pathlib import Path
from typing import IO, Any

import msgspec

from kveval.errors import RunFileError
from kveval.formats.records import SCHEMA_VERSION, ItemRecord, Run, RunHeader
from kveval.safe import one_line

_MESSAGE = re.compile(r"(?P<what>.*?)(?: - at `\$(?P<where>[^`]*)`)?", re.S)


class _Object(msgspec.Struct, gc=False):
    """Any JSON object, checked as one and not kept."""


# Left out by read_run(judging=True), checked for their JSON type only: judging never reads
# them, and the request is the largest part of a record.
NOT_JUDGED: dict[str, Any] = {"request": _Object, "usage": _Object | None,
                              "latency_s": float | None}
# Strings that repeat within a run or across the runs judged together (the same items)
SHARED = ("task", "item_id", "prompt_sha256", "finish_reason", "reference", "extracted")
# The request of every record read for judging: never read, never changed (records are frozen)
NOT_READ: dict[str, Any] = {}
_JUDGED_FIELDS = tuple(f.name for f in fields(ItemRecord)
                       if f.name not in NOT_JUDGED and f.name != "type")


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


@functools.lru_cache(maxsize=1)
def _judged_type() -> type:
    """ItemRecord's fields as a msgspec Struct without those judging never reads."""
    hints = typing.get_type_hints(ItemRecord)
    spec: list[Any] = []
    for f in fields(ItemRecord):
        if f.name in NOT_JUDGED:  # checked under another attribute: ItemRecord's default
            default = f.default if f.default is not MISSING else msgspec.NODEFAULT
            spec.append((f"{f.name}_checked", NOT_JUDGED[f.name],
                         msgspec.field(name=f.name, default=default)))
        elif f.default is not MISSING:
            spec.append((f.name, hints[f.name], f.default))
        elif f.default_factory is not MISSING:
            spec.append((f.name, hints[f.name], msgspec.field(default_factory=f.default_factory)))
        else:
            spec.append((f.name, hints[f.name]))
    return msgspec.defstruct("JudgedItem", spec, gc=False)


def _shared(value: Any) -> Any:
    """One string object per distinct value, in every run read."""
    return sys.intern(value) if isinstance(value, str) else value


def _judged_record(item: Any) -> ItemRecord:
    """The record judging reads, from a JudgedItem: repeated strings interned (also meta's
    string values, e.g. an extracted answer) and the one empty request of NOT_READ."""
    values = {name: getattr(item, name) for name in _JUDGED_FIELDS}
    for name in SHARED:
        values[name] = _shared(values[name])
    values["meta"] = {key: _shared(value) for key, value in item.meta.items()}
    return ItemRecord(request=NOT_READ, **values)


def _decoder(judging: bool) -> Callable[[bytes], ItemRecord]:
    if not judging:
        return msgspec.json.Decoder(ItemRecord).decode
    lean: Callable[[bytes], Any] = msgspec.json.Decoder(_judged_type()).decode
    return lambda line: _judged_record(lean(line))


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


def parse_items(fh: IO[bytes], path: Path, judging: bool) -> tuple[list[ItemRecord], bool]:
    """The item lines after the header, and whether the last one was cut short (a crash
    mid-write: no newline and no JSON). Identical repeats of a record are kept once."""
    decode = _decoder(judging)
    kept: dict[tuple[str, str], ItemRecord] = {}
    for number, line in enumerate(fh, start=2):
        if not line.strip():
            continue
        try:
            record = decode(line)
        except msgspec.DecodeError as exc:
            if not line.endswith(b"\n") and not isinstance(exc, msgspec.ValidationError):
                return list(kept.values()), True
            raise _bad_line(path, number, exc) from None
        old = kept.setdefault(record.key, record)
        if old is not record and old != record:
            raise _duplicate(path, number, record)
    return list(kept.values()), False


def read_run_file(path: Path, judging: bool = False) -> Run:
    """Read and validate a run file (see records.read_run)."""
    try:
        with open(path, "rb") as fh, _gc_paused():
            first = fh.readline()
            if not first.strip():
                raise RunFileError(f"{path}: empty file; not a kveval run file")
            header = parse_header(first, path)
            items, truncated = parse_items(fh, path, judging)
    except FileNotFoundError:
        raise RunFileError(f"{path}: no such run file") from None
    except IsADirectoryError:
        raise RunFileError(f"{path}: is a folder, not a run file") from None
    except OSError as exc:
        raise RunFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return Run(header=header, items=items, path=path, truncated_tail=truncated)
