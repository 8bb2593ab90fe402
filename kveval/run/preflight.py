"""Before the run: send the longest prompt once with a one-token budget.

A prompt longer than the server allows, a bad --extra-body or a model the server will not
serve is then one clear line and exit 2, instead of a file full of identical errors.
"""

from __future__ import annotations

from collections.abc import Sequence

from kveval.errors import EndpointError
from kveval.run.client import Connection, send
from kveval.run.runner import Before, Job

_CLIENT_ERRORS = ("HTTP 400", "HTTP 404", "HTTP 413", "HTTP 422")


def _size(job: Job) -> int:
    if job.item.prompt is not None:
        return len(job.item.prompt)
    return sum(len(m.get("content", "")) for m in job.item.messages or ())


def longest(jobs: Sequence[Job]) -> Job:
    return max(jobs, key=_size)


def check_longest(jobs: Sequence[Job]) -> Before:
    """A check that raises EndpointError when the server rejects the longest request."""
    job = longest(jobs)

    async def check(conn: Connection) -> None:
        error = (await send(conn, {**job.body, "max_tokens": 1})).error
        if error is None:
            return
        if error.startswith(_CLIENT_ERRORS):
            raise EndpointError(f"the server rejects {job.item.item_id} (the longest prompt, "
                                f"{_size(job):,} characters): {error}")
        if not error.startswith("HTTP 5"):
            raise EndpointError(f"the server did not answer a first request: {error}")

    return check
