"""The context task's cost on one llama-server, beside GSM8K's, side by side.

One CPU (or GPU) llama-server with `--no-cache-idle-slots`; each round runs, on the same
server, `kveval run` of the context task (the bundled documents cut to --tokens, each forced
one request per position on its own slot) and of GSM8K 8-shot free-running (--gsm8k items),
each after every slot was given an unrelated prompt; it prints the forced positions per
second, the GSM8K items per second, and the share of the two runs' time the context task
takes (what it adds to an `ab`'s server time beside GSM8K). Start-up and imports are in both.

    python bench/context_speed.py [--documents 2] [--tokens 2048] [--gsm8k 16] [--slots 2]
        [--rounds 2] [--threads 2] [--data ../shared/data/gsm8k]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from forcing_speed import evict, timed  # noqa: E402
from llama_server import llama_server  # noqa: E402

from kveval.run.engine_setup import bundled_model_path  # noqa: E402


def suites(args: argparse.Namespace, out: Path) -> tuple[Path, Path]:
    lengths = sorted({args.tokens // 4, args.tokens // 2, args.tokens})
    context, gsm8k = out / "context.toml", out / "gsm8k.toml"
    context.write_text(f'[[task]]\nname = "context"\nlimit = {args.documents}\n'
                       f"lengths = {lengths}\n")
    gsm8k.write_text(f'[[task]]\nname = "gsm8k"\nlimit = {args.gsm8k}\ndata = "{args.data}"\n')
    return context, gsm8k


def positions(path: Path) -> int:
    lines = path.read_text().splitlines()[1:]
    return sum(json.loads(line)["meta"]["teacher_forced"]["positions"] for line in lines)


def one_round(args: argparse.Namespace, url: str, out: Path, n: int) -> tuple[float, float, int]:
    context, gsm8k = suites(args, out)
    common = ["--concurrency", str(args.slots), "--overwrite"]
    root = url.removesuffix("/v1")
    evict(root, args.slots)
    forced = timed("run", "--endpoint", url, "--suite", str(context), *common,
                   "-o", str(out / f"context-{n}.jsonl"))
    evict(root, args.slots)
    free = timed("run", "--endpoint", url, "--suite", str(gsm8k), *common,
                 "-o", str(out / f"gsm8k-{n}.jsonl"))
    return forced, free, positions(out / f"context-{n}.jsonl")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--gsm8k", type=int, default=16)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "gsm8k"))
    args = parser.parse_args()
    shares = []
    with tempfile.TemporaryDirectory() as folder, llama_server(
            bundled_model_path(), "f16", slots=args.slots, ctx_per_slot=args.tokens + 512,
            threads=args.threads) as url:
        for n in range(args.rounds):
            forced, free, count = one_round(args, url, Path(folder), n)
            shares.append(forced / (forced + free))
            print(f"round {n + 1}: context {count:,} positions in {forced:.1f} s "
                  f"({count / forced:.1f} positions/s); GSM8K {args.gsm8k} items in {free:.1f} s "
                  f"({args.gsm8k / free:.2f} items/s); context {100 * shares[-1]:.0f}% of the "
                  "two", flush=True)
    print(f"median share of the context task: {100 * statistics.median(shares):.0f}%")


if __name__ == "__main__":
    main()
