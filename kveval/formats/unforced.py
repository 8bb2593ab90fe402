"""The baseline items a teacher-forced run did not force, by task and reason.

A forced run scores the baseline's own answer tokens; some baseline items it cannot score:
an empty answer has no token, a failed request no answer, and a chat item needs a chat
template the server may not offer. Those are known before anything is sent, so the run's
header lists them (`teacher_force.unforced`: task -> reason -> item ids). An item whose
tokens the server's tokenizer could not reproduce is known only once it is scored: its
record says `meta.teacher_forced.tokens: "retokenized"`, and it is compared only up to the
first token that differs. `left_out` counts all four, for the run's summary and `compare`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kveval.formats.records import ItemRecord

ERROR, EMPTY, UNSERVABLE, RETOKENIZED = "error", "empty", "unservable", "retokenized"
WHY = {
    ERROR: "baseline errors",
    EMPTY: "empty answers (no token to score)",
    UNSERVABLE: "chat items (no chat template on the server)",
    RETOKENIZED: "retokenized (compared up to the first token that differs)",
}
Listed = dict[str, dict[str, list[str]]]  # task -> reason -> item ids


def unforceable(record: ItemRecord) -> str | None:
    """Why a baseline item cannot be forced anywhere (ERROR, EMPTY), or None."""
    if not record.ok or record.output is None:
        return ERROR
    return EMPTY if not record.output else None


def add(listed: Listed, task: str, reason: str, item_id: str) -> None:
    listed.setdefault(task, {}).setdefault(reason, []).append(item_id)


def left_out(teacher_force: Mapping[str, Any] | None, items: Iterable[ItemRecord]
             ) -> dict[str, dict[str, int]]:
    """Per task and reason, how many baseline items a forced run did not force at the
    baseline's tokens: its header's list and its retokenized items; {} for a run that was
    not teacher-forced."""
    if not isinstance(teacher_force, Mapping):
        return {}
    found: dict[str, dict[str, int]] = {}
    for task, reasons in _header_list(teacher_force).items():
        for reason, count in reasons.items():
            found.setdefault(task, {})[reason] = count
    for item in items:
        forced = item.meta.get("teacher_forced")
        if isinstance(forced, dict) and forced.get("tokens") == RETOKENIZED:
            mine = found.setdefault(item.task, {})
            mine[RETOKENIZED] = mine.get(RETOKENIZED, 0) + 1
    return found


def _header_list(teacher_force: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """The header's counts: `unforced` lists, or an older file's `unserved` counts."""
    listed = teacher_force.get("unforced")
    if isinstance(listed, dict):
        return {str(task): {str(r): len(ids) for r, ids in reasons.items()
                            if isinstance(ids, list)}
                for task, reasons in listed.items() if isinstance(reasons, dict)}
    older = teacher_force.get("unserved")
    if isinstance(older, dict):
        return {str(task): {UNSERVABLE: n} for task, n in older.items()
                if isinstance(n, int) and not isinstance(n, bool) and n > 0}
    return {}


def sentence(counts: Mapping[str, Mapping[str, int]]) -> str:
    """`gsm8k: 11 empty answers (no token to score); prompts: 2 retokenized (...)`; "" when
    none."""
    parts = []
    for task, reasons in counts.items():
        said = ", ".join(f"{n} {WHY.get(reason, reason)}" for reason, n in reasons.items() if n)
        if said:
            parts.append(f"{task}: {said}")
    return "; ".join(parts)


def total(counts: Mapping[str, Mapping[str, int]]) -> int:
    return sum(sum(reasons.values()) for reasons in counts.values())
