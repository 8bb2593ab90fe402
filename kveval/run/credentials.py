"""The credentials a request carries, read in one place: the API key from the environment,
refused in one line naming its variable (never quoting it) when no HTTP header can carry it,
before any request; and the proxy, if one is configured, that every request passes through
with them. Standard library only."""

from __future__ import annotations

import os
import urllib.request
from urllib.parse import urlsplit

from kveval.errors import UsageError
from kveval.safe import redact_url

KEY_VARIABLES = ("KVEVAL_API_KEY", "OPENAI_API_KEY")


def _unsendable(value: str) -> str | None:
    """What in `value` an HTTP header cannot carry, in words; None when it can."""
    for at, char in enumerate(value):
        if char in "\r\n":
            return f"a line break (character {at + 1})"
        if not " " <= char <= "~":
            kind = "a control character" if ord(char) < 0x80 else "a character outside ASCII"
            return f"{kind} (character {at + 1})"
    return None


def api_key() -> str | None:
    """KVEVAL_API_KEY, else OPENAI_API_KEY; UsageError when it cannot be sent as a header."""
    for name in KEY_VARIABLES:
        value = os.environ.get(name)
        if not value:
            continue
        problem = _unsendable(value)
        if problem is not None:
            raise UsageError(f"{name} holds {problem}, which an HTTP header cannot carry; "
                             "nothing was sent. Set the key without it")
        return value
    return None


def proxy(url: str) -> tuple[str, str] | None:
    """(the proxy's URL without credentials, the variable naming it) for requests to
    `url`, where the environment routes them through one; None when they go direct."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    proxies = urllib.request.getproxies_environment()
    found = proxies.get(parts.scheme) or proxies.get("all")
    if not found or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    names = [f"{parts.scheme}_proxy", "all_proxy"]
    variable = next((n for name in names for n in (name, name.upper()) if os.environ.get(n)),
                    names[0])
    return redact_url(found), variable
