"""Adapter items -> requests -> scored records, appended as they finish, with a progress bar."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kveval.adapters import ADAPTERS
from kveval.adapters.base import Item, TaskSpec
from kveval.client import ClientConfig, Reply, build_request, make_client, send
from kveval.records import ItemRecord, RunWriter


@dataclass(frozen=True)
class Job:
    """One item to send, with its task spec and the exact request body."""

    spec: TaskSpec
    item: Item
    body: dict[str, Any]


def plan(specs_items: Sequence[tuple[TaskSpec, Sequence[Item]]], model: str, seed: int | None,
         extra_body: dict[str, Any] | None) -> list[Job]:
    return [Job(spec, item, build_request(item, spec, model, seed, extra_body))
            for spec, items in specs_items for item in items]


def to_record(job: Job, reply: Reply) -> ItemRecord:
    """Pure: the record of one answered (or failed) job, scored by its adapter."""
    item = job.item
    common: dict[str, Any] = {
        "task": item.task,
        "item_id": item.item_id,
        "prompt_sha256": item.prompt_sha256,
        "request": job.body,
        "reference": item.reference,
        "latency_s": reply.latency_s,
        "meta": dict(item.meta),
    }
    if reply.error is not None or reply.text is None:
        return ItemRecord(status="error", error=reply.error or "empty reply", **common)
    score = ADAPTERS[job.spec.adapter].score(item, reply.text)
    common["meta"].update(score.meta)
    return ItemRecord(
        status="ok",
        output=reply.text,
        finish_reason=reply.finish_reason,
        usage=reply.usage,
        extracted=score.extracted,
        correct=score.correct,
        correct_strict=score.correct_strict,
        **common,
    )


async def _execute(jobs: Sequence[Job], config: ClientConfig, concurrency: int,
                   on_record: Callable[[ItemRecord], None]) -> None:
    client = make_client(config)
    gate = asyncio.Semaphore(concurrency)

    async def one(job: Job) -> ItemRecord:
        async with gate:
            return to_record(job, await send(client, job.body))

    tasks = [asyncio.ensure_future(one(job)) for job in jobs]
    try:
        for finished in asyncio.as_completed(tasks):
            on_record(await finished)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.close()


def execute(jobs: Sequence[Job], config: ClientConfig, concurrency: int, writer: RunWriter,
            description: str = "kveval run") -> list[ItemRecord]:
    """Send every job, appending each record as it finishes; return the new records.

    Ctrl-C stops sending; every record already written stays, and the file stays valid.
    """
    from tqdm import tqdm

    done: list[ItemRecord] = []
    errors = 0
    with tqdm(total=len(jobs), desc=description, unit="req", file=sys.stderr,
              dynamic_ncols=True, mininterval=0.25) as bar:

        def on_record(record: ItemRecord) -> None:
            nonlocal errors
            writer.append(record)
            done.append(record)
            bar.update(1)
            if not record.ok:
                errors += 1
                bar.set_postfix(errors=errors, refresh=False)

        asyncio.run(_execute(jobs, config, concurrency, on_record))
    return done
