"""Where a fresh install's time goes: each command `make` runs, pip's phases, each target compiled.

    python bench/install_timing.py [--ref HEAD] [--clone DIR] [--targets install-local llama-server]

Clones the repository at `--ref` into a fresh folder, with an empty pip cache of its own
(nothing from ~/.cache/pip) and no compiler cache, and runs `make TARGETS` there with make's
SHELL set to a wrapper that stamps every command the Makefile runs: its wall and CPU seconds
(itself and every process it waited for) and each line it prints, as the line arrives. pip's
own log (PIP_LOG) splits each pip command into resolution and downloads, the wheels it builds
and the install; a compile, whether pip's build backend or `cmake --build` ran it, is split
by target from its progress lines (ninja prints a line as a job ends, make as one starts; the
wall between two lines goes to the job the line names). The 1-minute load average, sampled
every 2 s, is printed beside every figure: the build's own jobs count in it (about 2 on 2
cores), the rest is other work on the machine.

Any revision's Makefile can be measured so (`--ref main` gives the one it replaces), which is
how the designs in the README were compared. The installed clone is left for inspection.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from install_phases import Line, Step, compile_split, pip_phases, read_pip_log  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_S = 2.0


# --- the shell make runs each command in ----------------------------------------------------

def as_shell(record_dir: Path, argv: list[str]) -> int:
    """Run one recipe line as /bin/sh would, recording its times and its stamped output."""
    started = time.time()
    proc = subprocess.Popen(["/bin/sh", *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    stamped: list[str] = []
    for raw in proc.stdout:
        sys.stdout.buffer.write(raw)
        sys.stdout.flush()
        stamped.append(json.dumps([time.time(), raw.decode(errors="replace").rstrip("\n")]))
    code = proc.wait()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    step = {"command": argv[-1], "start": started, "end": time.time(), "rc": code,
            "cpu": usage.ru_utime + usage.ru_stime}
    name = f"{started:.6f}-{os.getpid()}"
    (record_dir / f"{name}.lines").write_text("\n".join(stamped) + "\n")
    (record_dir / f"{name}.step").write_text(json.dumps(step))
    return code


def write_wrapper(work: Path, record_dir: Path) -> Path:
    wrapper = work / "timed-sh"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {Path(__file__).resolve()} "
                       f"--as-shell {record_dir} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


# --- the load, sampled ----------------------------------------------------------------------

class LoadSampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, float]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.samples.append((time.time(), os.getloadavg()[0]))
            self.stopped.wait(SAMPLE_S)

    def over(self, start: float, end: float) -> str:
        inside = [load for t, load in self.samples if start <= t <= end]
        if not inside:
            inside = [min(self.samples, key=lambda s: abs(s[0] - end))[1]]
        return f"{sum(inside) / len(inside):.1f}"


# --- running make in a fresh clone ----------------------------------------------------------

def fresh_clone(ref: str, clone: Path) -> None:
    if clone.exists():
        sys.exit(f"{clone} exists: give a new folder (--clone) for a fresh clone")
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", ref], check=True)


def run_make(clone: Path, work: Path, targets: list[str], log: Path) -> tuple[int, float, float]:
    record_dir = work / "steps"
    record_dir.mkdir()
    env = {**os.environ, "PIP_CACHE_DIR": str(work / "pip-cache"),
           "PIP_LOG": str(work / "pip.log"), "CCACHE_DISABLE": "1"}
    wrapper = write_wrapper(work, record_dir)
    started = time.time()
    with log.open("wb") as out:
        code = subprocess.run(["make", "-C", str(clone), f"SHELL={wrapper}", *targets],
                              stdout=out, stderr=subprocess.STDOUT, env=env).returncode
    return code, started, time.time()


def read_steps(record_dir: Path) -> list[Step]:
    steps = []
    for path in sorted(record_dir.glob("*.step")):
        raw = json.loads(path.read_text())
        lines = [Line(t, text) for t, text in
                 (json.loads(row) for row in path.with_suffix(".lines").read_text().splitlines()
                  if row)]
        steps.append(Step(raw["command"], raw["start"], raw["end"], raw["rc"], raw["cpu"],
                          lines))
    return sorted(steps, key=lambda s: s.start)


# --- the table ------------------------------------------------------------------------------

def short(command: str, width: int = 58) -> str:
    text = " ".join(command.replace("\\\n", " ").split())
    return text if len(text) <= width else text[:width - 3] + "..."


def row(label: str, seconds: float, cpu: str, load: str) -> str:
    return f"{label:<62} {seconds:8.1f} {cpu:>8} {load:>6}"


def print_compile(rows: list[tuple[str, float, int, float, float]], load: LoadSampler,
                  indent: str) -> None:
    for target, seconds, jobs, start, end in rows:
        label = f"{target} ({jobs} jobs)" if jobs else target
        print(row(f"{indent}{label}", seconds, "", load.over(start, end)))


def print_report(steps: list[Step], pip_log: list[Line], load: LoadSampler,
                 span: tuple[float, float]) -> None:
    print(row("step (command make ran, its parts indented)", 0, "CPU s", "load")
          .replace("     0.0", "  wall s"))
    short_steps = [s for s in steps if s.end - s.start < 1.0]
    for step in steps:
        if step in short_steps:
            continue
        print(row(short(step.command), step.end - step.start, f"{step.cpu:.1f}",
                  load.over(step.start, step.end)))
        pip_lines = [x for x in pip_log if step.start <= x.t <= step.end]
        for label, start, end in pip_phases(pip_lines, step):
            print(row(f"  {label}", end - start, "", load.over(start, end)))
            inside = [x for x in pip_lines if start <= x.t <= end]
            print_compile(compile_split(inside, start) if label.startswith("wheel") else [],
                          load, "    ")
        if not pip_lines:
            print_compile(compile_split(step.lines, step.start), load, "  ")
    if short_steps:
        print(row(f"{len(short_steps)} commands under 1 s each",
                  sum(s.end - s.start for s in short_steps), "", ""))
    print(row("total (make, start to end)", span[1] - span[0],
              f"{sum(s.cpu for s in steps):.1f}", load.over(*span)))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--as-shell"]:
        return as_shell(Path(args[1]), args[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ref", default="HEAD", help="the revision to clone (default HEAD)")
    parser.add_argument("--clone", type=Path, help="where to clone (a new folder)")
    parser.add_argument("--targets", nargs="+", default=["install-local", "llama-server"])
    opts = parser.parse_args(args)
    work = Path(tempfile.mkdtemp(prefix="kveval-install-timing-"))
    clone = (opts.clone or work / "kveval").resolve()
    fresh_clone(opts.ref, clone)
    load = LoadSampler()
    load.start()
    print(f"fresh clone of {opts.ref} at {clone}; load before: {os.getloadavg()[0]:.2f}; "
          f"{os.cpu_count()} cores; make {' '.join(opts.targets)} (output: {work}/make.log)",
          flush=True)
    code, start, end = run_make(clone, work, opts.targets, work / "make.log")
    load.stopped.set()
    print_report(read_steps(work / "steps"), read_pip_log(work / "pip.log"), load, (start, end))
    if code:
        print(f"make exited {code}: see {work}/make.log", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
