"""What an `ab` folder holds: `DIR/ab.json`, the arguments the experiment was made with (and
whether its servers teacher-force), and how far each run file got.

A second call with the same arguments resumes; with other arguments it is refused, naming
each difference, before anything starts. The gate's options may change (they judge, they
make nothing), `--noise-runs` may grow (one more restart of the baseline's setup), and
candidates may be added (each its own start; one whose setup changed is refused). A folder
whose ab.json does not parse, or that holds run files but no ab.json, is one line and exit 2:
never taken as an experiment's.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kveval import __version__
from kveval.errors import RunFileError, UsageError
from kveval.run.ab.env import recorded_argv, shown
from kveval.run.ab.options import CANDIDATE, AbOptions
from kveval.run.ab.side import Side

MAX_NOISE_RUNS, MAX_CONCURRENCY = 20, 4096  # the most --noise-runs and --concurrency take
FLAGS = {"serve": "--serve", "baseline": "--baseline", "baseline_env": "--baseline-env",
         "suite": "--suite", "suite_sha256": "the suite's content", "data": "--data",
         "teacher_force": "--teacher-force", "speed": "--speed",
         "concurrency": "--concurrency", "model": "--model", "noise_runs": "--noise-runs"}


@dataclass(frozen=True)
class State:
    arguments: dict[str, Any]
    forcing: bool | None = None  # None: not decided yet (auto, before the first start)
    salt: str = ""  # the experiment's own: its secrets' fingerprints (run/ab/env.py)
    sizing: dict[str, Any] | None = None  # --detect: the size the pool grew to

    def to_json(self) -> dict[str, Any]:
        return {"kveval_version": __version__, "arguments": self.arguments,
                "forcing": self.forcing, "salt": self.salt, "sizing": self.sizing}


def _sha256(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def recorded_env(opts: AbOptions, side: Side) -> dict[str, str]:
    """A side's environment as records hold it: settings in clear, secrets fingerprinted."""
    return {k: shown(k, v, opts.salt, opts.names) for k, v in side.env}


def recorded_serve(opts: AbOptions) -> list[str]:
    return recorded_argv(opts.serve, opts.salt, opts.names)


def recorded_command(opts: AbOptions, side: Side) -> list[str]:
    """The whole command as records hold it (a flag of --serve whose value is the side's
    first word is read as one command reads it)."""
    return recorded_argv(opts.command(side), opts.salt, opts.names)


def recorded_args(opts: AbOptions, side: Side) -> list[str]:
    return recorded_command(opts, side)[len(opts.serve):]


def setup_of(opts: AbOptions, side: Side) -> dict[str, str]:
    """The setup every run header of this side records (`{port}` and `{slot}` kept, secrets
    fingerprinted), masked as a header is written: a restart of the same setup continues a
    cut run, and the setup on file is compared with this same form."""
    from kveval.masking import masked

    setup = {"server_command": shlex.join(recorded_command(opts, side))}
    if side.args:
        setup["server_args"] = shlex.join(recorded_args(opts, side))
    if side.env:
        setup["server_env"] = " ".join(f"{k}={v}" for k, v in recorded_env(opts, side).items())
    found: dict[str, str] = masked(setup)
    return found


def check_ours(opts: AbOptions, starts: Sequence[Any]) -> None:
    """Every run file already in DIR is this experiment's: its header's setup is the one its
    start records; a file another command or setup made is one line, never taken as done."""
    from kveval.formats.reader import parse_header

    for start in starts:
        expected = setup_of(opts, start.side)
        for step in start.runs:
            if not step.path.exists():
                continue
            with step.path.open("rb") as fh:
                header = parse_header(fh.readline(), step.path)
            found = {k: v for k, v in header.setup.items() if k in expected or
                     k.startswith("server_")}
            if found != expected:
                said = " ".join(f"{k}={v}" for k, v in found.items()) or "none"
                raise UsageError(f"{step.path}: not a run of this experiment's {start.label} "
                                 f"(its setup: {said}); give another -o DIR, or remove it")


def _candidate(opts: AbOptions, side: Side) -> dict[str, Any]:
    return {"args": recorded_args(opts, side), "env": recorded_env(opts, side)}


def arguments(opts: AbOptions) -> dict[str, Any]:
    """The arguments as ab.json records them (secrets fingerprinted, and masked as they are
    written: the form on file, compared with the one on file when the experiment resumes)."""
    from kveval.sink import json_text

    found = {
        "serve": recorded_serve(opts), "baseline": recorded_args(opts, opts.baseline),
        "baseline_env": recorded_env(opts, opts.baseline),
        "candidates": {s.name: _candidate(opts, s) for s in opts.candidates},
        "suite": str(Path(opts.suite).resolve()), "suite_sha256": _sha256(opts.suite),
        "data": str(Path(opts.data).resolve()) if opts.data else None,
        "teacher_force": opts.teacher_force, "speed": opts.speed,
        "concurrency": opts.concurrency, "model": opts.model, "noise_runs": opts.noise_runs,
    }
    masked: dict[str, Any] = json.loads(json_text(found))
    return masked


def _shown(value: Any) -> str:
    if isinstance(value, list) and all(isinstance(word, str) for word in value):
        return repr(shlex.join(value))
    if isinstance(value, dict):
        return repr(" ".join(f"{k}={v}" for k, v in value.items()))
    return repr(value)


def _candidates(old: dict[str, Any]) -> dict[str, Any]:
    """An ab.json's candidates; one made before candidates had names holds one."""
    found = old.get("candidates")
    if isinstance(found, dict):
        return found
    if "candidate" in old:
        return {"candidate": {"args": old.get("candidate"), "env": old.get("candidate_env")}}
    return {}


def _setup_words(setup: Any) -> str:
    """A candidate's arguments, and its environment where it has one."""
    if not isinstance(setup, dict):
        return repr(setup)
    args, env = setup.get("args"), setup.get("env")
    words = _shown(args if isinstance(args, list) else [])
    return words + (f" with env {_shown(env)}" if isinstance(env, dict) and env else "")


def whole(value: Any, low: int, high: int) -> int | None:
    """A whole number on file from `low` to `high` (never a boolean), else None."""
    return value if type(value) is int and low <= value <= high else None


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    found = []
    for key, flag in FLAGS.items():
        runs = whole(old.get(key, 0), 0, MAX_NOISE_RUNS)
        if key == "noise_runs" and runs is not None and new[key] >= runs:
            continue  # more restarts of the baseline's setup: one more noise run
        if old.get(key) != new.get(key):
            found.append(f"{flag} {_shown(new.get(key))} (on file: {_shown(old.get(key))})")
    before = _candidates(old)
    for name, setup in new["candidates"].items():
        if name in before and before[name] != setup:
            flag = "--candidate " + ("" if name == CANDIDATE else f"{name}=")
            found.append(f"{flag}{_setup_words(setup)} (on file: "
                         f"{_setup_words(before[name])})")
    return found


def read_state(path: Path) -> State | None:
    from kveval.formats.limits import loads, read_whole

    if not path.exists():
        return None
    text = read_whole(path, 1 << 20)
    try:
        data = loads(text, str(path))
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("arguments"), dict):
        raise RunFileError(f"{path}: not the record of a kveval ab experiment; give another "
                           "-o DIR, or remove this one")
    forcing, salt, sizing = data.get("forcing"), data.get("salt"), data.get("sizing")
    return State(data["arguments"], forcing if isinstance(forcing, bool) else None,
                 salt if isinstance(salt, str) else "",
                 sizing if isinstance(sizing, dict) else None)


def write_state(path: Path, state: State) -> None:
    from kveval.atomic import write_bytes
    from kveval.sink import json_text

    try:
        write_bytes(path, (json_text(state.to_json(), indent=2, ensure_ascii=True) + "\n").encode())
    except OSError as exc:
        raise RunFileError(f"{path}: cannot write ({exc.strerror or exc})") from None


def _unclaimed(folder: Path) -> None:
    """A folder with run files and no ab.json is not an experiment to resume."""
    found = sorted(p.name for p in folder.glob("*.jsonl")) if folder.is_dir() else []
    if found:
        raise UsageError(f"{folder}: holds run files ({', '.join(found[:3])}) but no ab.json: "
                         "not a kveval ab experiment to resume; give another -o DIR, or "
                         "remove them")


def resumed(path: Path, opts: AbOptions) -> tuple[State, AbOptions]:
    """The experiment DIR holds, checked against these arguments; a new one where none. The
    options come back with the experiment's salt."""
    old = read_state(path)
    if old is None:
        _unclaimed(path.parent)
        opts = replace(opts, salt=secrets.token_hex(8))
        return State(arguments(opts), salt=opts.salt), opts
    opts = replace(opts, salt=old.salt)
    if opts.concurrency is None:  # none given: the experiment's own, as a resumed run's
        on_file = whole(old.arguments.get("concurrency"), 1, MAX_CONCURRENCY)
        opts = replace(opts, concurrency=on_file)
    new = arguments(opts)
    changed = differences(old.arguments, new)
    if changed:
        raise UsageError(f"{path.parent}: holds an experiment made with other arguments: "
                         f"{'; '.join(changed)}; give another -o DIR, or remove this one")
    merged = {**_candidates(old.arguments), **new["candidates"]}  # every candidate ever run
    return State({**new, "candidates": merged}, old.forcing, old.salt, old.sizing), opts


def record_sizing(path: Path, sizing: dict[str, Any]) -> None:
    """The size `--detect` reached, kept beside the rest of the record."""
    state = read_state(path)
    assert state is not None  # the experiment's record is made before any pass
    write_state(path, replace(state, sizing=sizing))
