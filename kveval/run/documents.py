"""The context task's documents, read: the user's (a folder of .txt and .md files, a single
such file, or a JSONL file whose lines hold a `text` field) or the ones kveval ships.

A document is natural text: UTF-8, no NUL or other control character but tab, newline and
carriage return (a binary file is refused, not forced), not empty, within MAX_DOCUMENT_BYTES.
Every refusal is one DataError line naming the file; nothing is sent before all are read.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kveval.adapters.context import ContextData, Document
from kveval.errors import DataError
from kveval.formats import limits

MAX_DOCUMENT_BYTES = 64 * limits.MiB  # 32k tokens of English are about 150 KB
MAX_DOCUMENTS = 10_000
SUFFIXES = (".txt", ".md")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def bundled() -> Path:
    return Path(__file__).resolve().parent.parent / "data" / "context"


def load_documents(data: str | None) -> ContextData:
    """The documents named by a task's `data`, or the bundled ones."""
    path = Path(data).expanduser() if data else bundled()
    limits.check_input(path, MAX_DOCUMENT_BYTES, DataError, folder_ok=True)
    if path.is_dir():
        kinds = SUFFIXES if data else (".txt",)  # the bundled folder's README is none
        files = sorted(p for p in path.iterdir() if p.suffix in kinds and p.is_file())
        if not files:
            raise DataError(f"{path}: no .txt or .md document in the folder")
        documents = [Document(p.stem, _text(p, _read(p))) for p in files[:MAX_DOCUMENTS]]
    elif not path.exists():
        raise DataError(f"{path}: no such document file or folder")
    elif path.suffix == ".jsonl":
        documents = _jsonl(path)
    else:
        documents = [Document(path.stem, _text(path, _read(path)))]
    return ContextData(tuple(documents), "bundled SQLite documentation" if not data
                       else str(path.resolve()))


def _read(path: Path) -> bytes:
    return limits.read_whole(path, cap=MAX_DOCUMENT_BYTES, error=DataError)


def _text(where: Path | str, raw: bytes | str) -> str:
    """A document's text, or DataError naming what makes it no document."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise DataError(f"{where}: not UTF-8 text (byte {exc.start}); a document is text") \
            from None
    found = _CONTROL.search(text)
    if found:
        raise DataError(f"{where}: holds a control character (U+{ord(found.group()):04X} at "
                        f"character {found.start()}): not a text document")
    if not text.strip():
        raise DataError(f"{where}: an empty document")
    return text


def _jsonl(path: Path) -> list[Document]:
    import json

    text = _text(path, _read(path))
    documents: list[Document] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            documents.append(_row(path, number, line, json))
    if not documents:
        raise DataError(f"{path}: no document in the file")
    names = [d.name for d in documents]
    if len(set(names)) != len(names):
        raise DataError(f"{path}: two documents share the id {_twice(names)!r}")
    return documents[:MAX_DOCUMENTS]


def _row(path: Path, number: int, line: str, json: Any) -> Document:
    try:
        row = json.loads(line)
    except ValueError:
        raise DataError(f"{path}:{number}: not a JSON object") from None
    if not isinstance(row, dict) or not isinstance(row.get("text"), str):
        raise DataError(f"{path}:{number}: a document line needs a string \"text\" field")
    name = row.get("id", number)
    if not isinstance(name, (str, int)) or isinstance(name, bool) or not str(name).strip():
        raise DataError(f"{path}:{number}: \"id\" must be a string or an integer")
    return Document(str(name), _text(f"{path}:{number}", row["text"]))


def _twice(names: list[str]) -> str:
    return next(name for name in names if names.count(name) > 1)
