"""Forced decoding's request rate: `kveval run --teacher-force` against the stub in
llama-server's shapes (bench/stub_server.py --slots), at 0 ms and 5 ms per request.

A synthetic baseline of N completions items, each answer of L tokens (one request per token),
is forced at concurrency 64 against a stub with 64 slots; prints requests per second (positions
over wall time, start-up and imports included), the ideal `ceil(items / c) * L * latency`, and
for scale the items per second of the echo method (one request per item) on the same stub.

    python bench/forced_decoding.py [--items 256] [--tokens 64] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from client_throughput import wait_until_up  # noqa: E402


@contextlib.contextmanager
def stub(latency: float, slots: int) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "stub_server.py"),
                             "--latency-ms", str(latency * 1000), "--slots", str(slots)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        wait_until_up(url)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def baseline(path: Path, items: int, tokens: int) -> None:
    """A run file of `items` answered completions items, each answer `tokens` words long."""
    header = {"type": "run", "schema_version": 1, "label": "base", "endpoint": "stub",
              "model": "stub", "tasks": [{"name": "prompts", "adapter": "prompts",
                                          "version": "1", "api": "completions"}],
              "sampling": {"temperature": 0.0}, "concurrency": 1, "fingerprint": {},
              "created": "2026-01-01T00:00:00+00:00", "kveval_version": "0"}
    answer = "".join(" the" for _ in range(tokens))
    lines = [json.dumps(header)]
    for i in range(items):
        prompt = f"Question {i}: " + "word " * 200
        sha = hashlib.sha256(prompt.encode()).hexdigest()
        lines.append(json.dumps({
            "type": "item", "task": "prompts", "item_id": f"prompts/{i:04d}",
            "prompt_sha256": sha, "request": {"prompt": prompt}, "status": "ok",
            "output": answer, "finish_reason": "length", "meta": {}}))
    path.write_text("\n".join(lines) + "\n")


def forced(url: str, base: Path, out: Path, concurrency: int) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kveval.cli.cli", "run", "--endpoint", url,
                    "--teacher-force", str(base), "--concurrency", str(concurrency), "-o",
                    str(out), "--overwrite"], check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base, out = Path(tmp) / "base.jsonl", Path(tmp) / "tf.jsonl"
        baseline(base, args.items, args.tokens)
        requests = args.items * args.tokens
        print(f"forced decoding: {args.items} items x {args.tokens} tokens = {requests} "
              f"requests, concurrency {args.concurrency}, {args.concurrency} slots")
        print(f"{'latency':>8} {'wall s':>7} {'ideal s':>8} {'req/s':>8}")
        for latency in (0.0, 0.005):
            with stub(latency, args.concurrency) as url:
                wall = forced(url, base, out, args.concurrency)
            ideal = math.ceil(args.items / args.concurrency) * args.tokens * latency
            print(f"{latency * 1000:>6.0f}ms {wall:>7.2f} {ideal:>8.2f} {requests / wall:>8.0f}")


if __name__ == "__main__":
    main()
