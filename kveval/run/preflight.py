"""Before the run: send the longest prompt once with a one-token budget.

A prompt longer than the server allows, a bad --extra-body or a model the server will not
serve is then one clear line and exit 2, instead of a file full of identical errors.
"""

from __future__ import annotations

from collections.abc import Sequence

from kveval.errors import EndpointError
from kveval.run.client import Connection, Reply, asked_k, checked, send
from kveval.run.forcing.item import probe
from kveval.run.forcing.method import LACKS
from kveval.run.runner import Before, Job

_CLIENT_ERRORS = ("HTTP 400", "HTTP 404", "HTTP 413", "HTTP 422")


def _size(job: Job) -> int:
    if job.item.meta.get("tokens") and job.item.prompt is not None:  # a forced document
        return min(len(job.item.prompt), 4 * int(job.item.meta["tokens"]))
    if job.item.prompt is not None:
        return len(job.item.prompt)
    return sum(len(m.get("content", "")) for m in job.item.messages or ())


def longest(jobs: Sequence[Job]) -> Job:
    return max(jobs, key=_size)


def _check_logprobs(job: Job, reply: Reply) -> None:
    """A server that silently ignores a request for log-probabilities would leave the run
    without them: stop before it starts."""
    if asked_k(job.body) and not (reply.logprobs and reply.logprobs["tokens"]):
        raise EndpointError(f"the server returned no log-probabilities for --logprobs "
                            f"{asked_k(job.body)} (asked as "
                            f"{'top_logprobs' if 'messages' in job.body else 'logprobs'})")


def check_longest(jobs: Sequence[Job]) -> Before:
    """A check that raises EndpointError when the server rejects the longest request."""
    job = longest(jobs)

    async def check(conn: Connection) -> None:
        if job.forced is not None:
            return await _check_forced(job, conn)
        reply = checked(await send(conn, {**job.body, "max_tokens": 1}, job.span))
        error = reply.error
        if error is None:
            _check_logprobs(job, reply)
            return
        if asked_k(job.body) and "logprob" in error.lower():
            raise EndpointError(f"the server refuses --logprobs {asked_k(job.body)}: {error}")
        if error.startswith(_CLIENT_ERRORS):
            raise EndpointError(f"the server rejects {job.item.item_id} (the longest prompt, "
                                f"{_size(job):,} characters): {error}")
        if not error.startswith("HTTP 5"):
            raise EndpointError(f"the server did not answer a first request: {error}")

    return check


async def _check_forced(job: Job, conn: Connection) -> None:
    """Teacher forcing: the longest item's longest request, by the run's method; on
    llama-server, a note when it copies its idle slots at every task start
    (run/forcing/idle_slots.py)."""
    reply = checked(await probe(job.forced, conn))
    method = job.forced.method
    if reply.error is None and reply.logprobs and reply.logprobs["tokens"]:
        if method == "forced_decoding":
            await _note_idle_cache(job, conn)
        return
    why = reply.error or "the reply held no log-probabilities"
    hint = f"; {LACKS}" if method == "echo" else ""
    raise EndpointError(f"the server cannot teacher-force {job.item.item_id} by {method}: "
                        f"{why}{hint}")


async def _note_idle_cache(job: Job, conn: Connection) -> None:
    import click

    from kveval.run.forcing.idle_slots import idle_cache

    tokenizer = job.forced.tokenizer
    found = await idle_cache(conn, tokenizer.root, tokenizer.method.slots)
    if found.advice:
        click.echo(f"note: {found.advice}", err=True)
