"""Where a secret stands spelled so that no list of literal spellings finds it (kveval/
masking.py masks through these): behind \\uXXXX and %XX escapes (`decoded`: the text they
spell, to choose which patterns to run), and split by one line break, raw or as JSON writes it
(`split_masked`: a server's log wrapping the key it was sent). No kveval imports.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from urllib.parse import unquote, unquote_plus

_ESCAPE = re.compile(r"\\\\?u([0-9A-Fa-f]{4})")  # its backslash doubled as in a JSON file
_BREAK = re.compile(r"\r?\n|\\(?:r\\)?n")  # a line break, raw or as JSON writes it


def decoded(text: str) -> tuple[str, str]:
    """`text` with its \\uXXXX escapes and %XX decoded (and `+` as a space, apart)."""
    found = _ESCAPE.sub(lambda m: chr(int(m[1], 16)), text)
    found = found.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return unquote(found, errors="replace"), unquote_plus(found, errors="replace")


def _across(text: str, at: int, end: int, width: int,
            secrets: Iterable[str]) -> tuple[int, int] | None:
    """Where one of `secrets` broken by the line break at [at, end) stands, if one is."""
    left, right = text[max(0, at - width):at], text[end:end + width]
    joined = left + right
    for secret in secrets:
        start = joined.find(secret, max(0, len(left) - len(secret) + 1))
        if 0 <= start < len(left):
            return at - (len(left) - start), end + start + len(secret) - len(left)
    return None


def split_masked(text: str, secrets: Collection[str], mask: str) -> str:
    """Every one of `secrets` split by one line break in `text`, replaced by `mask`."""
    joined = text.replace("\n", "").replace("\r", "").replace("\\n", "").replace("\\r", "")
    if not any(secret in joined for secret in secrets):  # the usual text: no search per break
        return text
    width = max(map(len, secrets))
    spans = [s for m in _BREAK.finditer(text) if (s := _across(text, *m.span(), width, secrets))]
    after = len(text) + 1
    for start, end in reversed(spans):
        if end <= after:  # not one secret found again from its second break
            text, after = text[:start] + mask + text[end:], start
    return text
