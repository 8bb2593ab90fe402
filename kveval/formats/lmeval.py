"""lm-evaluation-harness sample logs (`--log_samples`) read as kveval runs.

Two layouts exist. Since 0.4.3: `<output_path>/<model>/samples_<task>_<date_id>.jsonl` (one
JSON object a line) with `results_<date_id>.json` beside it. Versions 0.4.0-0.4.2: one
pretty-printed JSON array of objects, `<model_args>_<task>.jsonl`, beside `results.json`.
A samples file, its results file or the folder holding them all name the same run. The
header's fingerprint comes from the results file, with credentials removed from `base_url`.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kveval.errors import KvevalError, RunFileError
from kveval.formats import limits
from kveval.formats.lmeval_files import (
    RESULTS_NAME,
    SAMPLES_NAME,
    Located,
    json_object,
    locate,
    read_json,
    read_samples,
)
from kveval.formats.lmeval_samples import (
    assign_filters,
    gen_kwargs,
    is_chat,
    make_items,
    prompt_text,
)
from kveval.formats.records import Run, RunHeader
from kveval.masking import mask_named, register_secrets
from kveval.safe import redact_url
from kveval.secret_sources import named_secrets, url_secrets

_FIRST_KEY_DOC_ID = re.compile(r'\{\s*"doc_id"\s*:')
DEFAULT_FILTERS = ("strict-match", "flexible-extract")  # gsm8k's, in lm-eval's order
# results_*.json keys kept in the fingerprint: what names the setup, not when it ran
FINGERPRINT_KEYS = ("lm_eval_version", "n-shot", "versions", "task_hashes", "n-samples",
                    "chat_template_sha", "fewshot_as_multiturn", "system_instruction_sha",
                    "model_name", "model_source", "transformers_version")


def looks_like_lmeval(path: str | Path) -> bool:
    """By content: a folder, a results file, a JSON array of objects, or JSON lines with
    a `doc_id`. A JSON array of strings stays the tutorial's format."""
    path = Path(path)
    if path.is_dir():
        return True
    if RESULTS_NAME.match(path.name) or path.name == "results.json":
        return True
    try:
        with limits.open_regular(path) as fh:
            head = fh.read(4096).decode("utf-8", "ignore")
    except (OSError, KvevalError):  # the reader says what is wrong with it
        return False
    text = head.lstrip()
    if text.startswith("["):
        return text[1:].lstrip().startswith("{")
    return bool(_FIRST_KEY_DOC_ID.match(text))  # lm-eval writes doc_id first


def read_lmeval(path: str | Path) -> Run:
    """An lm-eval samples file (or its results file or folder) as one kveval Run; its path
    is the one given (0.4.0-0.4.2 samples names hold the model args, base_url and all)."""
    located = locate(Path(path))
    results = read_json(located.results) if located.results else {}
    where = str(located.results)
    chat_model = "chat" in str(json_object(results, "config", where).get("model", ""))
    items = []
    first: dict[str, Any] = {}
    for task, samples in located.samples:
        rows = read_samples(samples)
        first = first or rows[0]
        lines = assign_filters(rows, _filter_names(results, task, where), str(samples))
        items += make_items(task, lines, chat_model, str(samples))
    api = "chat" if chat_model or is_chat(prompt_text(first)) else "completions"
    try:
        header = make_header(located, results, api, gen_kwargs(first))
    except (ValueError, OverflowError, OSError) as exc:  # a number lm-eval never writes
        raise RunFileError(f"{where}: unexpected lm-eval results ({exc})") from None
    return Run(header=header, items=items, path=Path(path))


def _filter_names(results: dict[str, Any], task: str, where: str) -> tuple[str, ...]:
    config = json_object(json_object(results, "configs", where), task, f"{where}: configs")
    filters = config.get("filter_list") or []
    if not isinstance(filters, list):
        raise RunFileError(f"{where}: configs.{task}.filter_list is "
                           f"{type(filters).__name__}, expected a list of filters")
    names = [f.get("name") for f in filters if isinstance(f, dict)]
    return tuple(n for n in names if isinstance(n, str)) or DEFAULT_FILTERS


# ---------------------------------------------------------------- the header


def model_args(config: dict[str, Any]) -> dict[str, Any]:
    """`config.model_args`: a dict since 0.4.3, "k=v,k=v" before; base_url's credentials
    and every secret-named value at any depth (`api_key`, `headers.Authorization`, `key`,
    `passphrase`, ...) or credential-shaped one masked, and registered as secrets, so no
    output shows them in any spelling."""
    raw = config.get("model_args") or {}
    if isinstance(raw, str):
        raw = dict(part.split("=", 1) for part in raw.split(",") if "=" in part)
    if not isinstance(raw, dict):
        return {}
    register_secrets(named_secrets(raw))
    if isinstance(raw.get("base_url"), str):
        register_secrets(url_secrets(raw["base_url"]))
    args = mask_named(dict(raw))
    if isinstance(args.get("base_url"), str):
        args["base_url"] = redact_url(args["base_url"])
    return args


def _number(value: Any, default: float, kind: type[int] | type[float]) -> Any:
    """A setting lm-eval writes as a number (or a "k=v" string): ValueError otherwise."""
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a number, got {type(value).__name__}")
    return kind(value)


def _task_spec(results: dict[str, Any], task: str, api: str, kwargs: dict[str, Any],
               args: dict[str, Any], where: str) -> dict[str, Any]:
    shots = json_object(results, "n-shot", where).get(task)
    stop = kwargs.get("until")
    max_tokens = kwargs.get("max_gen_toks", args.get("max_gen_toks"))
    return {
        "name": task, "adapter": task, "version": json_object(results, "versions", where).get(task),
        "api": api, "max_tokens": _number(max_tokens, 256, int),
        "stop": list(stop) if isinstance(stop, list) else ([stop] if stop else []),
        "temperature": _number(kwargs.get("temperature"), 0.0, float), "limit": None,
        "data": None, "params": {"shots": shots, "fewshot": "lm-eval", "fewshot_seed":
                                 json_object(results, "config", where).get("fewshot_seed", 1234)},
        "data_source": "lm-eval",
    }


def _created(results: dict[str, Any], located: Located) -> str:
    date = results.get("date")
    if isinstance(date, (int, float)):
        return datetime.fromtimestamp(date, timezone.utc).isoformat(timespec="seconds")
    match = SAMPLES_NAME.match(located.samples[0][1].name)
    return match["date"] if match else ""


def _label(located: Located, results: dict[str, Any]) -> str:
    """The --output_path folder's name (lm-eval adds a folder per model below it), with the
    run's date when that folder holds several runs."""
    samples = located.samples[0][1]
    folder = samples.parent
    name = folder.parent.name if folder.name == results.get("model_name_sanitized") else folder.name
    match = SAMPLES_NAME.match(samples.name)
    if match and len(list(folder.glob("results_*.json"))) > 1:
        return f"{name or samples.stem} {match['date']}"
    return name or samples.stem


def make_header(located: Located, results: dict[str, Any], api: str,
                kwargs: dict[str, Any]) -> RunHeader:
    where = str(located.results)
    config = json_object(results, "config", where)
    args = model_args(config)
    fingerprint = {key: results[key] for key in FINGERPRINT_KEYS if key in results}
    fingerprint = {"lm_eval": {**fingerprint, "model": config.get("model"), "model_args": args,
                               "gen_kwargs": config.get("gen_kwargs"),
                               "fewshot_seed": config.get("fewshot_seed")}}
    model = str(args.get("model") or args.get("pretrained") or results.get("model_name") or "")
    tasks = [_task_spec(results, task, api, kwargs, args, where) for task, _ in located.samples]
    return RunHeader(
        label=_label(located, results), endpoint=str(args.get("base_url") or ""), model=model,
        tasks=tasks,
        sampling={"temperature": 0.0, "seed": _number(args.get("seed"), 1234, int),
                  "extra_body": None},
        concurrency=_number(args.get("num_concurrent"), 1, int), fingerprint=fingerprint,
        created=_created(results, located), kveval_version="",
    )
