"""Plain HTTP for the probes and the token counter (standard library only).

Two promises the openai client does not make for these requests: credentials go to the
endpoint's own origin only (a redirect elsewhere is followed without them), and a request
has a total deadline, so a server that trickles its answer a byte at a time cannot hold the
run up (a socket timeout only bounds each read).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import unquote, urlsplit

from kveval.safe import redact_url

_CHUNK = 65536
MAX_REPLY_BYTES = 64 << 20  # a probe's or a token count's whole answer


class TooLarge(OSError):
    """An answer past the cap on what a plain request reads."""


def origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def basic_auth(url: str) -> str | None:
    """An Authorization header for credentials written into the URL (user:password@host)."""
    parts = urlsplit(url)
    if parts.username is None:
        return None
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


def auth_headers(url: str, api_key: str | None) -> dict[str, str]:
    """The URL's Basic credentials win over the key, as in the openai client setup."""
    auth = basic_auth(url) or (f"Bearer {api_key}" if api_key else None)
    return {"Authorization": auth} if auth else {}


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects, but sends no Authorization header to another origin."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and origin(newurl) != origin(req.full_url):
            new.remove_header("Authorization")
        return new


_OPENER = urllib.request.build_opener(_SameOriginRedirects())


def _read(request: urllib.request.Request, timeout: float, deadline: float,
          cap: int) -> tuple[int, bytes]:
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            chunks, size = [], 0
            while chunk := response.read1(_CHUNK):
                if time.monotonic() > deadline:
                    raise TimeoutError("deadline passed")
                size += len(chunk)
                if size > cap:
                    raise TooLarge(f"the answer is larger than {cap >> 20} MiB")
                chunks.append(chunk)
            return response.status, b"".join(chunks)
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def parsed(body: bytes) -> Any:
    """A plain request's JSON answer; ValueError for one that is not JSON or nests past the
    cap on what kveval reads (formats/limits.py), never a RecursionError."""
    from kveval.formats.limits import DEPTH_MESSAGE, too_deep

    try:
        value = json.loads(body)
    except ValueError:  # not JSON, not UTF-8
        raise ValueError("the answer is not JSON") from None
    except RecursionError:
        raise ValueError(f"the answer is {DEPTH_MESSAGE}") from None
    if too_deep(value):
        raise ValueError(f"the answer is {DEPTH_MESSAGE}")
    return value


def fetch(url: str, api_key: str | None, timeout: float,
          body: dict[str, Any] | None = None, cap: int = MAX_REPLY_BYTES) -> tuple[int, bytes]:
    """GET `url` (POST `body` as JSON when given) -> (status, body), all within `timeout`
    seconds and `cap` bytes. Raises OSError (TimeoutError past the deadline, TooLarge past
    the cap) or ValueError (a bad URL)."""
    headers = auth_headers(url, api_key)
    data = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body).encode("utf-8")
    request = urllib.request.Request(redact_url(url), data=data, headers=headers,
                                     method="POST" if body is not None else "GET")
    return _within(lambda: _read(request, timeout, time.monotonic() + timeout, cap), timeout)


def _within(call: Any, timeout: float) -> tuple[int, bytes]:
    """Run `call` in a daemon thread and give up on it after `timeout` seconds."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(timeout + 0.5)
    if "value" in outcome:
        return outcome["value"]
    if "error" in outcome:
        raise outcome["error"]
    raise TimeoutError(f"no complete answer within {timeout:g} s")
