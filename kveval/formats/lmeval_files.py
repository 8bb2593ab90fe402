"""Finding and reading an lm-evaluation-harness run's files: its samples files and its results
file, from whichever of them (or the folder holding them) a user names."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kveval.errors import KvevalError, RunFileError
from kveval.formats import limits

SAMPLES_NAME = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d\d-\d\dT[0-9.\-]+)\.jsonl$")


RESULTS_NAME = re.compile(r"^results_(?P<date>\d{4}-\d\d-\d\dT[0-9.\-]+)\.json$")


@dataclass(frozen=True)
class Located:
    samples: tuple[tuple[str, Path], ...]  # (task, samples file)
    results: Path | None


def json_object(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """`data[key]` when it is a JSON object, {} when absent or null, else RunFileError."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RunFileError(f"{where}: `{key}` is {type(value).__name__}, expected an object; "
                           "not an lm-eval results file")
    return value


def locate(path: Path) -> Located:
    if not path.exists():
        raise RunFileError(f"{path}: no such file or folder")
    if path.is_dir():
        return _locate_folder(path)
    if RESULTS_NAME.match(path.name) or path.name == "results.json":
        return _from_results(path)
    return Located(((_task_of(path), path),), _results_beside(path))


def files_of(path: str | Path) -> list[Path]:
    """The files an lm-eval path stands for (its samples and results files); none where
    they cannot be found (reading the path then says why)."""
    try:
        located = locate(Path(path))
    except (KvevalError, OSError):
        return []
    return [p for _, p in located.samples] + ([located.results] if located.results else [])


def _locate_folder(folder: Path) -> Located:
    results = sorted(folder.rglob("results_*.json")) + sorted(folder.rglob("results.json"))
    if len(results) == 1:
        return _from_results(results[0])
    samples = sorted(folder.rglob("samples_*.jsonl"))
    if not results and len(samples) == 1:
        return locate(samples[0])
    found = results or samples
    if not found:
        raise RunFileError(f"{folder}: no lm-eval results_*.json or samples_*.jsonl inside")
    names = ", ".join(str(p.relative_to(folder)) for p in found[:4])
    raise RunFileError(f"{folder}: holds {len(found)} lm-eval runs ({names}); name one file")


def _from_results(results: Path) -> Located:
    match = RESULTS_NAME.match(results.name)
    if match:
        found = sorted(results.parent.glob(f"samples_*_{match['date']}.jsonl"))
        samples = tuple((_task_of(p), p) for p in found)
    else:  # 0.4.0-0.4.2: <model_args>_<task>.jsonl beside results.json
        tasks = list(json_object(read_json(results), "configs", str(results)))
        samples = tuple((t, p) for t in tasks
                        for p in sorted(results.parent.glob(f"*_{t}.jsonl")))
    if not samples:
        raise RunFileError(f"{results}: no samples file beside it; run lm-eval with "
                           "--log_samples")
    return Located(samples, results)


def _results_beside(samples: Path) -> Path | None:
    match = SAMPLES_NAME.match(samples.name)
    candidate = (samples.parent / f"results_{match['date']}.json" if match
                 else samples.parent / "results.json")
    return candidate if candidate.is_file() else None


def _task_of(samples: Path) -> str:
    match = SAMPLES_NAME.match(samples.name)
    if match:
        return match["task"]
    beside = samples.parent / "results.json"
    tasks = list(json_object(read_json(beside), "configs", str(beside))) if beside.is_file() else []
    named = [t for t in tasks if samples.stem.endswith(f"_{t}")]
    return max(named, key=len) if named else samples.stem.rsplit("_", 1)[-1]


def _read_text(path: Path) -> str:
    try:
        return limits.read_whole(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFileError(f"{path}: cannot read ({exc})") from None


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = limits.loads(_read_text(path), str(path))
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise RunFileError(f"{path}: not an lm-eval results file (expected a JSON object)")
    return data


def read_samples(path: Path) -> list[dict[str, Any]]:
    """JSON lines (0.4.3 on) or one pretty-printed JSON array (0.4.0-0.4.2)."""
    text = _read_text(path)
    if text.lstrip().startswith("["):
        try:
            rows = limits.loads(text, str(path))
        except json.JSONDecodeError as exc:
            raise RunFileError(f"{path}: not a JSON array ({exc.msg} at line "
                               f"{exc.lineno})") from None
    else:
        rows = _json_lines(text, path)
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise RunFileError(f"{path}: not an lm-eval samples file (expected JSON objects)")
    if not rows:
        raise RunFileError(f"{path}: holds no samples")
    return rows


def _json_lines(text: str, path: Path) -> list[Any]:
    rows = []
    for number, line in enumerate(text.split("\n"), start=1):  # not splitlines: U+2028 is data
        if not line.strip():
            continue
        try:
            rows.append(limits.loads(line, f"{path}:{number}"))
        except json.JSONDecodeError:
            raise RunFileError(f"{path}:{number}: line is not JSON") from None
    return rows
