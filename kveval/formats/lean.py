"""What judging reads of a run's records, and what the runs judged together hold alike, kept
once (formats/reader.py reads records through `Shared.lean` when judging).

Judging never reads an item's request, usage or latency, nor the `meta` keys an adapter keeps
for itself (UNJUDGED_META): they are checked as the line is read, then left out. The same
items answered by a baseline, a candidate and noise runs share their ids, prompts' hashes
and metadata, and most of their answers: a record equal to the first one read of its item
in every field judging reads is that first record (records are frozen), and one that
differs refers to the first one's values wherever they are equal. Values are only ever
replaced by equal ones, so nothing a verdict reads changes.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kveval.formats.records import ItemRecord


class _Object(msgspec.Struct, gc=False):
    """Any JSON object, checked as one and not kept."""


class Judged(ItemRecord, frozen=True, gc=False):
    """An item line as judging reads it: `request` and `usage` are checked to be JSON objects
    and `latency_s` a number, then dropped (Shared.lean): judging never reads them, and the
    request is the largest part of a record."""

    request: _Object  # type: ignore[assignment]
    usage: _Object | None = None  # type: ignore[assignment]


# The request of every record read for judging: never read, never changed (records are frozen)
NOT_READ: dict[str, Any] = {}
# What an adapter keeps in `meta` for itself and no verdict reads: left out when judging
# (GSM8K's item index and strict extraction), and a `meta` left empty is NO_META
UNJUDGED_META = frozenset({"index", "extracted_strict"})
NO_META: dict[str, Any] = {}
# Fields the runs judged together often hold alike for an item: kept once (Shared.lean)
ALIKE = ("prompt_sha256", "output", "finish_reason", "extracted", "reference", "meta",
         "reasoning", "logprobs")
_set = msgspec.structs.force_setattr


class Shared:
    """What the runs judged together hold alike, kept once: the first record read of each
    item, and the short strings that repeat from item to item."""

    def __init__(self) -> None:
        self.first: dict[str, dict[str, ItemRecord]] = {}  # task -> item_id -> record
        self.strings: dict[str, str] = {}

    def lean(self, record: ItemRecord) -> ItemRecord:
        """The record without what judging never reads, sharing what is alike."""
        _set(record, "request", NOT_READ)
        _set(record, "usage", None)
        _set(record, "latency_s", None)
        if record.meta and not UNJUDGED_META.isdisjoint(record.meta):
            _set(record, "meta", _judged_meta(record.meta))
        first = indexed(self.first, record)
        if first is None:
            self._intern(record)
        elif record == first:
            return first
        else:
            _share(record, first)
        return record

    def _intern(self, record: ItemRecord) -> None:
        strings = self.strings
        _set(record, "task", strings.setdefault(record.task, record.task))
        if record.finish_reason is not None:
            _set(record, "finish_reason", strings.setdefault(record.finish_reason,
                                                             record.finish_reason))
        if record.extracted is not None:
            _set(record, "extracted", strings.setdefault(record.extracted, record.extracted))
        if record.reference is not None:
            _set(record, "reference", strings.setdefault(record.reference, record.reference))


def indexed(index: dict[str, dict[str, ItemRecord]], record: ItemRecord) -> ItemRecord | None:
    """The record `index` holds for this one's task and item, or None (and it holds this)."""
    items = index.get(record.task)
    if items is None:
        items = index[record.task] = {}
    first = items.get(record.item_id)
    if first is None:
        items[record.item_id] = record
    return first


def _judged_meta(meta: dict[str, Any]) -> dict[str, Any]:
    if meta.keys() <= UNJUDGED_META:
        return NO_META
    return {key: value for key, value in meta.items() if key not in UNJUDGED_META}


def _share(record: ItemRecord, first: ItemRecord) -> None:
    """`record` refers to `first`'s values wherever they are equal."""
    _set(record, "task", first.task)
    _set(record, "item_id", first.item_id)
    for name in ALIKE:
        mine, theirs = getattr(record, name), getattr(first, name)
        if mine is not theirs and mine == theirs:
            _set(record, name, theirs)
