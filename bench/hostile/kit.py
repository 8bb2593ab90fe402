"""The harness of bench/hostile/inputs.py: run one kveval command of a given code tree in a
subprocess (a timeout, a memory or file-size ulimit), and say in one short cell what came of
it, judged by the standard every bad input is held to.

The standard: one clear line on stderr, exit 2 for any failure to read or judge, exit 1 only
from a gate (or report) that printed REGRESSION, no traceback, no hang, no secret in any
form in stdout, stderr or a written file, nothing on file lost.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # tests/ holds the fake and hostile servers

PROGRESS = re.compile(r"\d+%\|")  # a tqdm bar on stderr
EXCEPTION = re.compile(r"^(\w+(?:\.\w+)*(?:Error|Exception|Interrupt|Exit))\b")
FOLDERS = re.compile(r"(?<![\w:/.])(?:[\w.-]+/){2,}(?=[\w.-])")  # a relative path's folders
TIMEOUT_SCALE = [1.0]  # raised when a case is run again on a loaded machine


@dataclass(frozen=True)
class Result:
    """What one command did: its exit code (None: killed at the timeout), its output, and
    for a killed one how much CPU it had used and where the kernel had it waiting."""

    code: int | None
    out: str
    err: str
    seconds: float
    cpu_s: float = 0.0
    waiting_in: str = ""


@dataclass(frozen=True)
class Outcome:
    ok: bool
    text: str
    busy_timeout: bool = False  # killed while computing: load may be the cause


def command(tree: Path, args: Iterable[str], ulimits: str) -> list[str]:
    """`python -m kveval.cli ARGS` under bash's `ulimit` options, exec'ed (one pid)."""
    script = f"ulimit {ulimits} && exec \"$@\"" if ulimits else 'exec "$@"'
    return ["bash", "-c", script, "kveval", sys.executable, "-m", "kveval.cli", *args]


def environment(tree: Path, extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KVEVAL_", "OPENAI_"))}
    env.update({"PYTHONPATH": str(tree), **(extra or {})})
    return env


def start(tree: Path, folder: Path, args: Iterable[str], env: Mapping[str, str] | None = None,
          ulimits: str = "") -> subprocess.Popen[str]:
    return subprocess.Popen(command(tree, args, ulimits), cwd=folder, text=True,
                            env=environment(tree, env), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, errors="replace")


def cpu_and_wait(pid: int) -> tuple[float, str]:
    """CPU seconds used so far and the kernel function the process sleeps in."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
    except OSError:
        return 0.0, ""
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks, "" if wchan == "0" else wchan


def finish(proc: subprocess.Popen[str], timeout: float, started: float) -> Result:
    """Wait for the process; at the timeout note what it was doing, then kill its group."""
    try:
        out, err = proc.communicate(timeout=timeout * TIMEOUT_SCALE[0])
        return Result(proc.returncode, out, err, time.monotonic() - started)
    except subprocess.TimeoutExpired:
        cpu, wchan = cpu_and_wait(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return Result(None, out, err, time.monotonic() - started, cpu, wchan)


def kveval(tree: Path, folder: Path, *args: str, timeout: float = 20.0,
           env: Mapping[str, str] | None = None, ulimits: str = "") -> Result:
    """The command run in `folder`; its output speaks of the folder's files by their names."""
    started = time.monotonic()
    r = finish(start(tree, folder, args, env, ulimits), timeout, started)
    here = f"{folder}/"
    return replace(r, out=r.out.replace(here, ""), err=r.err.replace(here, ""))


# ---------------------------------------------------------------- reading an outcome


def traceback_name(err: str) -> str | None:
    """The exception a traceback on stderr ends with."""
    if "Traceback (most recent call last)" not in err:
        return None
    names = [m.group(1) for line in err.splitlines() if (m := EXCEPTION.match(line))]
    return names[-1] if names else "a"


def message_lines(err: str) -> list[str]:
    """stderr without progress bars and blank lines."""
    parts = err.replace("\r", "\n").split("\n")
    return [p.strip() for p in parts if p.strip() and not PROGRESS.search(p)]


def error_lines(err: str) -> list[str]:
    """The lines of stderr that report an error ("kveval: error: ..."), else all of them
    (a notice such as "kveval: wrote the page X" beside an error is not a second error)."""
    lines = message_lines(err)
    return [line for line in lines if line.startswith("kveval: error")] or lines


def short(text: str, width: int = 90) -> str:
    """One line for a cell: the "kveval: " prefix dropped, paths cut to their file names,
    control characters shown as "?", at most `width` characters."""
    clean = "".join(c if c.isprintable() else "?" for c in text.removeprefix("kveval: "))
    clean = FOLDERS.sub("", clean)
    return clean if len(clean) <= width else clean[: width - 1] + "…"


def killed(r: Result) -> str:
    how = f"waiting in {r.waiting_in}" if r.waiting_in and r.cpu_s < 2 else "busy"
    return f"killed after {r.seconds:.0f} s ({how}, {r.cpu_s:.1f} s CPU)"


def describe(r: Result) -> str:
    """A short cell: the exit code and the one line, a traceback, or a kill."""
    if r.code is None:
        return killed(r)
    crash = traceback_name(r.err)
    if crash:
        return f"exit {r.code}, {crash} traceback"
    lines, others = error_lines(r.err), len(message_lines(r.err))
    if not lines:
        return f"exit {r.code}, nothing on stderr"
    if len(lines) == 1:
        beside = f" (and {others - 1} notice line)" if others > 1 else ""
        return f"exit {r.code}, one line: {short(lines[0])}{beside}"
    return f"exit {r.code}, {len(lines)} lines, last: {short(lines[-1])}"


def fault(r: Result, codes: Iterable[int]) -> str | None:
    """Why a result falls short of the standard, before any case-specific check."""
    if r.code is None:
        return "hang"
    if traceback_name(r.err):
        return "traceback"
    if r.code not in set(codes):
        return f"exit {r.code}"
    if r.code == 2 and len(error_lines(r.err)) != 1:
        return "not one line"
    return None


def unsaid_regression(r: Result) -> str | None:
    """A verdict command's exit 1 means REGRESSION, said on stdout."""
    return "exit 1 without REGRESSION" if r.code == 1 and "REGRESSION" not in r.out else None


def judged(r: Result, codes: Iterable[int] = (2,), *problems: str | None,
           note: str = "") -> Outcome:
    """The cell of one command: the standard's verdict, then what the case found wrong."""
    found = [p for p in (fault(r, codes), *problems) if p]
    extra = [p for p in problems if p] + ([note] if note else [])
    text = "; ".join([describe(r), *extra])
    busy = r.code is None and not (r.waiting_in and r.cpu_s < 2)
    return Outcome(not found, text, busy)


def first_failing(outcomes: Iterable[tuple[str, Outcome]]) -> Outcome:
    """Several commands of one case: the first that fails the standard, else the last."""
    listed = list(outcomes)
    for name, outcome in listed:
        if not outcome.ok:
            return Outcome(False, f"{name}: {outcome.text}", outcome.busy_timeout)
    name, outcome = listed[-1]
    return Outcome(True, f"{name}: {outcome.text}" if len(listed) > 1 else outcome.text)


# ---------------------------------------------------------------- secrets


def leaks(forms: Mapping[str, str], places: Mapping[str, str]) -> str | None:
    """'base64 Basic in the run file, ...' for every secret form found in every place."""
    found = [f"{name} in {where}" for where, text in places.items()
             for name, value in forms.items() if value in text]
    return "leaks " + ", ".join(found) if found else None


def read(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""


# ---------------------------------------------------------------- run files


def header(label: str = "x", tasks: list[dict[str, Any]] | None = None,
           **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": "run", "schema_version": 1, "label": label, "endpoint": "http://h/v1",
        "model": "m", "tasks": tasks or [{"name": "gsm8k", "adapter": "gsm8k"}],
        "sampling": {"temperature": 0.0, "seed": 0}, "concurrency": 4, "fingerprint": {},
        "created": "2026-01-01T00:00:00+00:00", "kveval_version": "0.1.0"}
    return {**data, **changes}


def item(i: int, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": "item", "task": "gsm8k", "item_id": f"gsm8k/test/{i:04d}",
        "prompt_sha256": f"sha{i}", "request": {"prompt": f"Q{i}", "max_tokens": 8},
        "status": "ok", "output": f"#### {i}", "finish_reason": "stop",
        "usage": {"completion_tokens": 3}, "latency_s": 0.5, "extracted": str(i),
        "reference": str(i), "correct": True, "correct_strict": True, "meta": {"index": i}}
    return {**data, **changes}


def task(name: str, api: str = "completions", **extra: Any) -> dict[str, Any]:
    return {"name": name, "adapter": name, "api": api, "max_tokens": 32, "stop": [],
            "temperature": 0.0, "limit": None, "params": {}, **extra}


def prompt_item(i: int, output: str, **changes: Any) -> dict[str, Any]:
    return item(i, task="prompts", item_id=f"p{i}", output=output, extracted=None,
                reference=None, correct=None, correct_strict=None, **changes)


def write_run(path: Path, head: dict[str, Any], items: Iterable[dict[str, Any]]) -> str:
    with path.open("w") as f:
        for record in (head, *items):
            f.write(json.dumps(record) + "\n")
    return str(path)


def spliced(record: dict[str, Any], levels: int) -> str:
    """A JSON line whose "DEEP" placeholder is `levels` nested arrays (json.dumps cannot)."""
    return json.dumps(record).replace('"DEEP"', "[" * levels + "]" * levels)


def run_file_valid(path: Path) -> tuple[bool, int]:
    """Whether every line is JSON, and how many items the file holds."""
    try:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
    except (OSError, ValueError):
        return False, 0
    return True, sum(1 for r in rows if r.get("type") == "item")
