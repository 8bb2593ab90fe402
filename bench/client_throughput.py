"""A whole `kveval run` of the GSM8K test split against a local stub server.

Runs the real command (a fresh process: start-up and imports count) at 0 ms and at
50 ms per request, concurrency 64, and prints requests/second, wall time, the ideal
`ceil(n / c) * latency` and the peak memory of the kveval process.

    python bench/client_throughput.py [--data ../shared/data/gsm8k] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def stub(latency: float) -> Iterator[str]:
    """The asyncio stub server in its own process; yields its base URL."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "stub_server.py"),
                             "--latency-ms", str(latency * 1000)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        wait_until_up(url)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def wait_until_up(url: str) -> None:
    for _ in range(100):
        try:
            urllib.request.urlopen(url + "/models", timeout=1).read()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"stub server at {url} did not answer")


def one_run(data: Path, latency: float, concurrency: int) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, items written) of one `kveval run` process."""
    with stub(latency) as url, tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.jsonl"
        argv = [sys.executable, "-m", "kveval.cli", "run", "--endpoint", url,
                "--task", "gsm8k", "--data", str(data), "--concurrency", str(concurrency),
                "-o", str(out)]
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"kveval run failed ({proc.returncode}): "
                             f"{proc.stderr.read().decode()[-500:] if proc.stderr else ''}")
        items = len(out.read_text().splitlines()) - 1
    return wall, usage.ru_maxrss / 1024, items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "gsm8k")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="runs per latency; best is shown")
    args = parser.parse_args()
    print(f"kveval run, GSM8K test split, concurrency {args.concurrency}, best of {args.repeat}")
    print(f"{'latency':>8} {'items':>6} {'wall s':>7} {'ideal s':>8} {'req/s':>7} {'peak MB':>8}")
    for latency in (0.0, 0.05):
        runs = [one_run(args.data, latency, args.concurrency) for _ in range(args.repeat)]
        wall, rss, items = min(runs)
        ideal = math.ceil(items / args.concurrency) * latency
        print(f"{latency * 1000:>6.0f}ms {items:>6} {wall:>7.2f} {ideal:>8.2f} "
              f"{items / wall:>7.0f} {max(r[1] for r in runs):>8.0f}")


if __name__ == "__main__":
    main()
