"""lm-evaluation-harness sample lines as kveval items: one item per question.

lm-eval writes one line per question per filter: for gsm8k all `strict-match` lines, then
all `flexible-extract` lines (since 0.4.7 each line names its filter; before, only the order
tells). Multi-GPU runs are concatenated rank by rank, so lines are grouped by `doc_id`, and
the k-th line of a question belongs to the k-th filter.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kveval.errors import RunFileError
from kveval.formats.limits import too_deep
from kveval.formats.records import ItemRecord

FLEXIBLE = "flexible-extract"
STRICT = "strict-match"
METRICS = ("exact_match", "acc")  # the first one a line carries is its score


@dataclass(frozen=True)
class Line:
    """One sample line: one question under one filter."""

    doc_id: int
    filter: str
    row: Mapping[str, Any]
    number: int = 0  # the sample's place in its file, from 1


def prompt_text(row: Mapping[str, Any]) -> str:
    """`arguments.gen_args_0.arg_0`: the prompt, or for chat the JSON of the messages
    (lm-eval logs the latter as a one-element list)."""
    args = row.get("arguments")
    first = args.get("gen_args_0") if isinstance(args, dict) else None
    if isinstance(args, list) and args:  # 0.4.0-0.4.2: [[prompt, gen_kwargs]]
        pair = args[0] if isinstance(args[0], list) else []
        first = {"arg_0": pair[0]} if pair else None
    value = first.get("arg_0") if isinstance(first, dict) else None
    if isinstance(value, list) and value and isinstance(value[0], str):
        value = value[0]
    return value if isinstance(value, str) else ""


def gen_kwargs(row: Mapping[str, Any]) -> dict[str, Any]:
    args = row.get("arguments")
    if isinstance(args, dict) and isinstance(args.get("gen_args_0"), dict):
        found = args["gen_args_0"].get("arg_1")
    elif isinstance(args, list) and args and isinstance(args[0], list) and len(args[0]) > 1:
        found = args[0][1]
    else:
        found = None
    return found if isinstance(found, dict) else {}


def chat_messages(text: str) -> list[dict[str, Any]] | None:
    """A chat prompt is logged as the JSON of its messages: those, else None."""
    if not text.startswith("[{"):
        return None
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    if isinstance(value, list) and all(isinstance(m, dict) and "role" in m for m in value):
        return None if too_deep(value) else value
    return None


def is_chat(text: str) -> bool:
    return chat_messages(text) is not None


def assign_filters(rows: Sequence[Mapping[str, Any]], names: Sequence[str],
                   where: str) -> list[Line]:
    """Each line with its filter: the `filter` field, else the k-th line of a question is
    the k-th filter of the task's filter list."""
    seen: dict[int, int] = {}
    lines = []
    for number, row in enumerate(rows, start=1):
        doc_id = row.get("doc_id")
        if not isinstance(doc_id, int) or isinstance(doc_id, bool):
            raise RunFileError(f"{where}: sample {number} has no integer doc_id; not an "
                               "lm-eval samples file")
        k = seen.get(doc_id, 0)
        seen[doc_id] = k + 1
        name = row.get("filter")
        if not isinstance(name, str):
            name = names[k] if k < len(names) else f"filter-{k}"
        lines.append(Line(doc_id, name, row, number))
    return lines


def _score(row: Mapping[str, Any]) -> bool | None:
    for metric in METRICS:
        value = row.get(metric)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value >= 0.5
        if isinstance(value, bool):
            return value
    return None


def _filtered(row: Mapping[str, Any]) -> str | None:
    value = row.get("filtered_resps")
    while isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, str) else None


def response(row: Mapping[str, Any]) -> str | None:
    """The model's answer, `resps[0][0]` ("" for a task whose responses are not text, e.g.
    log-likelihoods); None when the line has no `resps` or they hold no response (`[]`,
    `[[]]`, `[[null]]`): a missing answer is never read as an empty one."""
    value = row.get("resps")
    while isinstance(value, list):
        if not value:
            return None
        value = value[0]
    if value is None:
        return None
    return value if isinstance(value, str) else ""


def reference(target: Any) -> str | None:
    """GSM8K's target is the worked solution: its answer is the text after '####'."""
    if target is None:
        return None
    text = target if isinstance(target, str) else json.dumps(target, ensure_ascii=False)
    return text.split("####")[-1].strip().replace(",", "") if "####" in text else text


def _request(row: Mapping[str, Any], chat_model: bool) -> dict[str, Any]:
    """The prompt as sent: 0.4.0-0.4.2's chat models sent the prompt text as one user turn."""
    text = prompt_text(row)
    messages = chat_messages(text)
    if messages is not None:
        body: dict[str, Any] = {"messages": messages}
    elif chat_model:
        body = {"messages": [{"role": "user", "content": text}]}
    else:
        body = {"prompt": text}
    return {**body, "gen_kwargs": gen_kwargs(row)}


def _prompt_hash(row: Mapping[str, Any]) -> str:
    value = row.get("prompt_hash")
    if isinstance(value, str) and value:
        return value
    return hashlib.sha256(prompt_text(row).encode("utf-8")).hexdigest()


def make_item(task: str, doc_id: int, by_filter: Mapping[str, Mapping[str, Any]],
              chat_model: bool = False) -> ItemRecord:
    """One question: the flexible-extract line scores `correct`, strict-match `correct_strict`;
    a task with other filters is scored by its first one."""
    first = next(iter(by_filter.values()))
    main = by_filter.get(FLEXIBLE, first)
    strict = by_filter.get(STRICT)
    filters = {name: {"filtered": _filtered(row), "score": _score(row)}
               for name, row in by_filter.items()}
    meta: dict[str, Any] = {"doc_id": doc_id, "filters": filters, "source": "lm-eval"}
    for key in ("doc_hash", "target_hash"):
        if isinstance(first.get(key), str):
            meta[key] = first[key]
    if strict is not None:
        meta["extracted_strict"] = _filtered(strict)
    return ItemRecord(
        task=task, item_id=f"{task}/test/{doc_id:04d}", prompt_sha256=_prompt_hash(first),
        request=_request(first, chat_model), status="ok", output=response(first) or "",
        extracted=_filtered(main), reference=reference(first.get("target")),
        correct=_score(main), correct_strict=_score(strict) if strict is not None else None,
        meta=meta,
    )


def make_items(task: str, lines: Sequence[Line], chat_model: bool = False,
               where: str = "") -> list[ItemRecord]:
    """The lines grouped by question, in doc_id order (multi-GPU logs come rank by rank).

    Every line of a question holds its one answer (each filter reads the same `resps`): a
    line without one, or with another answer than the question's first line, is an error,
    as is a second, different line for the same question and filter."""
    grouped: dict[int, dict[str, Mapping[str, Any]]] = {}
    answers: dict[int, str] = {}
    for line in lines:
        answer = response(line.row)
        if answer is None:
            raise RunFileError(f"{where}: sample {line.number} (doc_id {line.doc_id}) holds "
                               "no response (`resps`); lm-eval logs one for every sample")
        if answers.setdefault(line.doc_id, answer) != answer:
            raise RunFileError(f"{where}: sample {line.number}: doc_id {line.doc_id} appears "
                               "again with another response; a log holds one answer per "
                               "question")
        by_filter = grouped.setdefault(line.doc_id, {})
        if by_filter.setdefault(line.filter, line.row) != line.row:
            raise RunFileError(f"{where}: sample {line.number}: doc_id {line.doc_id} appears "
                               f"twice for filter {line.filter!r} with different content")
    return [make_item(task, doc_id, grouped[doc_id], chat_model) for doc_id in sorted(grouped)]
