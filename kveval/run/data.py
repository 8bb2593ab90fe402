"""Loading task data from disk or the Hugging Face hub: the I/O edge of the adapters.

The hub's client is kept quiet: its retries and warnings never reach the terminal, and when
the hub cannot be reached at all, `datasets` looks only in its local cache (offline mode)
instead of retrying for 24 s; either way the user reads one kveval line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import warnings
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kveval.adapters.gsm8k import Gsm8kData
from kveval.adapters.prompts import PromptData, PromptEntry
from kveval.errors import DataError
from kveval.formats import limits

GSM8K_DATASET = ("openai/gsm8k", "main")
HUB_URL = "https://huggingface.co"  # HF_ENDPOINT overrides it, as for the hub's own client
HUB_CHECK_S = 3.0  # one TCP connect: can the hub be reached at all?
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
# the loggers of the hub's client and what it uses; silenced while loading
HUB_LOGGERS = ("huggingface_hub", "datasets", "fsspec", "filelock", "urllib3", "httpx",
               "httpx2", "httpcore")
NEEDS_DATA = "pass --data DIR with GSM8K's train.jsonl and test.jsonl"


def bundled_gsm8k() -> str:
    """The GSM8K slice kveval ships (kveval/data/gsm8k: the demo's questions and its shots,
    under GSM8K's MIT license beside them)."""
    return str(resources.files("kveval") / "data" / "gsm8k")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """A data file's rows: a regular file within the cap on files read whole (as every path
    kveval reads, from the command line or a run's header: formats/limits.py)."""
    try:
        text = limits.read_whole(path, error=DataError).decode("utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise DataError(f"{path}:{number}: not a JSON line") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}:{number}: expected a JSON object")
        rows.append(row)
    return rows


def _gsm8k_split(folder: Path, split: str) -> list[dict[str, str]]:
    path = folder / f"{split}.jsonl"
    if not path.is_file():
        raise DataError(f"{folder}: no {split}.jsonl (GSM8K's own format: question, answer)")
    rows = _read_jsonl(path)
    for number, row in enumerate(rows, start=1):
        if not isinstance(row.get("question"), str) or not isinstance(row.get("answer"), str):
            raise DataError(f"{path}: row {number} lacks string 'question' and 'answer' fields")
    return rows


def load_gsm8k(folder: str | None) -> Gsm8kData:
    """GSM8K from a folder of train.jsonl/test.jsonl, else through `datasets` from the hub."""
    if folder is not None:
        path = Path(folder).expanduser()
        if not path.is_dir():
            raise DataError(f"{path}: no such folder (--data wants a folder with train.jsonl "
                            "and test.jsonl)")
        return Gsm8kData(train=_gsm8k_split(path, "train"), test=_gsm8k_split(path, "test"),
                         source=str(path.resolve()))
    return _gsm8k_from_hub()


def hub_unreachable() -> str | None:
    """Why the hub cannot be reached (one TCP connect to its host), or None when it can or
    when a proxy stands between (only the proxy knows)."""
    if any(os.environ.get(name) for name in PROXY_VARS):
        return None
    url = urlsplit(os.environ.get("HF_ENDPOINT") or HUB_URL)
    host = url.hostname or "huggingface.co"
    try:
        port = url.port or (80 if url.scheme == "http" else 443)
        socket.create_connection((host, port), timeout=HUB_CHECK_S).close()
    except (OSError, ValueError) as exc:
        return f"{host}: {getattr(exc, 'strerror', None) or exc}"
    return None


@contextlib.contextmanager
def _offline(offline: bool) -> Iterator[None]:
    """Offline: the hub's client looks only in its local cache. The flag is read when
    `datasets` is imported, so it holds where this process imports it inside the block."""
    if not offline:
        yield
        return
    saved = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        if saved is None:
            del os.environ["HF_HUB_OFFLINE"]
        else:
            os.environ["HF_HUB_OFFLINE"] = saved


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The hub client's loggers and warnings off (after its import: importing sets levels)."""
    loggers = [logging.getLogger(name) for name in HUB_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _gsm8k_from_hub() -> Gsm8kData:
    unreachable = hub_unreachable()
    name, config = GSM8K_DATASET
    with _offline(unreachable is not None):
        with _quiet():
            try:
                import datasets
            except ImportError:
                raise DataError(f"the 'datasets' package is missing; {NEEDS_DATA}") from None
        with _quiet():
            try:
                loaded = datasets.load_dataset(name, config)
            except Exception as exc:  # the hub raises many kinds; all mean one thing here
                raise DataError(_hub_failure(name, exc, unreachable)) from None
    revision = getattr(loaded["test"].info, "version", None)
    return Gsm8kData(train=list(loaded["train"]), test=list(loaded["test"]),
                     source=f"hf:{name}/{config} version {revision} (datasets "
                            f"{datasets.__version__})")


def _hub_failure(name: str, exc: Exception, unreachable: str | None) -> str:
    if unreachable is not None:
        return (f"cannot load {name}: the Hugging Face hub is unreachable ({unreachable}) and "
                f"the dataset is not in the local cache; {NEEDS_DATA}")
    first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return f"cannot load {name} from the Hugging Face hub ({first}); {NEEDS_DATA}"


def load_prompts(path_text: str) -> PromptData:
    """A prompt file: one prompt per line (blank lines skipped), or JSONL with
    {"id", "prompt"} or {"id", "messages"}: JSONL by a `.jsonl` suffix, or when every
    non-blank line is a JSON object."""
    path = Path(path_text).expanduser()
    try:
        text = limits.read_whole(path, error=DataError).decode("utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: no such prompt file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read prompt file ({exc})") from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise DataError(f"{path}: the prompt file holds no prompts")
    is_jsonl = path.suffix == ".jsonl" or all(_is_object(line) for _, line in lines)
    entries = _jsonl_entries(path, lines) if is_jsonl else _text_entries(lines)
    ids = [e.id for e in entries]
    if len(set(ids)) != len(ids):
        duplicate = next(i for i in ids if ids.count(i) > 1)
        raise DataError(f"{path}: prompt id {duplicate!r} appears twice; ids must be unique")
    return PromptData(entries=entries, source=str(path.resolve()))


def _is_object(line: str) -> bool:
    """A JSONL line: a JSON object. A text prompt may start with `{` and still be text."""
    if not line.lstrip().startswith("{"):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def _text_entries(lines: list[tuple[int, str]]) -> list[PromptEntry]:
    return [PromptEntry(id=f"{i:04d}", prompt=line.strip()) for i, (_, line) in enumerate(lines)]


def _jsonl_entries(path: Path, lines: list[tuple[int, str]]) -> list[PromptEntry]:
    entries = []
    for number, line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise DataError(f"{path}:{number}: not a JSON line") from None
        entries.append(_jsonl_entry(path, number, row))
    return entries


def _jsonl_entry(path: Path, number: int, row: Any) -> PromptEntry:
    where = f"{path}:{number}"
    if not isinstance(row, dict) or "id" not in row:
        raise DataError(f"{where}: expected an object with 'id' and 'prompt' or 'messages'")
    if isinstance(row.get("prompt"), str):
        return PromptEntry(id=str(row["id"]), prompt=row["prompt"])
    messages = row.get("messages")
    valid = isinstance(messages, list) and messages and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in messages
    )
    if not valid:
        raise DataError(f"{where}: 'messages' must be a list of {{role, content}} strings")
    turns = tuple({"role": m["role"], "content": m["content"]} for m in messages or ())
    return PromptEntry(id=str(row["id"]), messages=turns)
