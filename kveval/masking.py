"""Secrets masked in every form a server or a proxy can echo them, before anything is printed
or written.

A key is sent as `Authorization: Bearer KEY`; credentials written into the URL
(`http://user:PASSWORD@host/v1`) as `Authorization: Basic BASE64(user:PASSWORD)`. A server
may quote either back, decoded or not, in an error message, a model id or an answer, and
spell it as it likes: `family` lists the literal spellings of one secret (raw, as JSON writes
it, URL-, form- and percent-encoded in either case, base64 of any text holding it at any of
the three alignments, so base64 of the whole `Bearer ...` header too), and the text decoded
once (kveval/spelled.py) shows each secret and base64 spelling where no list can hold it (each
character raw, %XX in either case, or a JSON \\uXXXX escape, its backslash doubled too as a
JSON file holds an answer's escape, mixed as a writer pleases), in time linear in the text and
the secret. A secret split by one line break (raw, or `\\n` as JSON writes it: a server's log
wrapping the key it was sent) is masked whole. A secret of any length is masked where it is
a whole value (a JSON string: an env record, an argv item, a header field; a whole text), and
inside text from MIN_TEXT characters on: a shorter one is a word there (`ab`, `42`), and
`too_short` says so in one line.

A secret is what is secret by name, by form or by the user's word, never every value
(kveval/secret_sources.py): each command registers those it can know of at start-up
(`from_environment`, `--endpoint`, `kveval ab`'s servers: run/ab/env.py) and as it reads
(`named_secrets`: lm-eval's `model_args`);
kveval/sink.py masks text through `mask` and a JSON value through `masked`, inside its
strings before it is serialized. Imports only kveval/spelled.py and kveval/secret_sources.py:
every part may use it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import quote, quote_plus

from kveval.secret_sources import SECRET_NAME, looks_like_credential, url_secrets
from kveval.spelled import escaped_masked, split_masked

MASK = "***"
MIN_TEXT = 3  # a shorter secret is masked only where it stands whole: inside text, a word
# A shorter secret is masked inside text only where it stands as a word (no letter or digit
# beside it): a PIN of 202 is no secret inside the 2026 of a timestamp, 000 none in item 1000.
MIN_ANYWHERE = 8
# kveval's own identifiers and times, at the top of a record it writes (no server reaches
# them there) and a resume compares: never masked, so a short secret that happens to match
# one cannot make a run refuse its own files. Deeper (a server's /props) they are masked.
OWN_KEYS = frozenset({"item_id", "prompt_sha256", "at", "created"})
MIN_BASE64 = 8  # a base64 run shorter than this is too likely to occur by chance
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f]+")
_ENCODED = re.compile(r"%[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}")  # where an escaped spelling can stand

_secrets: list[str] = []  # as given to register_secrets: what a child process registers again
_registered: set[str] = set()
_literals: set[str] = set()  # what masking also finds spelled with escapes
_raw: set[str] = set()  # the secrets as registered: masked across a line break too
_whole: set[str] = set()  # every secret and its parts, whatever its length: masked whole
_sorted: list[tuple[str, ...]] = [()]


# ---------------------------------------------------------------- the spellings of a secret


def _lower_hex(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), text)


def _url_spellings(secret: str) -> list[str]:
    found = [quote(secret, safe=""), quote(secret), quote_plus(secret, safe=""),
             quote_plus(secret), secret.replace(" ", "+"),
             "".join(f"%{b:02X}" for b in secret.encode("utf-8", "surrogatepass"))]
    return found + [_lower_hex(s) for s in found]


def _json_spellings(secret: str) -> list[str]:
    return [json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]]


def _base64_spellings(data: bytes) -> list[str]:
    """base64 of `data` itself, and the part of it that any text holding `data` at any of
    the three byte alignments encodes alike (so base64 of `Bearer KEY` is caught too), in
    the standard and the URL-safe alphabets."""
    whole = base64.b64encode(data).decode("ascii")
    found = [whole, whole.rstrip("=")]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + data).decode("ascii")
        first, last = (shift + 2) // 3, (shift + len(data)) // 3
        found.append(encoded[4 * first: 4 * last])
    found += [s.replace("+", "-").replace("/", "_") for s in found]
    return [s for s in found if len(s) >= MIN_BASE64]


def _pieces(secret: str) -> list[str]:
    """A secret holding a line break or a control character (refused as a header, but quoted
    by whatever tried to send it): each part on its own too."""
    parts = [p for p in _BREAKS.split(secret) if p]
    return parts if parts != [secret] else []


def family(secret: str) -> list[str]:
    """Every literal spelling of one secret, longest first."""
    raw = [secret, *_pieces(secret)]
    found = set(raw)
    for s in raw:
        found.update(_json_spellings(s))
        found.update(_url_spellings(s))
        found.update(_base64_spellings(s.encode("utf-8", "surrogatepass")))
    return sorted((s for s in found if len(s) >= MIN_TEXT), key=lambda s: (-len(s), s))


# ---------------------------------------------------------------- registering and masking


def forms(api_key: str | None = None, url: str | None = None) -> tuple[str, ...]:
    """Every literal spelling of the key and of the URL's credentials, longest first (so a
    `user:password` is masked whole, not as `user:***`)."""
    raw = ([api_key] if api_key else []) + url_secrets(url)
    found = {s for secret in raw for s in family(secret)}
    return tuple(sorted(found, key=lambda s: (-len(s), s)))


def register_secrets(secrets: Iterable[str]) -> None:
    """Secrets masked by `mask` and `masked` from now on: whole whatever their length, and
    inside text in every spelling from MIN_TEXT characters on."""
    for secret in secrets:
        if not secret or secret in _secrets:
            continue
        _secrets.append(secret)
        _registered.update(family(secret))
        _sorted[0] = tuple(sorted(_registered, key=lambda s: (-len(s), s)))
        for part in [secret, *_pieces(secret)]:
            _whole.add(part)
            if len(part) < MIN_TEXT:
                continue
            _raw.add(part)
            _literals.update([part, *_base64_spellings(part.encode("utf-8", "surrogatepass"))])


def forget() -> None:
    """The end of a command: nothing registered any more."""
    _secrets.clear()
    _registered.clear()
    _literals.clear()
    _raw.clear()
    _whole.clear()
    _sorted[0] = ()


def registered() -> tuple[str, ...]:
    return _sorted[0]


def active() -> bool:
    """Whether any secret is registered, however short."""
    return bool(_secrets)


def too_short(named: Iterable[tuple[str, str]], where: str) -> str | None:
    """One line naming (never showing) each secret of `named`, (its name, it), too short to
    mask inside `where`'s text."""
    names = list(dict.fromkeys(n for n, s in named if s and len(s) < MIN_TEXT))
    if not names:
        return None
    return (f"kveval: {', '.join(names)}: too short to mask in {where} (a secret shorter than "
            f"{MIN_TEXT} characters is masked only where it stands whole); use a longer one")


def secrets() -> tuple[str, ...]:
    """The secrets registered, not their spellings: what another process registers again."""
    return tuple(_secrets)


def register_filled(mark: str, value: str) -> None:
    """Each secret holding `mark` (`{port}`, `{slot}`) registered with `value` in its place."""
    register_secrets([s.replace(mark, value) for s in secrets() if mark in s])


def _encoded(text: str) -> str:
    """The registered secrets spelled with escapes in `text`, masked."""
    return escaped_masked(text, sorted(_literals, key=lambda s: (-len(s), s)), MASK)


# Before a short secret, an escape ends a word as a space does: `\tabc123`, `\x3dabc123`, a
# terminal colour; fixed widths, as Python's lookbehind needs.
_AFTER_ESCAPE = "|".join([r"(?<![^\W_])", r"(?<=\\[a-z])", r"(?<=\\x[0-9A-Fa-f]{2})",
                          *(r"(?<=\x1b\[" + r"[0-9;]" * k + "m)" for k in range(6))])


@lru_cache(maxsize=256)
def _as_word(secret: str) -> re.Pattern[str]:
    return re.compile(f"(?:{_AFTER_ESCAPE})" + re.escape(secret) + r"(?![^\W_])")


def mask(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` with every registered secret (or every one of `secrets`) in every spelling
    replaced by `***`; a registered secret that is the whole text, whatever its length."""
    if secrets is None and text in _whole:
        return MASK
    if secrets is None and _raw and ("\n" in text or "\\n" in text):
        text = split_masked(text, _raw, MASK)
    for secret in registered() if secrets is None else secrets:
        if secret and len(secret) >= MIN_TEXT and secret in text:
            text = (text.replace(secret, MASK) if len(secret) >= MIN_ANYWHERE
                    else _as_word(secret).sub(MASK, text))
    if (secrets is None and _literals and ("%" in text or "\\u" in text)
            and _ENCODED.search(text)):
        text = _encoded(text)
    return text


def masked(value: Any, top: bool = True) -> Any:
    """A JSON value with every registered secret masked inside its strings, before it is
    serialized: a number, a boolean, null, a key and the structure stay as they are."""
    if not _secrets:
        return value
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, Mapping):
        return {k: v if top and k in OWN_KEYS else masked(v, False) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [masked(v, False) for v in value]
    return value


def mask_named(value: Any) -> Any:
    """A JSON value with every secret-named key's value, at any depth, and every value
    shaped like a credential, masked."""
    if isinstance(value, Mapping):
        return {k: (MASK if isinstance(k, str) and SECRET_NAME.search(k) and v
                    and not isinstance(v, bool) else mask_named(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_named(v) for v in value]
    return MASK if looks_like_credential(value) else value
