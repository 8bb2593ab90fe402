"""Wall time of `kveval --help` (goal: at most 0.2 s), beside a bare interpreter start.

    python bench/cli_startup.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def best_of(argv: list[str], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    rows = [("python -c pass", [sys.executable, "-c", "pass"]),
            ("kveval --help", [sys.executable, "-m", "kveval.cli", "--help"]),
            ("kveval run --help", [sys.executable, "-m", "kveval.cli", "run", "--help"])]
    print(f"{'command':<20} {'best s':>7} {'median s':>9}")
    for name, argv in rows:
        best, median = best_of(argv, args.repeat)
        print(f"{name:<20} {best:>7.3f} {median:>9.3f}")


if __name__ == "__main__":
    main()
