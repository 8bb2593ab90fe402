"""What went wrong with a request, in words a user can act on, and whether to try again.

A transport may report a refused or dropped connection as something else (a timeout); the
exception chain still holds the real cause, so the message says what happened.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from kveval.safe import one_line

MAX_WAIT_S = 60.0  # the longest Retry-After honoured
RETRY_STATUSES = frozenset({408, 409, 429})  # and every 5xx


class StatusError(Exception):
    """A server's answer outside 2xx: its code, what it said, its headers (Retry-After)."""

    def __init__(self, status: int, message: str, headers: Any = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


@dataclass(frozen=True)
class Failure:
    message: str
    retry: bool
    wait: float | None = None  # seconds the server asked for (Retry-After)


def backoff(attempt: int) -> float:
    """Seconds before retry number `attempt + 1`: 0.5, 1, 2, 4, 8, 8, ..."""
    return float(min(0.5 * 2**attempt, 8.0))


def retry_after(headers: Any) -> float | None:
    """Retry-After as seconds (a number or an HTTP date), at most MAX_WAIT_S."""
    value = headers.get("retry-after") if headers is not None else None
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            from datetime import datetime, timezone

            when = parsedate_to_datetime(value)
            seconds = (when - datetime.now(timezone.utc)).total_seconds()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), MAX_WAIT_S)


def root_cause(exc: BaseException) -> BaseException:
    seen = {id(exc)}
    while (inner := exc.__cause__ or exc.__context__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        exc = inner
    return exc


def _named(exc: BaseException, *names: str) -> bool:
    return any(cls.__name__ in names for cls in type(exc).__mro__)


def connection_failure(exc: BaseException, timeout: float) -> str:
    """The real cause of a failed connection."""
    root = root_cause(exc)
    text = one_line(str(root))
    if _named(root, "ConnectionRefusedError") or "refused" in text.lower():
        return f"connection refused ({text})" if text else "connection refused"
    if _named(root, "ServerDisconnectedError", "ConnectionResetError", "RemoteProtocolError",
              "ClientPayloadError", "IncompleteRead"):
        return f"the server closed the connection without a complete answer ({type(root).__name__})"
    if _named(root, "TimeoutError", "SocketTimeoutError", "ServerTimeoutError"):
        return f"no answer within --timeout {timeout:g} s"
    return f"{type(root).__name__}: {text}" if text else type(root).__name__


def _connection(exc: BaseException) -> bool:
    """A failure to connect or to read a whole answer (aiohttp's, or a socket's own)."""
    import aiohttp

    return isinstance(exc, (aiohttp.ClientError, ConnectionError)) and not isinstance(
        exc, (TimeoutError, asyncio.TimeoutError))


def classify(exc: BaseException, timeout: float) -> Failure:
    if isinstance(exc, StatusError):
        message = one_line(str(exc.message or ""))[:500]
        retry = exc.status in RETRY_STATUSES or exc.status >= 500
        return Failure(f"HTTP {exc.status}: {message}", retry, retry_after(exc.headers))
    if _connection(exc):
        return Failure(connection_failure(exc, timeout), retry=True)
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):  # wait_for: the attempt's deadline
        return Failure(f"no complete answer within --timeout {timeout:g} s", retry=True)
    if isinstance(exc, ValueError):
        return Failure("malformed response: the body is not JSON", retry=False)
    return Failure(f"{type(exc).__name__}: {one_line(str(exc))[:500]}", retry=False)
