"""Untrusted text made safe to show or keep: URLs without credentials, terminal text without
control sequences, Markdown with its syntax escaped (secrets are masked by kveval/masking.py).
Every string that came from a server or a file passes through here before a terminal or a
Markdown block; JSON output stays as it is (json.dumps escapes it already).
No kveval imports: every part of the package may use it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

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
# Characters with a meaning in CommonMark or GitHub Markdown at some position of a line.
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")


def terminal(text: str) -> str:
    """`text` without escape sequences and control characters (newline and tab are kept)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


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
