"""The supervisor's own overhead per server start (`kveval ab`, run/serve.py): target < 2 s.

For each server, N times: the server started bare (Popen, /health polled every millisecond)
gives its own time to readiness and to exit after SIGTERM; the same command through
run/serve.py (the launcher, the masked log relay, readiness polled every POLL_S, the stop that
waits for the group and the port) gives the supervised times. The overhead is the difference
of the medians, for the start and for the stop.

    python bench/ab_overhead.py [--runs 5] [--llama-server PATH --model GGUF]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from kveval.run import serve

ROOT = Path(__file__).resolve().parents[1]
FAKE = (sys.executable, str(ROOT / "tests" / "ab_server.py"), "--port", "{port}")
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def healthy(port: int) -> bool:
    try:
        with OPENER.open(f"http://127.0.0.1:{port}/health", timeout=1) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def bare(argv: tuple[str, ...]) -> tuple[float, float]:
    """The server's own seconds to readiness, and to exit after SIGTERM."""
    port = serve.free_port()
    began = time.monotonic()
    process = subprocess.Popen([a.replace("{port}", str(port)) for a in argv],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not healthy(port):
        time.sleep(0.001)
    ready = time.monotonic() - began
    began = time.monotonic()
    process.send_signal(signal.SIGTERM)
    process.wait()
    return ready, time.monotonic() - began


def supervised(argv: tuple[str, ...], log: Path) -> tuple[float, float]:
    began = time.monotonic()
    server, _ = serve.start(serve.Command("bench", argv), log, 600.0)
    ready = time.monotonic() - began
    began = time.monotonic()
    serve.stop(server)
    return ready, time.monotonic() - began


def measure(name: str, argv: tuple[str, ...], runs: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "server.log"
        own = [bare(argv) for _ in range(runs)]
        sup = [supervised(argv, log) for _ in range(runs)]
    med = [statistics.median(x) for x in zip(*own, strict=True)]
    got = [statistics.median(x) for x in zip(*sup, strict=True)]
    print(f"{name}: {runs} starts; own ready {med[0]:.3f} s, supervised {got[0]:.3f} s, "
          f"overhead {got[0] - med[0]:+.3f} s; own stop {med[1]:.3f} s, supervised stop "
          f"{got[1]:.3f} s, overhead {got[1] - med[1]:+.3f} s; per start and stop "
          f"{got[0] + got[1] - med[0] - med[1]:+.3f} s (target < 2 s)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--llama-server", type=Path)
    p.add_argument("--model", type=Path)
    args = p.parse_args()
    measure("fake server (tests/ab_server.py)", FAKE, args.runs)
    if args.llama_server and args.model:
        argv = (str(args.llama_server), "-m", str(args.model), "--host", "127.0.0.1",
                "--port", "{port}", "-np", "2", "-c", "4096", "-t", "2", "--no-webui")
        measure("llama-server", argv, args.runs)


if __name__ == "__main__":
    main()
