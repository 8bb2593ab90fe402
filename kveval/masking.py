"""Secrets masked in every form a server can echo them, before anything is printed or written.

A key is sent as `Authorization: Bearer KEY`; credentials written into the URL
(`http://user:PASSWORD@host/v1`) as `Authorization: Basic BASE64(user:PASSWORD)`. A server
may quote either header back, decoded or not, in an error message, a model id or an answer:
`forms` lists every one of those spellings (and how JSON writes each), and `mask` replaces
them all by `***`.

The secrets of the run in progress are registered once (`register`); the two edges where
text leaves kveval, the command line's error line and the run file's lines, mask through
`mask`. Values read from files whose key names a secret (lm-eval's `model_args`, with
`api_key=...`) are masked by name (`mask_named`). No kveval imports: every part may use it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

MASK = "***"
MIN_LENGTH = 4  # shorter strings are ordinary words; masking them would garble text
# Key names whose values are secrets: api_key, api-key, token, password, secret, ...
# (tokenizer, max_tokens and tokenized_requests are not secrets)
SECRET_NAME = re.compile(r"(?i)(api[_-]?key|(private|access|secret)[_-]?key|(^|[_.-])(token|"
                         r"secret|password|passwd|pwd|credentials?|authorization|auth|bearer)"
                         r"($|[_.-]))")

_registered: set[str] = set()


def _url_credentials(url: str | None) -> list[str]:
    """The password as written in the URL and decoded, `user:password`, and its base64."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return []
    if user is None and password is None:
        return []
    pair = f"{unquote(user or '')}:{unquote(password or '')}"
    encoded = base64.b64encode(pair.encode("utf-8")).decode("ascii")
    found = [pair, encoded, encoded.rstrip("=")]
    if password:
        found += [password, unquote(password)]
    return found


def _spellings(secret: str) -> list[str]:
    """The secret, and how a JSON writer spells it (escaped quotes, \\uXXXX for non-ASCII)."""
    return [secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]]


def forms(api_key: str | None = None, url: str | None = None) -> tuple[str, ...]:
    """Every spelling of the key and of the URL's credentials, longest first (so a
    `user:password` is masked whole, not as `user:***`)."""
    raw = [api_key] if api_key else []
    raw += _url_credentials(url)
    found = {s for secret in raw for s in _spellings(secret) if len(s) >= MIN_LENGTH}
    return tuple(sorted(found, key=lambda s: (-len(s), s)))


def register(secrets: Iterable[str]) -> None:
    """Secrets of the run in progress: masked by `mask` from now on."""
    _registered.update(s for s in secrets if s and len(s) >= MIN_LENGTH)


def forget() -> None:
    """The end of a command: nothing registered any more."""
    _registered.clear()


def registered() -> tuple[str, ...]:
    return tuple(sorted(_registered, key=lambda s: (-len(s), s)))


def mask(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` with every registered secret (or every one of `secrets`) replaced by `***`."""
    for secret in registered() if secrets is None else secrets:
        if secret and len(secret) >= MIN_LENGTH and secret in text:
            text = text.replace(secret, MASK)
    return text


def mask_named(value: Any) -> Any:
    """A mapping with the values of secret-named keys (`api_key`, `token`, ...) masked."""
    if not isinstance(value, Mapping):
        return value
    return {k: (MASK if isinstance(k, str) and SECRET_NAME.search(k) and v else v)
            for k, v in value.items()}
