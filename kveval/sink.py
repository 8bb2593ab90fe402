"""The one door out: every byte kveval prints or writes passes here.

- The terminal: for the length of a command `installed()` puts a `Door` in the place of
  sys.stdout and sys.stderr, so whatever prints (click, the progress bars, a library's
  warning, a traceback) reaches the terminal masked (kveval/masking.py: every registered
  secret in every spelling) and without escape sequences or C0/C1 controls (tab, newline and
  the progress bar's CR are kept). A Door holds back the end of a write that could begin a
  secret, so one split across two writes is masked whole. A terminal that takes less than
  Unicode (`LC_ALL=C`, `PYTHONIOENCODING=ascii`) gets what it cannot show as `\\uXXXX`
  escapes (valid inside `--json`'s strings too), never a UnicodeEncodeError.
- JSON (`--json`, check's JSON, run-file lines, ab.json, figures): `json_text`, from the
  value: secrets masked inside its strings before it is serialized (masking.masked), so a
  number, a boolean, a key or the structure is never changed, then DEL, C1 and the Unicode
  line separators written as \\u escapes (they can stand only inside strings, so the JSON
  means the same). `echo_json` prints such a text past the Door's text rules, which would
  turn a secret's characters inside a number or a key into `***` and break the JSON.
- Pages, Markdown and job summaries: `file_text`, masked and stripped as a terminal's text.

Imports kveval.masking and kveval.safe only: every part of the package may use it.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import re
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from kveval import masking
from kveval.safe import lines

_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029]")
_FILE_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
ESCAPE = "kveval-escape"  # the codec error handler: \\uXXXX (UTF-16 units, as JSON spells them)


def _escape(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    units = error.object[error.start:error.end].encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{int.from_bytes(units[i:i + 2], 'big'):04x}"
                   for i in range(0, len(units), 2)), error.end


codecs.register_error(ESCAPE, _escape)


def encodable(text: str, encoding: str) -> str:
    """`text` as a stream of `encoding` can take it: what it cannot encode, escaped."""
    return text.encode(encoding, ESCAPE).decode(encoding)


def _unicode(encoding: str) -> bool:
    try:
        return codecs.lookup(encoding).name in ("utf-8", "utf-16", "utf-32")
    except LookupError:
        return False


def json_text(value: Any, **options: Any) -> str:
    """A JSON value as it leaves kveval: every secret masked inside its strings before it is
    serialized (never a number, a boolean, a key or the structure), no raw DEL, C1 or line
    separator. `options` are json.dumps's (by default compact where there is no indent, and
    not ASCII only)."""
    if options.get("indent") is None:
        options.setdefault("separators", (",", ":"))
    options.setdefault("ensure_ascii", False)
    text = json.dumps(masking.masked(value), **options)
    if not text.isascii():  # the usual line is ASCII: no regex pass over it
        text = _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def file_text(text: str) -> str:
    """A page's, a Markdown block's or a job summary's text as it is written."""
    return masking.mask(_FILE_CONTROLS.sub("", masking.mask(text)))


def held_back(tail: str) -> int:
    """How many characters at the end of `tail` could begin a registered secret."""
    best = 0
    for form in masking.registered():
        at = tail.find(form[0], max(0, len(tail) - len(form) + 1))
        while at != -1 and len(tail) - at > best:
            if form.startswith(tail[at:]):
                best = len(tail) - at
                break
            at = tail.find(form[0], at + 1)
    return best


class Door:
    """A text stream in front of another: what passes is masked and stripped (safe.lines),
    a whole line at a time, and on flush all but what could begin a secret."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self._tail = ""
        self._narrow = not _unicode(self.encoding)

    def _put(self, text: str, vetted: bool = False) -> None:
        shown = text if vetted else lines(text)
        self.inner.write(encodable(shown, self.encoding) if self._narrow else shown)

    @property
    def encoding(self) -> str:
        return str(getattr(self.inner, "encoding", None) or "utf-8")

    @property
    def errors(self) -> str | None:
        return getattr(self.inner, "errors", None)

    def write(self, text: str) -> int:
        held = self._tail + text
        end = max(held.rfind("\n"), held.rfind("\r")) + 1
        self._tail = held[end:]
        if end:
            self._put(held[:end])
        return len(text)

    def flush(self) -> None:
        keep = held_back(self._tail)
        out, self._tail = self._tail[:len(self._tail) - keep], self._tail[len(self._tail) - keep:]
        if out:
            self._put(out)
        self.inner.flush()

    def drain(self) -> None:
        """Everything held, written (the end of a command)."""
        out, self._tail = self._tail, ""
        if out:
            self._put(out)
        with contextlib.suppress(OSError, ValueError):
            self.inner.flush()

    def put_json(self, text: str) -> None:
        """A text `json_text` wrote (its strings masked, no control character), as it is."""
        self.drain()
        self._put(text, vetted=True)

    def isatty(self) -> bool:
        return bool(self.inner.isatty())

    def fileno(self) -> int:
        return int(self.inner.fileno())

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return bool(getattr(self.inner, "closed", False))


def echo_json(text: str) -> None:
    """A JSON text `json_text` wrote, and a newline, on stdout."""
    out = sys.stdout
    if isinstance(out, Door):
        out.put_json(text + "\n")
    else:
        out.write(text + "\n")


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """sys.stdout and sys.stderr behind a Door each, for the length of a command."""
    out, err = sys.stdout, sys.stderr
    doors: list[Any] = [Door(out), Door(err)]
    sys.stdout, sys.stderr = doors
    try:
        yield
    finally:
        for door in doors:
            door.drain()
        sys.stdout, sys.stderr = out, err
