"""Teacher forcing against free running on one real vLLM server, side by side: the same
items, the same server, in alternating rounds.

Starts `vllm serve` from the given venv on the given model folder (../shared/vllm-cpu.md says
how to build both for the CPU), then each round runs `kveval run` on the items free-running
(top-5 log-probabilities: what a baseline records) and then `kveval run --teacher-force` of
that run, each after the server's prefix cache was emptied (`/reset_prefix_cache`, which
vLLM serves with VLLM_SERVER_DEV_MODE=1), and prints both times and their ratio; then the
median ratio over the rounds. Start-up and imports are in both times; the server's start is
in neither.

    python bench/vllm_forcing.py --venv /work/vllm/venv --model /work/vllm/model
        [--gsm8k 20] [--prompts 10] [--concurrency 8] [--forced-concurrency 8,1]
        [--rounds 2] [--port 8391] [--data ../shared/data/gsm8k]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from forcing_speed import free_run, timed  # noqa: E402

GSM8K = ROOT / "kveval" / "data" / "gsm8k"
START_S = 900
_OPEN = urllib.request.build_opener(urllib.request.ProxyHandler({})).open


def _up(root: str) -> bool:
    try:
        with _OPEN(root + "/v1/models", timeout=5) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


@contextmanager
def vllm(venv: Path, model: Path, port: int, log: Path) -> Iterator[str]:
    """`vllm serve` on the CPU, until it answers /v1/models; its .../v1 URL."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "2",
           "VLLM_TARGET_DEVICE": "cpu", "VLLM_SERVER_DEV_MODE": "1"}
    command = [str(venv / "bin" / "vllm"), "serve", str(model), "--served-model-name", "smol",
               "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16",
               "--max-model-len", "8192"]
    root = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        deadline = time.monotonic() + START_S
        while not _up(root):
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"vllm serve did not come up: see {log}")
            time.sleep(2)
        yield root + "/v1"
    finally:
        server.terminate()
        server.wait(60)


def reset_cache(root: str) -> None:
    """The server's prefix cache emptied: no run finds another's prefix cached."""
    _OPEN(urllib.request.Request(root + "/reset_prefix_cache", b"", method="POST")).read()


def forced_run(url: str, out: Path, concurrency: int) -> float:
    reset_cache(url.removesuffix("/v1"))
    return timed("run", "--endpoint", url, "--teacher-force", str(out / "free.jsonl"),
                 "-o", str(out / f"forced-c{concurrency}.jsonl"), "--label", "forced",
                 "--logprobs", "5", "--concurrency", str(concurrency), "--overwrite")


def sizes(run: Path) -> str:
    """The free run's items per task, as counted in its file."""
    counts = Counter(json.loads(line)["task"] for line in run.read_text().splitlines()[1:])
    return " + ".join(f"{n} {task}" for task, n in sorted(counts.items()))


def one_round(args: argparse.Namespace, url: str, out: Path) -> tuple[float, list[float]]:
    """The free run's time, then each forced concurrency's."""
    reset_cache(url.removesuffix("/v1"))
    free = free_run(args, url, out, ["--logprobs", "5", "--concurrency",
                                     str(args.concurrency), "--overwrite"])
    return free, [forced_run(url, out, c) for c in args.forced]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, required=True, help="the venv holding vllm")
    parser.add_argument("--model", type=Path, required=True, help="the model folder")
    parser.add_argument("--gsm8k", type=int, default=20)
    parser.add_argument("--prompts", type=int, default=10)
    parser.add_argument("--data", type=Path, default=GSM8K, help="GSM8K's splits (bundled: 8)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--forced-concurrency", type=str, default=None,
                        help="forced runs' concurrencies, comma-separated (default: --concurrency)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--port", type=int, default=8391)
    args = parser.parse_args()
    args.forced = [int(c) for c in (args.forced_concurrency or str(args.concurrency)).split(",")]
    ratios: dict[int, list[float]] = {c: [] for c in args.forced}
    with tempfile.TemporaryDirectory() as tmp, vllm(
            args.venv, args.model, args.port, Path(tmp) / "vllm.log") as url:
        for n in range(args.rounds):
            free, forced = one_round(args, url, Path(tmp))
            shown = ", ".join(f"forced at {c} {t:.2f} s: {t / free:.2f}x"
                              for c, t in zip(args.forced, forced, strict=True))
            print(f"round {n + 1}: free {free:.2f} s, {shown}", flush=True)
            for c, t in zip(args.forced, forced, strict=True):
                ratios[c].append(t / free)
        counted = sizes(Path(tmp) / "free.jsonl")
    for c, values in ratios.items():
        print(f"forced at concurrency {c} / free, median of {args.rounds} rounds: "
              f"{statistics.median(values):.2f}x ({counted} items, free at concurrency "
              f"{args.concurrency})")


if __name__ == "__main__":
    main()
