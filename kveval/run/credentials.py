"""The credentials a request carries, read in one place: the API key from the environment,
refused in one line naming its variable (never quoting it) when no HTTP header can carry it,
before any request; and the proxy, if one is configured, that every request passes through
with them: a proxy variable that does not parse as a proxy URL (an unencoded `#`, a control
character, a port that is no number) is refused in one line naming the variable, never
quoting it. A proxy written without a scheme (`user:password@host:port`, which curl and
urllib take) is read as http://. Standard library only."""

from __future__ import annotations

import os
import urllib.request
from urllib.parse import urlsplit

from kveval.errors import UsageError
from kveval.safe import redact_url
from kveval.secret_sources import PROXY_VARIABLES, with_scheme

KEY_VARIABLES = ("KVEVAL_API_KEY", "OPENAI_API_KEY")
PROXY_FORM = ("scheme://[user:password@]host[:port], with # ? / @ and spaces in a user or "
              "password percent-encoded")


def _unsendable(value: str) -> str | None:
    """What in `value` an HTTP header cannot carry, in words; None when it can."""
    for at, char in enumerate(value):
        if char in "\r\n":
            return f"a line break (character {at + 1})"
        if not " " <= char <= "~":
            kind = "a control character" if ord(char) < 0x80 else "a character outside ASCII"
            return f"{kind} (character {at + 1})"
    return None


def proxy_problem(value: str) -> str | None:
    """What keeps `value` from being a proxy URL, in words; None when it is one (or empty)."""
    if not value:
        return None
    if any(not "!" <= char <= "~" for char in value):
        return "it holds a space, a control character or a character outside ASCII"
    try:
        parts = urlsplit(with_scheme(value))
        parts.port  # noqa: B018 - raises ValueError for a port that is no number
    except ValueError:
        return "its port is not a number, or its host does not parse"
    if not parts.hostname:
        return "it names no host"
    if parts.query or parts.fragment or parts.path not in ("", "/") or "#" in value:
        return "it holds a path, a query or a fragment (an unencoded # or ?)"
    return None


def check_proxies() -> None:
    """UsageError naming the first proxy variable that does not parse."""
    for name in PROXY_VARIABLES:
        problem = proxy_problem(os.environ.get(name, ""))
        if problem is not None:
            raise UsageError(f"{name} does not parse as a proxy URL: {problem}; nothing was "
                             f"sent. Write it as {PROXY_FORM}")


def api_key() -> str | None:
    """KVEVAL_API_KEY, else OPENAI_API_KEY; UsageError when it cannot be sent as a header,
    or when a proxy every request would pass through does not parse (check_proxies)."""
    check_proxies()
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
    return redact_url(with_scheme(found)), variable
