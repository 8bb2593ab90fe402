"""Untrusted text made safe to show or keep: URLs without credentials, terminal text without
control sequences and with every registered secret masked (kveval/masking.py), Markdown with
its syntax escaped. Every string that came from a server or a file passes through here before
a terminal cell, a Markdown block or a page, so a secret is masked before escaping could hide
it; kveval/sink.py then holds every byte printed or written to the same rules. Imports
kveval.masking only: every part of the package may use it.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit, urlunsplit

from kveval.masking import mask

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), DCS/SOS/PM/APC (ESC P|X|^|_ ... ST), and
# two-character escapes; then any C0 control but tab and newline, DEL and the C1 range.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[@-Z\\-_]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_STREAM_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # CR and LF kept
# Characters with a meaning in CommonMark or GitHub Markdown at some position of a line.
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")


def terminal(text: str) -> str:
    """`text` without escape sequences and control characters (newline and tab are kept),
    every registered secret masked (before and after: stripping could join one's parts)."""
    return mask(_CONTROLS.sub("", _ESCAPES.sub("", mask(text))))


def lines(text: str) -> str:
    """`terminal(text)` that keeps CR too: a stream's text, progress bars included."""
    return mask(_STREAM_CONTROLS.sub("", _ESCAPES.sub("", mask(text))))


_ZWJ = "\u200d"
_REGIONAL = range(0x1F1E6, 0x1F200)  # flag letters: a flag is a pair of them


def _extends(char: str) -> bool:
    """A character that belongs to the cluster before it: a combining mark, a variation
    selector, an emoji skin-tone modifier or tag, a zero-width joiner."""
    code = ord(char)
    return (unicodedata.combining(char) != 0 or unicodedata.category(char) in ("Mn", "Me", "Mc")
            or 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF
            or 0x1F3FB <= code <= 0x1F3FF or 0xE0020 <= code <= 0xE007F or char == _ZWJ)


def _cluster_end(text: str, start: int) -> int:
    """The end of the character cluster that starts at `start`."""
    end = start + 1
    if text[start:end + 1] == "\r\n":
        return end + 1
    if ord(text[start]) in _REGIONAL and end < len(text) and ord(text[end]) in _REGIONAL:
        end += 1
    while end < len(text) and _extends(text[end]):
        end += 2 if text[end] == _ZWJ and end + 1 < len(text) else 1
    return end


def units(text: str) -> list[tuple[int, int, bool]]:
    """`text` as (start, end, visible) units: each escape sequence or control character
    whole (invisible), each character cluster whole."""
    found, at = [], 0
    while at < len(text):
        match = _ESCAPES.match(text, at) or _CONTROLS.match(text, at)
        if match and match.end() > at:
            found.append((at, match.end(), False))
            at = match.end()
            continue
        end = _cluster_end(text, at)
        found.append((at, end, True))
        at = end
    return found


def unit_at(text: str, at: int) -> tuple[int, int]:
    """The span to mark for a difference at character `at`: the unit holding it, never
    part of an escape sequence or of a cluster, and up to the next visible character when
    that unit shows nothing (`<mark></mark>[31mRED` cannot happen)."""
    span: tuple[int, int] | None = None
    for start, end, visible in units(text):
        if span is None and end > at:
            span = (start, end)
        if span is not None and visible:
            return span[0], end
    return span if span is not None else (len(text), len(text))


def one_line(text: str) -> str:
    """`terminal(text)` with every run of white space (newlines included) folded to a space."""
    return " ".join(terminal(text).split())


def markdown(text: str) -> str:
    """Plain text as Markdown that renders as the same text: no heading, link, emphasis,
    table cell break or raw HTML can be injected through it. Control characters go too."""
    escaped = terminal(text).replace("&", "&amp;").replace("<", "&lt;")
    return _MARKDOWN.sub(r"\\\1", escaped)


def redact_url(url: str) -> str:
    """The URL without user:password, query or fragment, so it can be printed or written."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return "<unparseable URL>"
    netloc = f"[{host}]" if ":" in host else host
    if port:
        netloc += f":{port}"
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


PLACEHOLDERS = ("{port}", "{slot}", "{gpu}")  # kveval ab's, filled when a server starts


def shell_line(words: list[str] | tuple[str, ...]) -> str:
    """A command line to copy, as shlex.join quotes it, but a word whose only characters a
    shell would read are a placeholder's braces left bare (`--port {port}`: braces without a
    comma or `..` are literal to a shell, and quotes would read as part of the value)."""
    import shlex

    def word(text: str) -> str:
        bare = text
        for mark in PLACEHOLDERS:
            bare = bare.replace(mark, "")
        return text if bare != text and (not bare or shlex.quote(bare) == bare) else \
            shlex.quote(text)
    return " ".join(word(w) for w in words)
