"""The run file: one JSONL file per run, a header line then one line per item.

Appending is the only write during a run, so a crash loses at most the line being
written; `read_run` tolerates exactly that (a truncated last line) and nothing else.
This module owns `SCHEMA_VERSION`, the records and reading; formats/writer.py writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from kveval.errors import RunFileError

SCHEMA_VERSION = 1

# Fingerprint keys whose values change at every server start, whatever the setup: kept out
# of every setup diff and of the resume check. vLLM's /v1/models `created` time and
# `permission` ids; llama-server's /props `media_marker` (a random string); uptimes and
# start times; process ids.
VOLATILE_KEYS = frozenset({
    "created", "permission", "media_marker", "uptime", "uptime_s", "uptime_seconds",
    "start_time", "started_at", "pid",
})


def stable(value: Any) -> Any:
    """A fingerprint (or any JSON value) without its VOLATILE_KEYS, at every depth."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


@dataclass(frozen=True)
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
    setup: dict[str, str] = field(default_factory=dict)  # what the user states: --setup K=V
    schema_version: int = SCHEMA_VERSION
    type: str = "run"

    def task(self, name: str) -> dict[str, Any] | None:
        return next((t for t in self.tasks if t.get("name") == name), None)


@dataclass(frozen=True)
class ItemRecord:
    """One item's request, answer and score."""

    task: str
    item_id: str  # stable across runs, e.g. gsm8k/test/0042
    prompt_sha256: str
    request: dict[str, Any]  # the request body as sent (prompt or messages, sampling)
    status: str  # "ok" or "error"
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
    logprobs: dict[str, Any] | None = None  # --logprobs K: parallel arrays, see run/logprobs.py
    type: str = "item"

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


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    names = {f.name for f in fields(cls)}
    try:
        return cls(**{k: v for k, v in data.items() if k in names})
    except TypeError as exc:
        raise RunFileError(f"{where}: not a kveval {cls.__name__} ({exc})") from None


def _parse_header(line: str, path: Path) -> RunHeader:
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        raise RunFileError(f"{path}: line 1 is not JSON; not a kveval run file") from None
    if not isinstance(data, dict) or data.get("type") != "run":
        raise RunFileError(f"{path}: line 1 is not a kveval run header")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RunFileError(
            f"{path}: schema_version {version!r} is not supported "
            f"(this kveval reads {SCHEMA_VERSION})"
        )
    header: RunHeader = _build(RunHeader, data, f"{path}:1")
    return header


def _parse_items(lines: list[str], path: Path) -> tuple[list[ItemRecord], bool]:
    items: list[ItemRecord] = []
    for number, line in enumerate(lines, start=2):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines) + 1:  # the last line, cut short by a crash
                return items, True
            raise RunFileError(f"{path}:{number}: line is not JSON") from None
        if not isinstance(data, dict) or data.get("type") != "item":
            raise RunFileError(f"{path}:{number}: not an item record")
        items.append(_build(ItemRecord, data, f"{path}:{number}"))
    return items, False


def read_run(path: str | Path) -> Run:
    """Read a run file; raise RunFileError with one clear line when it cannot be read."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunFileError(f"{path}: no such run file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFileError(f"{path}: cannot read ({exc})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or not lines[0].strip():
        raise RunFileError(f"{path}: empty file; not a kveval run file")
    header = _parse_header(lines[0], path)
    items, truncated = _parse_items(lines[1:], path)
    return Run(header=header, items=dedupe(items), path=path, truncated_tail=truncated)


def dedupe(items: Iterable[ItemRecord]) -> list[ItemRecord]:
    """Keep one record per (task, item_id): the last, preferring an ok answer over an error."""
    kept: dict[tuple[str, str], ItemRecord] = {}
    for item in items:
        old = kept.get(item.key)
        if old is None or item.ok or not old.ok:
            kept[item.key] = item
    return list(kept.values())


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
    except OSError:
        return False


def iter_items(runs: Iterable[Run]) -> Iterator[ItemRecord]:
    for run in runs:
        yield from run.items
