"""The options of one `kveval run`, checked before anything is read or sent."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kveval.errors import UsageError
from kveval.run.client import check_extra_body
from kveval.run.tasks import FEWSHOT_KEYS

NAME = re.compile(r"[A-Za-z0-9._-]+")  # a label or a --setup key: a name, never a path


@dataclass(frozen=True)
class RunOptions:
    endpoint: str | None
    model: str | None
    task_names: tuple[str, ...]
    suite: str | None
    limit: int | None
    label: str
    output: Path
    concurrency: int | None  # None: 32, or the server's slots where fewer (session.py)
    api: str | None
    max_tokens: int | None
    seed: int | None
    extra_body: dict[str, Any] | None
    timeout: float | None  # None: the suite's `timeout`, else 600
    retries: int
    resume: bool
    overwrite: bool
    data: str | None
    prompts_file: str | None
    params: dict[str, Any] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)  # model_path, kv_cache_type, ctx
    fewshot: dict[str, Any] = field(default_factory=dict)  # gsm8k: fewshot, shots, fewshot_seed
    setup: dict[str, str] = field(default_factory=dict)  # --setup KEY=VALUE: what the user states
    logprobs: int | None = None  # --logprobs K; None: each task's own (suite key), else off
    teacher_force: str | None = None  # --teacher-force BASELINE.jsonl
    order: str = "data"  # --order: data or shuffle
    specs: tuple[Any, ...] = ()  # the tasks as a resumed run's header recorded them (replay)
    like: str | None = None  # --like RUN.jsonl: a new run with that run's settings
    # what the header records as the endpoint where not the URL itself: `kveval ab`'s
    # http://127.0.0.1:{port}/v1, whose port changes at every start of the same setup
    endpoint_label: str | None = None

    @classmethod
    def from_cli(cls, o: dict[str, Any]) -> RunOptions:
        _check_flags(o)
        engine = {k: o[k] for k in ("model_path", "kv_cache_type", "ctx") if o[k] is not None}
        label = run_label(o["label"], o["output"])
        return cls(
            endpoint=o["endpoint"], model=o["model"], task_names=tuple(o["task_names"]),
            suite=o["suite"], limit=o["limit"], label=label,
            output=Path(o["output"] or f"results/{label}.jsonl"),
            concurrency=o["concurrency"], api=o["api"], max_tokens=o["max_tokens"],
            seed=o["seed"], extra_body=parse_extra_body(o["extra_body"]), timeout=o["timeout"],
            retries=o["retries"], resume=o["resume"], overwrite=o["overwrite"], data=o["data"],
            prompts_file=o["prompts_file"], params=_grid_params(o), engine=engine,
            setup=parse_setup(o.get("setup") or ()), order=o.get("order") or "data",
            fewshot={k: o[k] for k in FEWSHOT_KEYS if o.get(k) is not None},
            logprobs=o.get("logprobs"), teacher_force=o.get("teacher_force"),
            like=o.get("like"),
        )


def _check_flags(o: dict[str, Any]) -> None:
    _check_teacher_force(o)
    if o.get("like") and (o["task_names"] or o["suite"] or o.get("teacher_force")):
        raise UsageError("--like takes the tasks from its run file; drop --task and --suite")
    if not o["task_names"] and not o["suite"] and not o.get("teacher_force") \
            and not o["resume"] and not o.get("like"):
        raise UsageError("name what to run: --task NAME (repeatable) or --suite FILE.toml "
                         "(or --resume -o FILE to continue a run as it was made)")
    if o["resume"] and o["overwrite"]:
        raise UsageError("--resume and --overwrite exclude each other")
    engine = [k for k in ("model_path", "kv_cache_type", "ctx") if o[k] is not None]
    if engine and o["endpoint"]:
        flags = ", ".join("--" + k.replace("_", "-") for k in engine)
        raise UsageError(f"{flags} only apply to the embedded engine; drop them or --endpoint")
    if o["endpoint"]:
        from kveval.run.endpoint import check_url

        check_url(o["endpoint"])


def _check_teacher_force(o: dict[str, Any]) -> None:
    if not o.get("teacher_force"):
        return
    if o["task_names"] or o["suite"]:
        raise UsageError("--teacher-force takes its items from the baseline run; drop --task "
                         "and --suite")
    if o.get("logprobs") == 0:
        raise UsageError("--teacher-force records log-probabilities: --logprobs must be at "
                         "least 1")


def run_label(label: str | None, output: str | None) -> str:
    """--label must be a name; without it, the output file's name made into one."""
    if label is not None:
        if not NAME.fullmatch(label):
            raise UsageError(f"--label {label!r}: a label is a name of letters, digits, '.', "
                             "'_' and '-'; say where the file goes with -o")
        return label
    if output:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", Path(output).stem) or "run"
    return "run"


def parse_extra_body(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--extra-body is not valid JSON ({exc.msg} at column "
                         f"{exc.colno})") from None
    if not isinstance(value, dict):
        raise UsageError("--extra-body must be a JSON object, e.g. '{\"top_k\": 1}'")
    check_extra_body(value, "--extra-body")
    return value


def parse_setup(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """--setup kv_cache=q8_0 --setup attention=fa3 -> {"kv_cache": "q8_0", "attention": "fa3"}"""
    setup: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not NAME.fullmatch(key.strip()) or not value.strip():
            raise UsageError(f"--setup {pair!r}: expected KEY=VALUE, e.g. --setup kv_cache=q8_0")
        setup[key.strip()] = value.strip()
    return setup


def _grid_params(o: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if o["lengths"]:
        from kveval.adapters.needle import parse_lengths

        params["lengths"] = parse_lengths(o["lengths"])
    if o["depths"]:
        params["depths"] = _parse_depths(o["depths"])
    if o["trials"]:
        params["trials"] = o["trials"]
    if o.get("copy_lengths"):
        from kveval.adapters.haystack import parse_lengths

        params["copy_lengths"] = parse_lengths(o["copy_lengths"])
    return params


def _parse_depths(text: str) -> list[int]:
    try:
        depths = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--depths {text!r}: expected percents such as 0,25,50,75,100") from None
    if not depths or any(d < 0 or d > 100 for d in depths):
        raise UsageError(f"--depths {text!r}: each depth is a percent from 0 to 100")
    return depths
