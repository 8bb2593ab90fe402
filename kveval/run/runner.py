"""Adapter items -> requests -> scored records, appended as they finish, with a progress bar."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from kveval.adapters import ADAPTERS
from kveval.adapters.base import Item, TaskSpec
from kveval.errors import Interrupted
from kveval.formats.records import ItemRecord
from kveval.formats.writer import RunWriter
from kveval.run.client import (
    ClientConfig,
    Connection,
    Reply,
    build_request,
    checked,
    make_client,
    send,
)
from kveval.run.forcing.item import exchange
from kveval.run.interrupt import exit_code, how
from kveval.run.interrupt import run as run_async
from kveval.safe import one_line

Before = Callable[[Connection], Awaitable[None]]


@dataclass(frozen=True)
class Job:
    """One item to send, with its task spec and the exact request body."""

    spec: TaskSpec
    item: Item
    body: dict[str, Any]
    span: tuple[int, int] | None = None  # teacher forcing: the answer's characters in the echo
    forced: Any = None  # teacher forcing: a run/forcing/forced.Forced (item.py sends it)


def plan(specs_items: Sequence[tuple[TaskSpec, Sequence[Item]]], model: str, seed: int | None,
         extra_body: dict[str, Any] | None) -> list[Job]:
    return [Job(spec, item, build_request(item, spec, model, seed, extra_body))
            for spec, items in specs_items for item in items]


def to_record(job: Job, reply: Reply) -> ItemRecord:
    """Pure: the record of one answered (or failed) job, scored by its adapter; a reply the
    reader would refuse is an error record (client.checked)."""
    item = job.item
    reply = checked(reply)
    common: dict[str, Any] = {
        "task": item.task,
        "item_id": item.item_id,
        "prompt_sha256": item.prompt_sha256,
        "request": job.body,
        "reference": item.reference,
        "latency_s": reply.latency_s,
        "meta": dict(item.meta),
    }
    if reply.error is not None:
        return ItemRecord(status="error", error=reply.error, **common)
    score = ADAPTERS[job.spec.adapter].score(item, reply.text or "")  # null: no answer
    common["meta"].update(score.meta)
    common["meta"].update(reply.meta or {})
    return ItemRecord(
        status="ok",
        output=reply.text,
        reasoning=reply.reasoning,
        finish_reason=reply.finish_reason,
        usage=reply.usage,
        extracted=score.extracted,
        correct=score.correct,
        correct_strict=score.correct_strict,
        logprobs=reply.logprobs,
        **common,
    )


@dataclass(frozen=True)
class Sent:
    """What one stretch of sending wrote, and why any request in it was sent again."""

    records: list[ItemRecord]
    resent: list[str]


async def _execute(jobs: Sequence[Job], config: ClientConfig, concurrency: int,
                   on_record: Callable[[ItemRecord], None], before: Before | None,
                   on_start: Callable[[], None]) -> list[str]:
    """Send every job; why each resent attempt was resent."""
    conn = make_client(config)
    gate = asyncio.Semaphore(concurrency)

    async def one(job: Job) -> ItemRecord:
        async with gate:
            if job.forced is not None:
                return to_record(job, await exchange(job.forced, conn))
            return to_record(job, await send(conn, job.body, job.span))

    tasks: list[asyncio.Future[ItemRecord]] = []
    try:
        if before is not None:
            await before(conn)
        on_start()
        tasks = [asyncio.ensure_future(one(job)) for job in jobs]
        for finished in asyncio.as_completed(tasks):
            on_record(await finished)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await conn.close()
    return conn.resent


def execute(jobs: Sequence[Job], config: ClientConfig, concurrency: int,
            open_writer: Callable[[], RunWriter], description: str = "kveval run",
            before: Before | None = None) -> Sent:
    """Send every job, appending each record as it finishes; return the new records.

    `before` runs first on the same client (the pre-flight check); the run file is opened
    only once it passed, so a failed check leaves an existing file untouched; the progress
    bar's clock starts then, with the first request. Ctrl-C stops sending; every record
    already written stays, and the file stays valid.
    """
    done: list[ItemRecord] = []
    errors = 0
    with contextlib.ExitStack() as stack:
        state: dict[str, Any] = {}

        def on_start() -> None:
            if jobs:  # nothing to send: no bar
                state["bar"] = stack.enter_context(_bar(len(jobs), description))

        def on_record(record: ItemRecord) -> None:
            nonlocal errors
            if "writer" not in state:
                state["writer"] = stack.enter_context(open_writer())
            state["writer"].append(record)
            done.append(record)
            state["bar"].update(1)
            if not record.ok:
                errors += 1
                state["bar"].set_postfix(errors=errors, refresh=False)

        resent = _run(_execute(jobs, config, concurrency, on_record, before, on_start), state)
        if "writer" not in state:
            stack.enter_context(open_writer())
    return Sent(done, resent)


def _bar(total: int, description: str) -> Any:
    from tqdm import tqdm

    # its clock runs from the first request; it shows from a second on (a run that fails
    # at once, say its run file cannot be locked, is the one line that says why)
    return tqdm(total=total, desc=one_line(description), unit="req", file=sys.stderr,
                dynamic_ncols=True, mininterval=0.25, delay=1.0)


def _run(sending: Coroutine[Any, Any, list[str]], state: dict[str, Any]) -> list[str]:
    """Ctrl-C, or SIGTERM (run/interrupt.py), stops the sending between two records."""
    try:
        return run_async(sending)
    except KeyboardInterrupt:
        raise interrupted(state.get("writer")) from None


def interrupted(writer: RunWriter | None) -> Interrupted:
    """What a stopped run leaves: how many items its file holds, and how to go on."""
    if writer is None:
        return Interrupted(f"interrupted ({how()}) before the run file was written; nothing "
                           "on file changed", exit_code())
    return Interrupted(f"interrupted ({how()}); {writer.path} is valid and holds "
                       f"{writer.count} item(s); `kveval run ... --resume` continues it",
                       exit_code())

