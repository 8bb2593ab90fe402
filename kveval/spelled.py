"""Where a secret stands spelled so that no list of literal spellings finds it (kveval/
masking.py masks through these): behind \\uXXXX, %XX and JSON escapes, mixed as a writer
pleases (`escaped_masked`), and split by line breaks, raw or as JSON writes them
(`split_masked`: a server's log wrapping the key it was sent): each through `Spelled`, what
the text spells with where each of its characters stands in it. Both take time linear in the
text and the secret, however long the secret. No kveval imports.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Collection, Iterable, Iterator

# A run of %XX (one UTF-8 character or more), a run of \uXXXX (its backslash doubled as in a
# JSON file), or one of JSON's two-character escapes.
_UNIT = re.compile(r"((?:%[0-9A-Fa-f]{2})+)|((?:\\\\?u[0-9A-Fa-f]{4})+)|\\([\"\\bfnrt])")
_U = re.compile(r"\\\\?u([0-9A-Fa-f]{4})")
_JSON = {'"': '"', "\\": "\\", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_UTF8_SIZE = {12: 2, 13: 2, 14: 3, 15: 4}  # by a lead byte's high nibble; else one byte
_BREAK = re.compile(r"\r?\n|\\(?:r\\)?n")  # a line break, raw or as JSON writes it
_SURROGATE = range(0xD800, 0xE000)


def _utf8(run: str, at: int) -> Iterator[tuple[str, int, int]]:
    """The characters a run of %XX at `at` spells, each with where it starts and ends."""
    data = bytes.fromhex(run.replace("%", ""))
    i = 0
    while i < len(data):
        size = _UTF8_SIZE.get(data[i] >> 4, 1)
        try:
            char = data[i:i + size].decode("utf-8")
        except UnicodeDecodeError:
            char, size = "\ufffd", 1
        yield char, at + 3 * i, at + 3 * (i + size)
        i += size


def _utf16(run: str, at: int) -> Iterator[tuple[str, int, int]]:
    """The characters a run of \\uXXXX at `at` spells (a surrogate pair one character, a lone
    surrogate U+FFFD), each with where it starts and ends."""
    units = [(int(m[1], 16), at + m.start(), at + m.end()) for m in _U.finditer(run)]
    i = 0
    while i < len(units):
        code, start, end = units[i]
        low = units[i + 1] if i + 1 < len(units) else (0, 0, 0)
        if 0xD800 <= code < 0xDC00 and 0xDC00 <= low[0] < 0xE000:
            code, end, i = 0x10000 + ((code - 0xD800) << 10) + (low[0] - 0xDC00), low[2], i + 1
        yield ("\ufffd" if code in _SURROGATE else chr(code)), start, end
        i += 1


Piece = tuple[str, int, int, bool]  # what it spells, where it starts and ends, raw


def _escaped(text: str) -> Iterator[Piece]:
    """`text` in pieces: each stretch without escapes whole, each escaped character alone."""
    last = 0
    for m in _UNIT.finditer(text):
        if m.start() > last:
            yield text[last:m.start()], last, m.start(), True
        if m[1] or m[2]:
            chars = _utf8(m[1], m.start()) if m[1] else _utf16(m[2], m.start())
            yield from ((char, start, end, False) for char, start, end in chars)
        else:
            yield _JSON[m[3]], m.start(), m.end(), False
        last = m.end()
    if last < len(text):
        yield text[last:], last, len(text), True


def _unbroken(text: str) -> Iterator[Piece]:
    """`text` in pieces between its line breaks."""
    last = 0
    for m in _BREAK.finditer(text):
        yield text[last:m.start()], last, m.start(), True
        last = m.end()
    yield text[last:], last, len(text), True


class Spelled:
    """What a text spells (`plain`; `plus`, the same with a raw `+` as a space, as a form
    writes one), and where in the text each character of it stands."""

    def __init__(self, pieces: Iterable[Piece]) -> None:
        self.at: list[int] = []  # where each piece starts in what the text spells
        self.where: list[tuple[int, int, bool]] = []  # and in the text
        plain, plus, length = [], [], 0
        for piece, start, end, raw in pieces:
            self.at.append(length)
            self.where.append((start, end, raw))
            plain.append(piece)
            plus.append(piece.replace("+", " ") if raw else piece)
            length += len(piece)
        self.plain, self.plus = "".join(plain), "".join(plus)

    def holds(self, literal: str) -> bool:
        return literal in self.plain or literal in self.plus

    def _span(self, first: int, size: int) -> tuple[int, int]:
        k = bisect_right(self.at, first) - 1
        last = bisect_right(self.at, first + size - 1) - 1
        start, end, raw = self.where[last]
        return (self.where[k][0] + first - self.at[k],
                start + first + size - self.at[last] if raw else end)

    def spans(self, literal: str) -> list[tuple[int, int]]:
        """Where in the text each spelling of `literal` stands, in order, none overlapping."""
        found = set()
        for view in (self.plain, self.plus):
            at = view.find(literal)
            while at >= 0:
                found.add(self._span(at, len(literal)))
                at = view.find(literal, at + 1)
        kept: list[tuple[int, int]] = []
        for start, end in sorted(found):
            if not kept or start >= kept[-1][1]:
                kept.append((start, end))
        return kept


def _replaced(text: str, spans: list[tuple[int, int]], mask: str) -> str:
    parts, last = [], 0
    for start, end in spans:
        parts += [text[last:start], mask]
        last = end
    return "".join([*parts, text[last:]])


def escaped_masked(text: str, literals: Iterable[str], mask: str) -> str:
    """`text` with each of `literals` (longest first) spelled with escapes replaced by `mask`."""
    found = Spelled(_escaped(text))
    for literal in literals:
        if found.holds(literal):
            text = _replaced(text, found.spans(literal), mask)
            found = Spelled(_escaped(text))
    return text


def split_masked(text: str, secrets: Collection[str], mask: str) -> str:
    """Every one of `secrets` split by line breaks in `text`, replaced by `mask`."""
    joined = text.replace("\n", "").replace("\r", "").replace("\\n", "").replace("\\r", "")
    if not any(secret in joined for secret in secrets):  # the usual text: nothing to map
        return text
    found = Spelled(_unbroken(text))
    for secret in sorted(secrets, key=lambda s: (-len(s), s)):
        if secret in found.plain:
            text = _replaced(text, found.spans(secret), mask)
            found = Spelled(_unbroken(text))
    return text
