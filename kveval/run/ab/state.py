"""What an `ab` folder holds: `DIR/ab.json`, the arguments the experiment was made with (and
whether its servers teacher-force), and how far each run file got.

A second call with the same arguments resumes; with other arguments it is refused, naming
each difference, before anything starts. The gate's options may change (they judge, they
make nothing), and `--noise-runs` may grow (one more restart of the baseline's setup).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kveval import __version__
from kveval.errors import RunFileError, UsageError
from kveval.run.ab.options import AbOptions

FLAGS = {"serve": "--serve", "baseline": "--baseline", "candidate": "--candidate",
         "baseline_env": "--baseline-env", "candidate_env": "--candidate-env",
         "suite": "--suite", "suite_sha256": "the suite's content", "data": "--data",
         "teacher_force": "--teacher-force", "speed": "--speed",
         "concurrency": "--concurrency", "model": "--model", "noise_runs": "--noise-runs"}


@dataclass(frozen=True)
class State:
    arguments: dict[str, Any]
    forcing: bool | None = None  # None: not decided yet (auto, before the first start)

    def to_json(self) -> dict[str, Any]:
        return {"kveval_version": __version__, "arguments": self.arguments,
                "forcing": self.forcing}


def _sha256(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def arguments(opts: AbOptions) -> dict[str, Any]:
    """The arguments as ab.json records them (secrets masked on the way out)."""
    from kveval.sink import json_text

    found = {
        "serve": list(opts.serve), "baseline": list(opts.baseline.args),
        "candidate": list(opts.candidate.args), "baseline_env": dict(opts.baseline.env),
        "candidate_env": dict(opts.candidate.env),
        "suite": str(Path(opts.suite).resolve()), "suite_sha256": _sha256(opts.suite),
        "data": str(Path(opts.data).resolve()) if opts.data else None,
        "teacher_force": opts.teacher_force, "speed": opts.speed,
        "concurrency": opts.concurrency, "model": opts.model, "noise_runs": opts.noise_runs,
    }
    masked: dict[str, Any] = json.loads(json_text(json.dumps(found)))
    return masked


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return repr(shlex.join(value))
    if isinstance(value, dict):
        return repr(" ".join(f"{k}={v}" for k, v in value.items()))
    return repr(value)


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    found = []
    for key, flag in FLAGS.items():
        if key == "noise_runs" and int(new.get(key, 0)) >= int(old.get(key, 0)):
            continue  # more restarts of the baseline's setup: one more noise run
        if old.get(key) != new.get(key):
            found.append(f"{flag} {_shown(new.get(key))} (on file: {_shown(old.get(key))})")
    return found


def read_state(path: Path) -> State | None:
    from kveval.formats.limits import loads, read_whole

    if not path.exists():
        return None
    data = loads(read_whole(path, 1 << 20), str(path))
    if not isinstance(data, dict) or not isinstance(data.get("arguments"), dict):
        raise RunFileError(f"{path}: not the record of a kveval ab experiment")
    forcing = data.get("forcing")
    return State(data["arguments"], forcing if isinstance(forcing, bool) else None)


def write_state(path: Path, state: State) -> None:
    from kveval.atomic import write_bytes
    from kveval.sink import json_text

    try:
        write_bytes(path, json_text(json.dumps(state.to_json(), indent=2) + "\n").encode())
    except OSError as exc:
        raise RunFileError(f"{path}: cannot write ({exc.strerror or exc})") from None


def resumed(path: Path, opts: AbOptions) -> State:
    """The experiment DIR holds, checked against these arguments; a new one where none."""
    new = arguments(opts)
    old = read_state(path)
    if old is None:
        return State(new)
    changed = differences(old.arguments, new)
    if changed:
        raise UsageError(f"{path.parent}: holds an experiment made with other arguments: "
                         f"{'; '.join(changed)}; give another -o DIR, or remove this one")
    return State(new, old.forcing)


@dataclass(frozen=True)
class Progress:
    """How far a run file got against the items its header planned."""

    path: Path
    planned: int | None  # None: no file (or a header that does not say)
    answered: int = 0
    errors: int = 0

    @property
    def finished(self) -> bool:
        return self.planned is not None and self.answered >= self.planned and not self.errors

    def words(self) -> str:
        if not self.path.exists():
            return "new"
        if self.finished:
            return f"finished ({self.answered} items): kept"
        also = f", {self.errors} errors" if self.errors else ""
        return f"cut ({self.answered} of {self.planned or '?'} items answered{also}): continued"


def progress(path: Path) -> Progress:
    from kveval.formats.reader import read_run

    if not path.exists():
        return Progress(path, None)
    run = read_run(path, judging=True)
    counts = [c for t in run.header.tasks if type(c := t.get("items")) is int]
    planned = sum(counts) if len(counts) == len(run.header.tasks) else None
    answered = len({item.key for item in run.items if item.ok})
    return Progress(path, planned, answered, sum(1 for i in run.items if not i.ok))
