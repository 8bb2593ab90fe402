"""The run file: one JSONL file per run, a header line then one line per item.

Appending is the only write during a run, so a crash loses at most the line being
written; `read_run` tolerates exactly that (a truncated last line) and nothing else.
This module owns `SCHEMA_VERSION`, the record types and all run-file I/O; the typed
decoding behind `read_run` lives in formats/reader.py.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any, Literal

from kveval.errors import RunFileError

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class RunHeader:
    """Line 1 of a run file: what was run, against what, with which settings."""

    label: str
    endpoint: str  # base URL with any credentials removed
    model: str
    tasks: list[dict[str, Any]]  # resolved task specs: name, version, api, sampling, data source
    sampling: dict[str, Any]  # run-wide: temperature, seed, extra_body
    concurrency: int
    fingerprint: dict[str, Any]  # what the server reveals: /v1/models, /metrics, /props, engine
    created: str
    kveval_version: str
    order: Literal["data", "shuffle"] = "data"  # the order items were sent in (--order)
    order_seed: int | None = None  # with shuffle: random.Random(order_seed) shuffled them
    schema_version: int = SCHEMA_VERSION
    type: Literal["run"] = "run"

    def task(self, name: str) -> dict[str, Any] | None:
        return next((t for t in self.tasks if t.get("name") == name), None)


@dataclass(frozen=True, slots=True)
class ItemRecord:
    """One item's request, answer and score.

    `output` is None for an error item, and for an answer whose content the server sent as
    null (a reasoning server whose budget ran out while thinking): never the same as "".
    """

    task: str
    item_id: str  # stable across runs, e.g. gsm8k/test/0042
    prompt_sha256: str
    request: dict[str, Any]  # the request body as sent (prompt or messages, sampling)
    status: Literal["ok", "error"]
    output: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    latency_s: float | None = None
    extracted: str | None = None
    reference: str | None = None
    correct: bool | None = None
    correct_strict: bool | None = None
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    reasoning: str | None = None  # a reasoning server's separate thinking text
    logprobs: dict[str, Any] | None = None  # with --logprobs K: parallel arrays, see run/client
    type: Literal["item"] = "item"

    @property
    def key(self) -> tuple[str, str]:
        return (self.task, self.item_id)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class Run:
    header: RunHeader
    items: list[ItemRecord]
    path: Path
    truncated_tail: bool = False  # the last line was cut short (a crash mid-write) and skipped

    def by_key(self) -> dict[tuple[str, str], ItemRecord]:
        return {item.key: item for item in self.items}

    def task_names(self) -> list[str]:
        return list(dict.fromkeys(item.task for item in self.items))


def to_json(record: RunHeader | ItemRecord) -> str:
    # Fields hold plain JSON values already: a shallow dict avoids asdict's deep copy.
    data = {f.name: getattr(record, f.name) for f in fields(record)}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def read_run(path: str | Path, *, judging: bool = False) -> Run:
    """Read a run file, every field validated; raise RunFileError with one clear line
    (`fp8.jsonl:17: correct: expected bool, got str`) when it cannot be read.

    `judging=True` leaves out what judging never reads, the largest part of a record: each
    item's `request` ({}), `usage` and `latency_s` (None). A resumed run needs them all.
    """
    from kveval.formats.reader import read_run_file

    return read_run_file(Path(path), judging=judging)


def read_answer_array(path: str | Path) -> list[str]:
    """Read the tutorial format: a JSON array of answer strings, paired by position."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
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
        with open(path, encoding="utf-8") as fh:
            return fh.read(64).lstrip().startswith("[")
    except (OSError, UnicodeDecodeError):  # read_run says what is wrong with it
        return False


class RunWriter:
    """Appends records to a run file, flushing each line so a crash loses at most one."""

    def __init__(self, fh: IO[str], path: Path) -> None:
        self._fh = fh
        self.path = path

    def append(self, item: ItemRecord) -> None:
        self._fh.write(to_json(item) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def refuse_existing(path: Path) -> None:
    """An existing run file is never touched without --resume or --overwrite."""
    if path.exists():
        raise RunFileError(f"{path}: exists; pass --resume to continue it or --overwrite "
                           "to replace it")


def create_run(path: str | Path, header: RunHeader, overwrite: bool = False) -> RunWriter:
    """Start a new run file; refuse to touch an existing one unless overwrite is set."""
    path = Path(path)
    if not overwrite:
        refuse_existing(path)
    return _rewrite(path, header, [])


def reopen_run(path: str | Path, header: RunHeader, keep: Iterable[ItemRecord]) -> RunWriter:
    """Resume: atomically rewrite the file as header + kept items, then append to it."""
    return _rewrite(Path(path), header, keep)


def _rewrite(path: Path, header: RunHeader, keep: Iterable[ItemRecord]) -> RunWriter:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(to_json(header) + "\n")
            for item in keep:
                fh.write(to_json(item) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        return RunWriter(open(path, "a", encoding="utf-8"), path)  # noqa: SIM115
    except OSError as exc:
        raise RunFileError(f"{path}: cannot write ({exc.strerror or exc})") from None


def iter_items(runs: Iterable[Run]) -> Iterator[ItemRecord]:
    for run in runs:
        yield from run.items
