"""`--resume`: continue a run file without ever deleting an answer or mixing two setups.

A resumed run must be the same run (endpoint, model, tasks, sampling, concurrency, the
setup the user stated and the server's stable fingerprint) and must ask for every item
already on file; anything else is one line naming the difference, and the file is untouched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kveval.adapters.base import Item
from kveval.errors import RunFileError, UsageError
from kveval.formats import lock
from kveval.formats.reader import parse_header, read_run
from kveval.formats.records import ItemRecord, Run, RunHeader, stable
from kveval.formats.writer import RunWriter, create_run, line, refuse_existing, reopen_run
from kveval.masking import registered

Key = tuple[str, str]


def identity(header: RunHeader) -> dict[str, Any]:
    """What must be equal for two halves of one run."""
    return {
        "endpoint": header.endpoint, "model": header.model, "sampling": header.sampling,
        "tasks": [{k: v for k, v in t.items() if k not in ("limit", "items")}
                  for t in header.tasks],
        "concurrency": header.concurrency, "setup": header.setup,
        "fingerprint": stable(header.fingerprint),
    }


def leaves(value: Any, prefix: str) -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists of tables by index."""
    if isinstance(value, dict):
        return {k: v for key, inner in value.items() for k, v in
                leaves(inner, f"{prefix}.{key}").items()}
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        return {k: v for i, inner in enumerate(value) for k, v in
                leaves(inner, f"{prefix}[{i}]").items()}
    return {prefix: value}


def differences(old: RunHeader, new: RunHeader) -> list[str]:
    """The differing parts, fingerprint and setup leaves by name: `x.y (a -> b)`."""
    a, b = identity(old), identity(new)
    found = []
    for part in a:
        if a[part] == b[part]:
            continue
        if part in ("fingerprint", "setup", "sampling"):
            la, lb = leaves(a[part], part), leaves(b[part], part)
            found += [f"{k} ({la.get(k)!r} -> {lb.get(k)!r})" for k in sorted({*la, *lb})
                      if la.get(k) != lb.get(k)]
        elif part == "concurrency":
            found.append(f"concurrency ({a[part]} -> {b[part]})")
        else:
            found.append(part)
    return found


def check_resumable(old: RunHeader, new: RunHeader, path: Path) -> None:
    found = differences(old, new)
    if found:
        shown = "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
        raise RunFileError(f"{path}: cannot resume: this run differs from the one on file in "
                           f"{shown}; write a new file with -o, or --overwrite to replace it")


def check_scope(old: Run, items: Sequence[Item]) -> None:
    """A resume never drops an item on file: not by a smaller --limit, not by a prompt gone
    from its file, not by a prompt that changed."""
    wanted = {(i.task, i.item_id): i.prompt_sha256 for i in items}
    gone = [r.item_id for r in old.items if r.key not in wanted]
    changed = [r.item_id for r in old.items
               if r.key in wanted and wanted[r.key] != r.prompt_sha256]
    if not gone and not changed:
        return
    parts = []
    if gone:
        parts.append(f"drop {len(gone)} item(s) on file that it no longer asks for "
                     f"({', '.join(gone[:3])}{', ...' if len(gone) > 3 else ''})")
    if changed:
        parts.append(f"replace {len(changed)} item(s) whose prompt changed "
                     f"({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''})")
    raise RunFileError(f"{old.path}: cannot resume: this run would {' and '.join(parts)}; "
                       "rerun with the same tasks and --limit, or pass --overwrite to "
                       "replace the file on purpose")


def answered_keys(old: Run | None, header: RunHeader, items: Sequence[Item]) -> set[Key]:
    """Resume: the items the existing file already answered, for the same prompt."""
    if old is None:
        return set()
    check_resumable(old.header, as_written(header), old.path)
    check_scope(old, items)
    return {r.key for r in old.items if r.ok}


def as_written(header: RunHeader) -> RunHeader:
    """The header as a run file holds it: the run's secrets masked (a server that lists the
    key as its model id leaves `***` on file)."""
    return parse_header(line(header), Path("<header>")) if registered() else header


def kept_items(old: Run | None, done: set[Key]) -> list[ItemRecord]:
    return [r for r in old.items if r.key in done] if old else []


def open_writer(output: Path, overwrite: bool, header: RunHeader, old: Run | None,
                done: set[Key]) -> RunWriter:
    """A new run file, or the resumed one rewritten as its header and answered items."""
    if old is not None:
        merged = dataclasses.replace(old.header, tasks=header.tasks)
        return reopen_run(output, merged, kept_items(old, done))
    return create_run(output, header, overwrite=overwrite)


def existing_run(output: Path, resume: bool, overwrite: bool) -> Run | None:
    """The run to resume, read once before any work; None for a new run file."""
    if output.exists() and not (resume or overwrite):
        refuse_existing(output)
    if output.is_dir():
        raise UsageError(f"{output}: is a folder; -o wants a file")
    if output.exists():
        lock.refuse_busy(output)  # another run writes it now
    return read_run(output) if resume and output.exists() else None
