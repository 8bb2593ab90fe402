"""Reading an install's stamped output (bench/install_timing.py): pip's phases, compiles by target.

pip's log file stamps every line, its build backends' output included; `make`'s commands are
stamped by install_timing's shell. A compile is read from CMake's progress lines, which name
each object (`CMakeFiles/TARGET.dir/...`) and each library or program linked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

PIP_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{3}) (.*)$")
PROGRESS = re.compile(r"\[\s*(\d+)(/\d+|%)\]\s+(?:Building \w+ object|Linking \w+ [a-z ]+) (\S+)")
OBJECT_TARGET = re.compile(r"CMakeFiles/([^/]+)\.dir/")
LIBRARY_NAME = re.compile(r"^(?:lib)?(.+?)(?:\.so[.\d]*|\.a)?$")
DOWNLOAD = re.compile(r"Downloading \S+?(?:\.whl|\.tar\.gz|\.zip) \(([\d.]+) (kB|MB|GB)\)")
BUILDING = re.compile(r"Building (?:wheel|editable) for (\S+) \(pyproject\.toml\): started")
BUILT = re.compile(r"Building (?:wheel|editable) for (\S+) \(pyproject\.toml\): finished")
UNITS = {"kB": 1e-3, "MB": 1.0, "GB": 1e3}


@dataclass(frozen=True)
class Line:
    t: float
    text: str


@dataclass(frozen=True)
class Step:
    command: str
    start: float
    end: float
    rc: int
    cpu: float
    lines: list[Line]


def read_pip_log(path: Path) -> list[Line]:
    if not path.is_file():
        return []
    lines = []
    for raw in path.read_text(errors="replace").splitlines():
        match = PIP_STAMP.match(raw)
        if match:
            stamp = datetime.strptime(match[1], "%Y-%m-%dT%H:%M:%S,%f").timestamp()
            lines.append(Line(stamp, match[2]))
    return lines


def _first(lines: list[Line], needle: str) -> float | None:
    return next((x.t for x in lines if needle in x.text), None)


def _outside_build_envs(lines: list[Line]) -> list[Line]:
    """The lines of pip's own run: a build backend's dependencies are installed by another
    pip, whose lines (collecting, installing) go to the same log."""
    kept, inside = [], False
    for x in lines:
        if "Installing build dependencies: started" in x.text:
            inside = True
        elif "Installing build dependencies: finished" in x.text:
            inside = False
        elif not inside:
            kept.append(x)
    return kept


def pip_phases(lines: list[Line], step: Step) -> list[tuple[str, float, float]]:
    """(label, start, end) of resolution and downloads, each wheel built, the install."""
    lines = _outside_build_envs(lines)
    installing = _first(lines, "Installing collected packages")
    building = _first(lines, "Building wheels for collected packages")
    if installing is None and building is None:
        return []
    sizes = [float(m[1]) * UNITS[m[2]] for x in lines if (m := DOWNLOAD.search(x.text))]
    phases = [(f"resolution and downloads ({len(sizes)} files, {sum(sizes):.0f} MB)",
               step.start, min(t for t in (installing, building) if t is not None))]
    for x in lines:
        built = BUILDING.search(x.text)
        if built:
            done = next((y.t for y in lines if y.t >= x.t and (b := BUILT.search(y.text))
                         and b[1] == built[1]), step.end)
            phases.append((f"wheel: {built[1]}", x.t, done))
    if installing is not None:
        finished = _first([x for x in lines if x.t >= installing], "Successfully installed")
        phases.append(("install (unpack, byte-compile)", installing, finished or step.end))
    return phases


def _target(path: str) -> str:
    found = OBJECT_TARGET.search(path)
    if found:
        return found[1]
    match = LIBRARY_NAME.match(path.rsplit("/", 1)[-1])
    return match[1] if match else path


def compile_split(lines: list[Line], start: float) -> list[tuple[str, float, int, float, float]]:
    """(target, wall seconds, jobs, first, last) in the order targets first show, after the
    wall from `start` to the first job (a build backend's configure), where there is one."""
    lines = [Line(start, ""), *lines]
    rows: dict[str, list[float]] = {}
    progress = [(i, m) for i, x in enumerate(lines) if (m := PROGRESS.search(x.text))]
    if not progress:
        return []
    ends_print = progress[0][1][2].startswith("/")  # ninja: a line as a job ends
    for k, (i, match) in enumerate(progress):
        if ends_print:
            begun = lines[progress[k - 1][0]].t if k else lines[i - 1].t
            span = (begun, lines[i].t)
        else:
            after = progress[k + 1][0] if k + 1 < len(progress) else min(i + 1, len(lines) - 1)
            span = (lines[i].t, lines[after].t)
        row = rows.setdefault(_target(match[3]), [0.0, 0, span[0], span[1]])
        row[0] += span[1] - span[0]
        row[1] += 1
        row[3] = span[1]
    first = progress[0][0]
    configured = lines[first - 1].t if ends_print else lines[first].t
    head = [("configure (before the first job)", configured - start, 0, start, configured)]
    return [h for h in head if h[1] >= 1.0] + [(name, r[0], int(r[1]), r[2], r[3])
                                               for name, r in rows.items()]
