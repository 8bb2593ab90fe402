"""What compiling llama.cpp's glue at -O1 costs and saves (cmake/llama-glue-flags.cmake).

    python bench/glue_opt.py [--o3 build/glue-o3] [--items 12] [--repeat 3] [--server-tests]

The Makefile's build (build/llama-server, `make llama-server` first) compiles llama and the
server-only targets at -O1. This configures a second build of the same source with the same
arguments but without KVEVAL_GLUE_OPT (every target at the build type's -O3), builds llama and
llama-server there, and prints:

- each target's compile seconds in both builds, from their .ninja_log (the last build of each
  object: ninja's job times, summed per target, so 2 jobs in parallel count twice);
- the embedded engine's speed on either libllama (LLAMA_CPP_LIB_PATH): `kveval run` of
  --items GSM8K questions one at a time, the two alternating --repeat times, the median wall,
  and whether the answers are the same;
- with --server-tests, the wall of the llama-server integration tests on either server.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLUE_BUILD = ROOT / "build/llama-server"
SERVER_TESTS = ["tests/test_llama_server.py", "tests/test_teacher_methods.py",
                "tests/test_token_identity.py"]
TARGET_DIR = re.compile(r"CMakeFiles/([^/]+)\.dir/")


def configure_args() -> list[str]:
    """The Makefile's configure arguments less the glue flags, and the source they build."""
    cache = (GLUE_BUILD / "CMakeCache.txt").read_text()
    source = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", cache, re.M)
    if source is None:
        sys.exit(f"{GLUE_BUILD} is not configured: run `make llama-server` first")
    args = (ROOT / "build/.llama-configure-args").read_text().split()
    kept = [a for a in args if "GLUE" not in a and "PROJECT_INCLUDE" not in a]
    return ["-S", source.group(1), *kept]


def build_o3(tree: Path) -> float:
    """Configure and build llama and llama-server at -O3 in `tree`; the build's wall."""
    subprocess.run(["cmake", *configure_args(), "-B", str(tree), "-G", "Ninja",
                    "-UCMAKE_PROJECT_INCLUDE", "-UKVEVAL_GLUE_OPT"],
                   check=True, stdout=subprocess.DEVNULL)
    started = time.monotonic()
    subprocess.run(["cmake", "--build", str(tree), "--target", "llama", "llama-server", "-j",
                    str(os.cpu_count() or 2)], check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def compile_seconds(tree: Path) -> dict[str, float]:
    """Job seconds per target: the last build of each object file in .ninja_log."""
    last: dict[str, float] = {}
    for line in (tree / ".ninja_log").read_text().splitlines()[1:]:
        start, end, _, output, *_ = line.split("\t")
        if output.endswith(".o"):
            last[output] = (int(end) - int(start)) / 1000
    totals: dict[str, float] = {}
    for output, seconds in last.items():
        found = TARGET_DIR.search(output)
        if found:
            totals[found.group(1)] = totals.get(found.group(1), 0.0) + seconds
    return totals


def engine_run(lib: Path, items: int, data: str, out: Path) -> float:
    """Seconds of one `kveval run` of GSM8K on the libllama in `lib`."""
    env = {**os.environ, "LLAMA_CPP_LIB_PATH": str(lib)}
    started = time.monotonic()
    subprocess.run([str(ROOT / ".venv/bin/kveval"), "run", "--task", "gsm8k", "--limit",
                    str(items), "--data", data, "--concurrency", "1", "--label", lib.parent.name,
                    "-o", str(out), "--overwrite"], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def answers(path: Path) -> list[str]:
    return [json.loads(line).get("response", "") for line in path.read_text().splitlines()[1:]]


def server_tests(binary: Path) -> float:
    env = {**os.environ, "KVEVAL_LLAMA_SERVER": str(binary)}
    started = time.monotonic()
    subprocess.run([str(ROOT / ".venv/bin/pytest"), "-q", *SERVER_TESTS], cwd=ROOT, env=env,
                   check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def print_compile(o1: dict[str, float], o3: dict[str, float]) -> None:
    print(f"{'target':<20} {'-O3 s':>8} {'glue -O1 s':>11}")
    for target in sorted(o3, key=o3.get, reverse=True):  # type: ignore[arg-type]
        print(f"{target:<20} {o3[target]:8.1f} {o1.get(target, 0.0):11.1f}")
    print(f"{'all':<20} {sum(o3.values()):8.1f} {sum(o1.values()):11.1f}")


def compare_engines(o3: Path, items: int, data: str, repeat: int) -> None:
    walls: dict[str, list[float]] = {"-O3": [], "glue -O1": []}
    with tempfile.TemporaryDirectory() as tmp:
        files = {"-O3": Path(tmp, "o3.jsonl"), "glue -O1": Path(tmp, "o1.jsonl")}
        libs = {"-O3": o3 / "bin", "glue -O1": GLUE_BUILD / "bin"}
        for _ in range(repeat):
            for name in walls:
                walls[name].append(engine_run(libs[name], items, data, files[name]))
        same = answers(files["-O3"]) == answers(files["glue -O1"])
    for name, values in walls.items():
        print(f"engine {name:<9} {items} GSM8K items: median {statistics.median(values):.1f} s "
              f"({', '.join(f'{v:.1f}' for v in values)})")
    print(f"answers identical: {same}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--o3", type=Path, default=ROOT / "build/glue-o3")
    parser.add_argument("--items", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/gsm8k"))
    parser.add_argument("--server-tests", action="store_true")
    args = parser.parse_args()
    wall = build_o3(args.o3.resolve())
    print(f"-O3 build of llama and llama-server: {wall:.1f} s wall (incremental if it existed)")
    print_compile(compile_seconds(GLUE_BUILD), compile_seconds(args.o3))
    compare_engines(args.o3.resolve(), args.items, args.data, args.repeat)
    if args.server_tests:
        for name, binary in (("-O3", args.o3 / "bin/llama-server"),
                             ("glue -O1", GLUE_BUILD / "bin/llama-server")):
            print(f"llama-server tests on {name}: {server_tests(binary.resolve()):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
