"""Teacher forcing against free running on one llama-server, side by side: the same items,
the same server, in alternating rounds.

One CPU (or GPU) llama-server with `--no-cache-idle-slots`; each round runs `kveval run` on
the items free-running (top-5 log-probabilities: what a baseline records) and then
`kveval run --teacher-force` of that run, each after every slot was given an unrelated
prompt (so neither finds the other's prefix cached), and prints both times and their ratio;
then the median ratio over the rounds. Start-up and imports are in both times.

    python bench/forcing_speed.py [--gsm8k 8] [--prompts 8] [--slots 2] [--rounds 3]
        [--data ../shared/data/gsm8k] [--server build/llama-server/bin/llama-server]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from llama_server import BINARY, llama_server  # noqa: E402

from kveval.run.engine_setup import bundled_model_path  # noqa: E402

PROMPTS = ROOT / "kveval" / "data" / "prompts" / "regression.txt"
KVEVAL = [sys.executable, "-m", "kveval.cli"]
_OPEN = urllib.request.build_opener(urllib.request.ProxyHandler({})).open


def evict(root: str, slots: int) -> None:
    """Every slot given a 4-token prompt: no run finds another's prefix in its cache."""
    for slot in range(slots):
        body = json.dumps({"prompt": [1, 2, 3, 4], "n_predict": 1, "id_slot": slot}).encode()
        _OPEN(urllib.request.Request(root + "/completion", body,
                                     {"Content-Type": "application/json"})).read()


def timed(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([*KVEVAL, *args], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def free_run(args: argparse.Namespace, url: str, out: Path, common: list[str]) -> float:
    suite = out / "suite.toml"
    suite.write_text(f'[[task]]\nname = "gsm8k"\nlimit = {args.gsm8k}\ndata = "{args.data}"\n'
                     f'[[task]]\nname = "prompts"\nlimit = {args.prompts}\ndata = "{PROMPTS}"\n')
    return timed("run", "--endpoint", url, "--suite", str(suite), "-o", str(out / "free.jsonl"),
                 "--label", "free", *common)


def one_round(args: argparse.Namespace, url: str, out: Path) -> tuple[float, float]:
    root = url.removesuffix("/v1")
    common = ["--logprobs", "5", "--concurrency", str(args.slots), "--overwrite"]
    evict(root, args.slots)
    free = free_run(args, url, out, common)
    evict(root, args.slots)
    forced = timed("run", "--endpoint", url, "--teacher-force", str(out / "free.jsonl"),
                   "-o", str(out / "forced.jsonl"), "--label", "forced", *common)
    return free, forced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gsm8k", type=int, default=8)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=ROOT / "kveval" / "data" / "gsm8k")
    parser.add_argument("--server", type=Path, default=BINARY)
    args = parser.parse_args()
    ratios = []
    with tempfile.TemporaryDirectory() as tmp, llama_server(
            bundled_model_path(), "f16", args.slots, threads=args.threads,
            binary=args.server) as url:
        for n in range(args.rounds):
            free, forced = one_round(args, url, Path(tmp))
            ratios.append(forced / free)
            print(f"round {n + 1}: free {free:.2f} s, forced {forced:.2f} s: {forced / free:.2f}x",
                  flush=True)
    print(f"forced / free, median of {args.rounds} rounds: {statistics.median(ratios):.2f}x "
          f"({args.gsm8k} GSM8K + {args.prompts} prompt items, {args.slots} slots)")


if __name__ == "__main__":
    main()
