"""Server starts and wall time of a `kveval ab` sweep: K candidates with N noise runs, one
experiment sequential and side by side (`--parallel P`), against one `ab` per candidate (each
restarting the baseline and its restarts), all on the CPU llama-server (`make llama-server`)
with the bundled model, each server on `--threads` threads, teacher forcing on.

    python bench/ab_sweep.py [--candidates 2] [--noise-runs 1] [--parallel 2] [--prompts 8]

The three ways run one after another in one call (the machine's load moves; compare ratios).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kveval.run import engine_setup

ROOT = Path(__file__).resolve().parents[1]
BINARY = ROOT / "build" / "llama-server" / "bin" / "llama-server"
CACHES = ("q8_0", "q4_0", "q5_1", "q5_0", "iq4_nl", "q4_1")
PROMPTS = ("Name three colours.", "What is the capital of France?", "Say hello.",
           "Count from one to five.", "Name a fruit.", "What is two plus two?",
           "Say goodbye.", "Name an animal.")


def suite(folder: Path, prompts: int) -> Path:
    lines = [PROMPTS[i % len(PROMPTS)] + f" ({i})" for i in range(prompts)]
    (folder / "prompts.txt").write_text("\n".join(lines) + "\n")
    path = folder / "suite.toml"
    path.write_text(f'[[task]]\nname = "prompts"\ndata = "{folder / "prompts.txt"}"\n'
                    "max_tokens = 16\n")
    return path


def command(folder: Path, out: str, candidates: list[str], args: argparse.Namespace,
            *extra: str) -> list[str]:
    serve = shlex.join([str(BINARY), "-m", str(engine_setup.bundled_model_path()), "--host",
                        "127.0.0.1", "--port", "{port}", "-np", "2", "-c", "4096", "-fa", "on",
                        "-t", str(args.threads), "--no-webui", "--no-cache-idle-slots"])
    return [sys.executable, "-m", "kveval.cli", "ab", "--serve", serve, "--baseline",
            "-ctk f16 -ctv f16", *(w for c in candidates for w in ("--candidate", c)),
            "--noise-runs", str(args.noise_runs), "--suite", str(suite(folder, args.prompts)),
            "--concurrency", "2", "--teacher-force", "on", "-o", str(folder / out), *extra]


def timed(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and server starts of one `kveval ab`."""
    began = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"kveval ab failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return time.monotonic() - began, done.stderr.count("answering on port")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--candidates", type=int, default=2, choices=range(1, len(CACHES) + 1))
    p.add_argument("--noise-runs", type=int, default=1)
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    if not BINARY.exists():
        sys.exit(f"{BINARY}: not built (make llama-server)")
    named = [f"{c}=-ctk {c} -ctv {c}" for c in CACHES[:args.candidates]]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = [("one sweep, sequential", *timed(command(folder, "seq", named, args))),
                (f"one sweep, --parallel {args.parallel}",
                 *timed(command(folder, "par", named, args, "--parallel",
                                str(args.parallel))))]
        each = [timed(command(folder, f"one-{i}", [c], args)) for i, c in enumerate(named)]
        rows.append(("one ab per candidate", sum(w for w, _ in each), sum(s for _, s in each)))
    print(f"{args.candidates} candidates, {args.noise_runs} noise runs, {args.prompts} "
          f"prompts, forced, {args.threads} thread(s) a server")
    for name, wall, starts in rows:
        print(f"{name:28s} {starts:3d} starts  {wall:7.1f} s  "
              f"{wall / rows[0][1]:.2f}x the sequential sweep")


if __name__ == "__main__":
    main()
