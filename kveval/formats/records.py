"""The run file: one JSONL file per run, a header line then one line per item.

Appending is the only write during a run, so a crash loses at most the line being
written; `read_run` tolerates exactly that (a truncated last line) and nothing else.
This module owns `SCHEMA_VERSION` and the records; formats/reader.py reads them (its typed
decoder), formats/writer.py writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import msgspec

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
    setup: dict[str, str] = field(default_factory=dict)  # what the user states: --setup K=V
    order: Literal["data", "shuffle"] = "data"  # the order items were sent in (--order)
    order_seed: int | None = None  # with shuffle: random.Random(order_seed) shuffled them
    # --teacher-force: the baseline, the method (run/forcing/method.py) and the items not forced
    teacher_force: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION
    type: Literal["run"] = "run"

    def task(self, name: str) -> dict[str, Any] | None:
        return next((t for t in self.tasks if t.get("name") == name), None)


class ItemRecord(msgspec.Struct, frozen=True, gc=False):
    """One item's request, answer and score.

    `output` is None for an error item, and for an answer whose content the server sent as
    null (a reasoning server whose budget ran out while thinking): never the same as "".

    A msgspec Struct: the typed decoder builds it straight from a line, and without the
    collector's bookkeeping (gc=False: a record refers to JSON values only, never back to
    itself) it is the smallest object a judged run of 100,000 items can be made of.
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
    meta: dict[str, Any] = msgspec.field(default_factory=dict)
    reasoning: str | None = None  # a reasoning server's separate thinking text
    logprobs: dict[str, Any] | None = None  # --logprobs K: parallel arrays, see run/logprobs.py
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


def as_dict(record: RunHeader | ItemRecord) -> dict[str, Any]:
    # Fields hold plain JSON values already: a shallow dict avoids asdict's deep copy.
    return (msgspec.structs.asdict(record) if isinstance(record, ItemRecord)
            else {f.name: getattr(record, f.name) for f in fields(record)})


def to_json(record: RunHeader | ItemRecord) -> str:
    return json.dumps(as_dict(record), ensure_ascii=False, separators=(",", ":"))


def iter_items(runs: Iterable[Run]) -> Iterator[ItemRecord]:
    for run in runs:
        yield from run.items
