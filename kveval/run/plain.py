"""Completions over plain HTTP: one aiohttp session, JSON bodies in and out.

The hot path of a run. The openai client cost about 1.5 ms of CPU per request, six times a
plain POST, which at a fast server's pace was most of a run's time; kveval reads the reply
as JSON anyway (client.parse_reply), so nothing of the client's typed models was used.
Promises kept from it: the key (or the URL's Basic credentials) in the Authorization header,
redirects never followed (a completion goes to the endpoint and nowhere else), no limit on
connections below any sane concurrency, the proxy the environment names, and a non-2xx
answer as a StatusError carrying the server's own `error.message`. Deadlines and retries are
the caller's (client.send).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kveval.run.failures import StatusError
from kveval.run.http import auth_headers
from kveval.safe import redact_url

if TYPE_CHECKING:
    import aiohttp

MAX_CONNECTIONS = 1000


def status_message(status: int, raw: bytes) -> str:
    """What a failed answer says: its code, and the server's `error.message` when it sent one."""
    message = f"Error code: {status}"
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return message
    error = data.get("error", data) if isinstance(data, dict) else None
    text = error.get("message") if isinstance(error, dict) else None
    return f"{message} - {text}" if isinstance(text, str) and text else message


class PlainClient:
    """One session to the endpoint, made on the first request (inside the running loop)."""

    def __init__(self, base_url: str, api_key: str | None) -> None:
        self.base = redact_url(base_url).rstrip("/")
        self.headers = {"Content-Type": "application/json", **auth_headers(base_url, api_key)}
        self._session: aiohttp.ClientSession | None = None

    def url(self, path: str) -> str:
        """A path under the endpoint's /v1 (`/completions`), or a whole URL (`/tokenize`)."""
        return path if path.startswith(("http://", "https://")) else self.base + path

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            import aiohttp

            connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=None),
                headers=self.headers, skip_auto_headers=("User-Agent",),
                trust_env=True)  # the *_proxy variables, as every request honours them
        return self._session

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST `body` as JSON -> the answer's JSON. StatusError for a non-2xx answer (a
        redirect included), ValueError for one that is not JSON, aiohttp's errors for a
        failed connection."""
        data = json.dumps(body).encode()
        async with self.session().post(self.url(path), data=data,
                                       allow_redirects=False) as response:
            raw = await response.read()
            if not 200 <= response.status < 300:
                raise StatusError(response.status, status_message(response.status, raw),
                                  response.headers)
        return json.loads(raw)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
