"""Where `kveval demo`'s time goes: wall and CPU time per step, and per task inside each run.

    python bench/demo_timing.py [--repeat 2] [--threads N] [--keep DIR] [-- DEMO_ARGS...]

Runs `kveval demo` in a child process (into a temporary --output-dir), stamps each step
line it prints on stderr (`[N/M] ...` for a run, `$ kveval ...` for a verdict command) as it
arrives, and prints each step's wall time and the CPU seconds the demo and everything it
started (the engine's server) spent in it. Then, from the run files: per run and task the
items, prompt and answer tokens, and the summed request latency (runs go one request at a
time, so the sum is the time spent answering), and what the run spent outside requests.

On a shared machine wall times follow the load (printed before and after), and more than in
proportion: each llama.cpp thread waits at every step of the forward pass for the others, so
one of them descheduled stalls all. `--threads 1` starts the engine with one thread: its CPU
seconds then measure the work itself, which the load hardly changes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

STEP = re.compile(r"^(\[\d+/\d+\] .*|\$ kveval \w+)")
TICK = os.sysconf("SC_CLK_TCK")
# the demo with the engine's thread count fixed (prepare() reads os.cpu_count())
LAUNCH = ("import os, sys; n = int(sys.argv.pop(1)); os.cpu_count = (lambda: n) if n else "
          "os.cpu_count; from kveval.cli.cli import main; main(sys.argv[1:])")


def _stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and its waited-for children)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), sum(int(f) for f in fields[11:15]) / TICK


def tree_cpu_s(root: int) -> float:
    """CPU seconds of a process, its live descendants and the children they waited for."""
    stats = {int(pid): s for pid in os.listdir("/proc") if pid.isdigit()
             and (s := _stat(pid)) is not None}
    total, frontier = 0.0, [root]
    while frontier:
        pid = frontier.pop()
        if pid in stats:
            total += stats[pid][1]
            frontier += [child for child, (parent, _) in stats.items() if parent == pid]
    return total


def timed_demo(out: Path, threads: int, extra: list[str]
               ) -> tuple[list[tuple[str, float, float]], float, float, int]:
    """(step, wall s, CPU s) in order, the total wall and CPU time, the demo's exit code."""
    argv = [sys.executable, "-c", LAUNCH, str(threads), "demo", "--output-dir", str(out), *extra]
    started = time.perf_counter()
    marks: list[tuple[str, float, float]] = [("start: checks, suite", 0.0, 0.0)]
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, bufsize=1) as proc:
        assert proc.stderr is not None
        for raw in proc.stderr:
            for line in raw.split("\r"):
                match = STEP.match(line.strip())
                if match:
                    marks.append((match[1][:60], time.perf_counter() - started,
                                  tree_cpu_s(proc.pid)))
        cpu_end = tree_cpu_s(proc.pid)  # before the wait reaps it
        code = proc.wait()
    total = time.perf_counter() - started
    ends = [(wall, cpu) for _, wall, cpu in marks[1:]] + [(total, cpu_end)]
    steps = [(name, end_wall - wall, end_cpu - cpu)
             for (name, wall, cpu), (end_wall, end_cpu) in zip(marks, ends, strict=True)]
    return steps, total, cpu_end, code


def run_tasks(path: Path) -> dict[str, tuple[int, int, int, float]]:
    """Per task: items, prompt tokens, answer tokens, summed latency in seconds."""
    items: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0])
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        row = json.loads(line)
        usage = row.get("usage") or {}
        entry = items[row["task"]]
        entry[0] += 1
        entry[1] += usage.get("prompt_tokens") or 0
        entry[2] += usage.get("completion_tokens") or 0
        entry[3] += row.get("latency_s") or 0.0
    return {task: (int(n), int(p), int(a), s) for task, (n, p, a, s) in items.items()}


def print_runs(steps: list[tuple[str, float, float]], out: Path) -> None:
    run_walls = [wall for name, wall, _ in steps if name.startswith("[")]
    runs = sorted(out.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
    for path, wall in zip(runs, run_walls, strict=False):  # a failed demo has fewer files
        tasks = run_tasks(path)
        answering = sum(s for *_, s in tasks.values())
        print(f"  {path.stem}: {wall:.1f} s, of which {answering:.1f} s answering, "
              f"{wall - answering:.1f} s outside requests (start, data, engine)")
        for task, (n, prompt, answer, seconds) in tasks.items():
            print(f"      {task:<14} {n:>3} items {prompt:>6} prompt + {answer:>5} answer "
                  f"tokens {seconds:7.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="Run the demo this many times.")
    parser.add_argument("--threads", type=int, default=0,
                        help="The engine's threads (default 0: one per core, as the demo).")
    parser.add_argument("--keep", metavar="DIR", help="Keep each attempt's files in DIR/N.")
    parser.add_argument("demo_args", nargs="*", help="Passed to `kveval demo` (after --).")
    args = parser.parse_args()
    for attempt in range(1, args.repeat + 1):
        with tempfile.TemporaryDirectory(prefix="kveval-demo-timing-") as tmp:
            out = Path(args.keep) / str(attempt) if args.keep else Path(tmp) / "demo"
            load = os.getloadavg()[0]
            steps, total, cpu, code = timed_demo(out, args.threads, args.demo_args)
            print(f"\nattempt {attempt}/{args.repeat}: kveval demo {' '.join(args.demo_args)}"
                  f"{f' (engine threads: {args.threads})' if args.threads else ''}")
            print(f"{total:.1f} s ({total / 60:.2f} min), {cpu:.0f} CPU s, exit {code}; load "
                  f"average {load:.1f} before, {os.getloadavg()[0]:.1f} after")
            for name, wall, step_cpu in steps:
                print(f"  {wall:7.1f} s {step_cpu:7.1f} CPU s  {name}")
            print_runs(steps, out)


if __name__ == "__main__":
    main()
