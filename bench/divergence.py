"""Token divergence on the embedded engine: f16 restart, q8_0 and q4_0 KV caches against f16,
free-running and teacher-forced, and the run file's growth with log-probabilities.

Runs (skipped when their file exists in --out), each task in its own file:

    f16a-TASK     the baseline: f16, --logprobs 5
    f16b-TASK     f16 again after a restart (the noise floor); q8_0-TASK, q4_0-TASK
    tf-f16b-TASK  the baseline's answers teacher-forced on a restarted f16 engine;
    tf-q8_0-TASK, tf-q4_0-TASK  ... on q8_0 and q4_0
    plain-TASK    f16 without log-probabilities (file size and time without them)

Then per task and change: mean KL, top-1 agreement, the one-sided within-item permutation p
against the restart, and the smallest number of items flagged at p < 0.05 in 80% of 500
random subsets;
beside it the same for answer drift (exact McNemar against the restart, as `compare` tests).

    python bench/divergence.py --out results/divergence [--gsm8k 24] [--prompts 16]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

from kveval.errors import KvevalError
from kveval.formats.reader import read_run
from kveval.formats.records import Run
from kveval.judge.compare import Pair, pair_sides, side_from_run
from kveval.judge.divergence import ItemDivergence, per_item, summarize
from kveval.judge.permute import exchange_p
from kveval.judge.stats import mcnemar_exact

CHANGES = ("f16b", "q8_0", "q4_0")
ALPHA, POWER, DRAWS = 0.05, 0.8, 500


def task_args(task: str, n: int, gsm8k_dir: str) -> list[str]:
    if task == "gsm8k":
        return ["--task", "gsm8k", "--limit", str(n), "--data", gsm8k_dir]
    return ["--task", "prompts", "--limit", str(n)]


def kveval_run(out: Path, label: str, kv: str, args: list[str]) -> None:
    path = out / f"{label}.jsonl"
    if path.exists():
        return
    cmd = [sys.executable, "-m", "kveval.cli", "run", "--kv-cache-type", kv, "--label", label,
           "-o", str(path), "--concurrency", "4", *args]
    print("running:", " ".join(cmd[3:]), file=sys.stderr)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def produce(out: Path, tasks: dict[str, int], gsm8k_dir: str) -> None:
    for task, n in tasks.items():
        base = task_args(task, n, gsm8k_dir)
        kveval_run(out, f"plain-{task}", "f16", base)
        kveval_run(out, f"f16a-{task}", "f16", [*base, "--logprobs", "5"])
        for change in CHANGES:
            kv = "f16" if change == "f16b" else change
            kveval_run(out, f"{change}-{task}", kv, [*base, "--logprobs", "5"])
        for change in CHANGES:
            kv = "f16" if change == "f16b" else change
            kveval_run(out, f"tf-{change}-{task}", kv,
                       ["--teacher-force", str(out / f"f16a-{task}.jsonl")])


def pairs(base: Run, other: Run) -> list[Pair]:
    return list(pair_sides(side_from_run(base), side_from_run(other)).pairs)


def smallest_n(flags: dict[int, float]) -> str:
    if not flags:  # fewer than 3 items
        return "-"
    found = [n for n, power in sorted(flags.items()) if power >= POWER]
    return str(found[0]) if found else f"> {max(flags)}"


def greater_p(x: np.ndarray, y: np.ndarray) -> float:
    """The gate's item-by-item part: the candidate's per-item KL exchanged with the noise
    run's within each item (kveval.judge.permute)."""
    return exchange_p(list(x), [list(y)])[0]


def kl_power(cand: list[ItemDivergence], noise: list[ItemDivergence], rng: np.random.Generator
             ) -> dict[int, float]:
    noise_kl = {i.key: i.kl_mean for i in noise}
    x = np.array([c.kl_mean for c in cand if c.key in noise_kl])
    y = np.array([noise_kl[c.key] for c in cand if c.key in noise_kl])
    return {n: float(np.mean([greater_p(x[s], y[s]) < ALPHA
                              for s in (rng.choice(len(x), n, replace=False)
                                        for _ in range(DRAWS))]))
            for n in range(3, len(x) + 1)}


def drift_power(cand: list[Pair], noise: list[Pair], rng: np.random.Generator
                ) -> dict[int, float]:
    noise_same = {p.key: p.identical for p in noise}
    shared = [(not p.identical, not noise_same[p.key]) for p in cand if p.key in noise_same]
    flags = {}
    for n in range(3, len(shared) + 1):
        hits = 0
        for _ in range(DRAWS):
            picked = [shared[i] for i in rng.choice(len(shared), n, replace=False)]
            c_only = sum(c and not m for c, m in picked)
            n_only = sum(m and not c for c, m in picked)
            hits += c_only > n_only and mcnemar_exact(c_only, n_only) < ALPHA
        flags[n] = hits / DRAWS
    return flags


def row(out: Path, task: str, change: str, forced: bool, rng: np.random.Generator) -> str:
    base = read_run(out / f"f16a-{task}.jsonl")
    prefix = "tf-" if forced else ""
    cand = read_run(out / f"{prefix}{change}-{task}.jsonl")
    noise = read_run(out / f"{prefix}f16b-{task}.jsonl")
    c_pairs, n_pairs = pairs(base, cand), pairs(base, noise)
    c_div, n_div = per_item([(p.base, p.other) for p in c_pairs]), per_item(
        [(p.base, p.other) for p in n_pairs])
    s = summarize(c_div)
    noise_kl = {i.key: i.kl_mean for i in n_div}
    x = np.array([c.kl_mean for c in c_div if c.key in noise_kl])
    y = np.array([noise_kl[c.key] for c in c_div if c.key in noise_kl])
    drift = "-" if forced else smallest_n(drift_power(c_pairs, n_pairs, rng))
    changed = "-" if forced else f"{sum(not p.identical for p in c_pairs)}/{len(c_pairs)}"
    top1 = 100 * (s.top1_agreement or 0)
    return (f"| {task} | {'teacher-forced' if forced else 'free-running'} | {change} | "
            f"{len(c_div)} | {s.positions} | {s.kl_mean:.4g} | {top1:.1f}% "
            f"| {greater_p(x, y):.2g} | {smallest_n(kl_power(c_div, n_div, rng))} | "
            f"{changed} | {drift} |")


def sizes(out: Path, task: str) -> str:
    plain, with_lp = read_run(out / f"plain-{task}.jsonl"), read_run(out / f"f16a-{task}.jsonl")
    size = [(out / f"{name}-{task}.jsonl").stat().st_size for name in ("plain", "f16a")]
    tokens = sum(len(i.logprobs["tokens"]) for i in with_lp.items if i.logprobs)
    return (f"{task}: {len(plain.items)} items, {size[0] / len(plain.items) / 1024:.1f} KiB an "
            f"item without log-probabilities, {size[1] / len(with_lp.items) / 1024:.1f} KiB "
            f"with K = 5 ({(size[1] - size[0]) / max(tokens, 1):.0f} bytes per answer token, "
            f"{tokens / len(with_lp.items):.0f} tokens an answer)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("results/divergence"))
    parser.add_argument("--gsm8k", type=int, default=24)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--data", default="../shared/data/gsm8k", help="GSM8K folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-runs", action="store_true",
                        help="only read the run files in --out; leave out rows missing one")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tasks = {name: n for name, n in (("prompts", args.prompts), ("gsm8k", args.gsm8k)) if n}
    if not args.no_runs:
        produce(args.out, tasks, args.data)
    rng = np.random.default_rng(args.seed)
    print("| task | mode | change | items | positions | mean KL (nats) | top-1 same | "
          "p (permutation vs restart) | smallest n flagged, KL | answers changed | "
          "smallest n flagged, answer drift |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for task in tasks:
        for forced in (False, True):
            for change in CHANGES:
                try:
                    print(row(args.out, task, change, forced, rng))
                except KvevalError as exc:  # a run not made yet (--no-runs)
                    print(f"| {task} | {'tf' if forced else 'free'} | {change} | ({exc}) |")
    for task in tasks:
        try:
            print(sizes(args.out, task))
        except (OSError, KvevalError) as exc:
            print(f"{task}: {exc}")


if __name__ == "__main__":
    main()
