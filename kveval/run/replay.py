"""`kveval run --resume -o FILE` with no task named: the run on file, continued as it was made.

Everything that makes two halves one run comes from the file's header: the endpoint
(credentials were never written; the key comes from the environment as always), the model,
every task's resolved spec, the seed, the extra body, the concurrency, the stated setup, the
order and, on the embedded engine, its KV cache type. Only the run's size may change:
`--limit N` (the first N items of each task, so a run made with a smaller limit grows) and
`--trials T` (long-context grids). This is how `kveval plan` grows a pilot to the size it
recommends.

`kveval run --like FILE -o NEW` starts a new run with the same settings (one more noise run
of the baseline's setup, say), its own label and order from the command line.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kveval.adapters.base import TaskSpec
from kveval.errors import UsageError
from kveval.formats.records import RunHeader
from kveval.run.options import RunOptions

EMBEDDED = "embedded"
SPEC_FIELDS = {f.name for f in dataclasses.fields(TaskSpec)}


def spec_of(task: dict[str, Any]) -> TaskSpec:
    """A task spec as the header recorded it."""
    values = {k: v for k, v in task.items() if k in SPEC_FIELDS}
    values["stop"] = tuple(values.get("stop") or ())
    values["params"] = dict(values.get("params") or {})
    return TaskSpec(**values)


def _engine(header: RunHeader, opts: RunOptions) -> dict[str, Any]:
    engine = header.fingerprint.get("engine") if isinstance(header.fingerprint, dict) else None
    kv = engine.get("kv_cache_type") if isinstance(engine, dict) else None
    found = {"kv_cache_type": kv} if isinstance(kv, str) else {}
    return {**found, **opts.engine}


def from_header(header: RunHeader, opts: RunOptions, new_run: bool = False) -> RunOptions:
    """The options that continue the run on file (or, `new_run`, make another like it); the
    command line may only resize it."""
    if any(t.get("params", {}).get("teacher_force") for t in header.tasks):
        raise UsageError("a teacher-forced run continues with --teacher-force BASELINE.jsonl "
                         "--resume, as it was made")
    embedded = header.endpoint == EMBEDDED
    specs = tuple(spec_of(t) for t in header.tasks)
    return dataclasses.replace(
        opts, endpoint=None if embedded else (opts.endpoint or header.endpoint),
        model=opts.model or (None if embedded else header.model), specs=specs,
        concurrency=header.concurrency, seed=header.sampling.get("seed"),
        extra_body=header.sampling.get("extra_body"), setup=dict(header.setup),
        order=opts.order if new_run else header.order,
        engine=_engine(header, opts) if embedded else opts.engine,
        label=opts.label if new_run else header.label)
