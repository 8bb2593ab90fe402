"""What a run's options resolve to before anything is sent: the tasks (the suite's, the named
ones, the options applied) and each task's data with its source for the header."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kveval.adapters import ADAPTERS
from kveval.adapters.base import TaskSpec
from kveval.errors import DataError, UsageError
from kveval.formats.limits import check_input
from kveval.run.options import RunOptions
from kveval.run.tasks import (
    Suite,
    builtin_spec,
    override,
    read_suite,
    resolve_builtin_data,
    resolve_fewshot,
)

# sized in server tokens
LONG_CONTEXT = frozenset({"needle", "needle-multikey", "evidence", "copy", "mrcr"})


@dataclass(frozen=True)
class Resolved:
    """The resolved tasks and the run-wide settings: the suite's, then the options'."""

    specs: list[TaskSpec]
    setup: dict[str, str]
    extra_body: dict[str, Any] | None
    timeout: float | None = None  # the suite's per-request timeout


def resolve(opts: RunOptions) -> Resolved:
    suite = read_suite(opts.suite) if opts.suite else Suite([])
    specs = list(opts.specs) + list(suite.specs)
    specs += [builtin_spec(name) for name in opts.task_names if name not in {s.name for s in specs}]
    if opts.fewshot and not any(spec.adapter == "gsm8k" for spec in specs):
        raise UsageError("--fewshot, --shots and --fewshot-seed apply to the gsm8k task only")
    resolved = [resolve_fewshot(resolve_builtin_data(_apply_options(spec, opts)))
                for spec in specs]
    for spec in resolved:
        if spec.temperature != 0:
            raise UsageError(f"task {spec.name!r}: temperature {spec.temperature}: kveval runs "
                             "at temperature 0 only")
        if spec.adapter not in ADAPTERS:
            raise UsageError(f"task {spec.name!r}: no adapter {spec.adapter!r}")
    extra = {**suite.extra_body, **(opts.extra_body or {})}
    return Resolved(resolved, {**suite.setup, **opts.setup}, extra or None, suite.timeout)


def _apply_options(spec: TaskSpec, opts: RunOptions) -> TaskSpec:
    data = None
    if spec.adapter == "gsm8k" and opts.data:
        data = opts.data
    if spec.adapter == "prompts" and opts.prompts_file:
        data = opts.prompts_file
    params = {k: v for k, v in opts.params.items() if k != "copy_lengths" or spec.adapter == "copy"}
    params = params if spec.adapter in LONG_CONTEXT or spec.adapter == "context" else {}
    if spec.adapter == "gsm8k":
        params = opts.fewshot
    if opts.logprobs is not None:
        params = {**params, "logprobs": opts.logprobs}
    return override(spec, limit=opts.limit, api=opts.api, max_tokens=opts.max_tokens, data=data,
                    params=params)


def load_task_data(spec: TaskSpec) -> tuple[Any, str | None]:
    """The adapter's data and its source (path or dataset revision), for the header."""
    from kveval.run import data

    if spec.adapter == "gsm8k":
        gsm8k = data.load_gsm8k(spec.data)
        return gsm8k, gsm8k.source
    if spec.adapter == "prompts":
        if not spec.data:
            raise UsageError("the prompts task needs a prompt file: --prompts FILE")
        check_input(Path(spec.data).expanduser(), error=DataError)  # a FIFO would block
        prompts = data.load_prompts(spec.data)
        return prompts, prompts.source
    if spec.adapter == "context":
        from kveval.run.documents import load_documents

        documents = load_documents(spec.data)
        return documents, documents.source
    return None, None
