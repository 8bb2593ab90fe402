"""Task and suite specs: built-in defaults (tasks/NAME.toml), a suite file, then options."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from kveval.adapters.base import TaskSpec
from kveval.errors import UsageError
from kveval.formats.limits import DEPTH_MESSAGE, MAX_SUITE_BYTES, read_whole, too_deep
from kveval.run.client import check_extra_body
from kveval.run.schema import check_suite, check_task_table, check_unique

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# GSM8K's few-shot keys (suite keys and options): how exemplars are chosen
FEWSHOT_KEYS = ("fewshot", "shots", "fewshot_seed")
_SPEC_FIELDS = {f.name for f in dataclasses.fields(TaskSpec)} - {"params"}
_PATH_PARAMS = ("data",)


def builtin_dir(kind: str) -> Path:
    """The folder of built-in task specs ("tasks") or prompt files ("prompts")."""
    return Path(str(resources.files("kveval") / "data" / kind))


def builtin_names() -> list[str]:
    return sorted(p.stem for p in builtin_dir("tasks").glob("*.toml") if p.stem != "rollout")


def _read_toml(path: Path) -> dict[str, Any]:
    """A regular file of at most MAX_SUITE_BYTES, nested at most MAX_DEPTH deep."""
    try:
        data = tomllib.loads(read_whole(path, MAX_SUITE_BYTES, UsageError).decode("utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: not a valid TOML file ({exc})") from None
    except RecursionError:
        raise UsageError(f"{path}: {DEPTH_MESSAGE}") from None
    if too_deep(data):
        raise UsageError(f"{path}: {DEPTH_MESSAGE}")
    return data


def _spec_from_table(table: dict[str, Any], base: TaskSpec | None, where: str) -> TaskSpec:
    check_task_table(table, where)
    fields = {k: v for k, v in table.items() if k in _SPEC_FIELDS}
    params = {k: v for k, v in table.items() if k not in _SPEC_FIELDS
              and k not in ("params", "label")}
    params.update(table.get("params", {}))
    if "stop" in fields:
        stop = fields["stop"]
        fields["stop"] = (stop,) if isinstance(stop, str) else tuple(stop)
    if "label" in table:
        fields["name"] = table["label"]
    merged = {**(base.params if base else {}), **params}
    try:
        if base is None:
            return TaskSpec(**fields, params=merged)
        return dataclasses.replace(base, **fields, params=merged)
    except TypeError as exc:
        raise UsageError(f"{where}: bad task spec ({exc})") from None


def builtin_spec(name: str) -> TaskSpec:
    path = builtin_dir("tasks") / f"{name}.toml"
    if not path.is_file():
        raise UsageError(f"unknown task {name!r}; known tasks: {', '.join(builtin_names())}")
    table = _read_toml(path)
    table.setdefault("name", name)
    table.setdefault("adapter", name)
    return _spec_from_table(table, None, str(path))


@dataclass(frozen=True)
class Suite:
    """A suite file: its tasks, the setup it states, the extra request keys it sends and
    the size of `kveval ab --speed`'s load."""

    specs: list[TaskSpec]
    setup: dict[str, str] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)
    speed: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None  # seconds for a whole request attempt (--timeout wins)


def load_suite(path_text: str) -> list[TaskSpec]:
    """A suite file's task specs."""
    return read_suite(path_text).specs


def read_suite(path_text: str) -> Suite:
    """A suite file: [[task]] tables, each a task name plus the settings it overrides, and
    the optional [setup], [extra_body] and [speed] tables and `timeout`."""
    path = Path(path_text).expanduser()
    shipped = builtin_dir("tasks") / path.name
    if not path.exists() and path.parent.name == "tasks" and shipped.is_file():
        path = shipped  # tasks/rollout.toml outside a checkout: the copy kveval ships
    data = _read_toml(path)
    check_suite(data, str(path))
    tables = data.get("task")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise UsageError(f"{path}: a suite needs at least one [[task]] table with a name")
    specs = [_suite_task(table, number, path) for number, table in enumerate(tables, start=1)]
    check_unique([spec.name for spec in specs], str(path))
    extra = data.get("extra_body", {})
    check_extra_body(extra, f"{path}: extra_body")
    timeout = data.get("timeout")
    return Suite(specs, dict(data.get("setup", {})), extra, dict(data.get("speed", {})),
                 None if timeout is None else float(timeout))


def _suite_task(table: dict[str, Any], number: int, path: Path) -> TaskSpec:
    where = f"{path}: [[task]] number {number}"
    if not isinstance(table.get("name"), str):
        raise UsageError(f"{where} has no name")
    base = builtin_spec(str(table.get("adapter", table["name"])))
    spec = _spec_from_table(table, dataclasses.replace(base, name=table["name"]), where)
    return _resolve_paths(spec, path.parent)


def _resolve_paths(spec: TaskSpec, suite_dir: Path) -> TaskSpec:
    """A suite's relative data path: as given if it exists, else beside the suite file."""
    if spec.data is None or Path(spec.data).expanduser().is_absolute():
        return spec
    for candidate in (Path(spec.data), suite_dir / spec.data, suite_dir.parent / spec.data):
        if candidate.exists():
            return dataclasses.replace(spec, data=str(candidate))
    return spec


def resolve_builtin_data(spec: TaskSpec) -> TaskSpec:
    """A built-in spec's `prompts/...` path falls back to the prompt files kveval ships."""
    if spec.data is None or Path(spec.data).exists():
        return spec
    shipped = builtin_dir("prompts") / Path(spec.data).name
    return dataclasses.replace(spec, data=str(shipped)) if shipped.exists() else spec


def override(spec: TaskSpec, **changes: Any) -> TaskSpec:
    """Command-line options win: None means "not given"; params merge key by key."""
    params = {**spec.params, **(changes.pop("params", None) or {})}
    given = {k: v for k, v in changes.items() if v is not None}
    if "stop" in given:
        given["stop"] = tuple(given["stop"])
    return dataclasses.replace(spec, **given, params=params)


def resolve_fewshot(spec: TaskSpec) -> TaskSpec:
    """Check GSM8K's few-shot keys; with `lm-eval` record the sampler's seed (default 1234)."""
    if spec.adapter != "gsm8k":
        return spec
    from kveval.adapters.gsm8k import FEWSHOT_MODES, LMEVAL_SEED

    p = spec.params
    mode = p.get("fewshot", "first")
    if mode not in FEWSHOT_MODES:
        raise UsageError(f"task {spec.name}: fewshot {mode!r}: expected first or lm-eval")
    if not isinstance(p.get("shots", 8), int) or p.get("shots", 8) < 0:
        raise UsageError(f"task {spec.name}: shots {p.get('shots')!r}: expected a count >= 0")
    if mode == "first" and "fewshot_seed" in p:
        raise UsageError(f"task {spec.name}: fewshot_seed (--fewshot-seed) applies only to "
                         "--fewshot lm-eval")
    if mode == "lm-eval" and "shot_seed" in p:
        raise UsageError(f"task {spec.name}: shot_seed samples one set of exemplars for "
                         "--fewshot first; lm-eval's sampler takes --fewshot-seed")
    if mode == "lm-eval" and not isinstance(p.get("fewshot_seed", LMEVAL_SEED), int):
        raise UsageError(f"task {spec.name}: fewshot_seed {p['fewshot_seed']!r}: expected an "
                         "integer")
    if mode == "lm-eval":
        return dataclasses.replace(spec, params={"fewshot_seed": LMEVAL_SEED, **p})
    return spec
