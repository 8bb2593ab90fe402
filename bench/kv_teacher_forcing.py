"""Teacher-forced KL of quantized KV caches on llama.cpp's llama-server, beside
`llama-perplexity --kl-divergence` for the same model, and the noise runs the gate needs.

One f16 server answers GSM8K and prompt items free-running (the baseline, --logprobs 5);
then a fresh server per run (f16-a, the forced reference; four f16 restarts f16-b to f16-e,
the noise floor; q8_0; q4_0), every one started with --no-cache-idle-slots, teacher-forces the
baseline's answers; stage f16-default forces it once more on a server with llama-server's
default flags, for the flag's speed-up. Prints the time of each pass against the free-running
one; per task and run the KL table (judge/kld.py) against the baseline and against forced
f16-a; `gate --max-kl 0` of q8_0, q4_0 and a restart (f16-e) against forced f16-a with the
first 1 to 4 restarts as noise; and what `plan --detect-kl` says from a pilot of two
restarts. With --perplexity, llama.cpp's own table on GSM8K train text.

    python bench/kv_teacher_forcing.py --server build/llama-server/bin/llama-server \\
        --data ../shared/data/gsm8k --gsm8k 20 --prompts 10 --slots 2      # CPU, small
    python bench/kv_teacher_forcing.py --server CUDA_BUILD/bin/llama-server \\
        --perplexity CUDA_BUILD/bin/llama-perplexity --data ../shared/data/gsm8k \\
        --gpu-layers 99                                      # GPU: 500 + 50 items, 16 slots
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from llama_server import llama_server  # noqa: E402

from kveval.formats.reader import read_run  # noqa: E402
from kveval.judge.divergence import position_values  # noqa: E402
from kveval.judge.kld import KldTable, kld_table  # noqa: E402

RESTARTS = ("f16-b", "f16-c", "f16-d", "f16-e")
RUNS = (("f16-a", "f16"), *((label, "f16") for label in RESTARTS), ("q8_0", "q8_0"),
        ("q4_0", "q4_0"))
DEFAULT_FLAGS = "f16-default"  # forced once more without --no-cache-idle-slots


def kveval(*args: str) -> float:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "kveval.cli.cli", *args],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"kveval {' '.join(args[:3])} failed: {result.stderr[-2000:]}")
    return time.perf_counter() - started


def tables(base: Path, other: Path) -> dict[str, KldTable]:
    theirs = read_run(other).by_key()
    values: dict[str, list] = {}
    for item in read_run(base).items:
        mine = theirs.get(item.key)
        if item.logprobs and mine is not None and mine.logprobs:
            values.setdefault(item.task, []).extend(position_values(item.logprobs, mine.logprobs))
    return {task: kld_table(v) for task, v in values.items() if v}


def row(label: str, table: KldTable) -> str:
    k, dp = table.kl, table.dp_rms
    return (f"  {label:<22} {table.positions:>7} {table.kl_mean.value:10.6f} ± "
            f"{table.kl_mean.se:8.6f} {k['median']:10.6f} {k['p99']:9.5f} {k['p99.9']:9.5f} "
            f"{k['max']:8.4f} {100 * table.same_top.value:7.3f} ± {100 * table.same_top.se:5.3f}%"
            f" {100 * dp.value if dp else float('nan'):7.3f}%")


def floor_test(out: Path, label: str) -> str:
    """compare's own divergence test of a forced run against the two forced f16 restarts."""
    result = subprocess.run([sys.executable, "-m", "kveval.cli.cli", "compare",
                             str(out / "f16-a.jsonl"), str(out / f"{label}.jsonl"), "--noise",
                             str(out / "f16-b.jsonl"), "--json"], capture_output=True, text=True)
    try:
        tasks = json.loads(result.stdout)["tasks"]
    except (ValueError, KeyError):
        return "  (compare failed: " + result.stderr.strip()[-200:] + ")"
    found = []
    for task in tasks:
        test = (task.get("divergence") or {}).get("test") or {}
        if test:
            found.append(f"{task['task']}: KL {test.get('candidate_kl', 0):.6f} vs floor "
                         f"{test.get('noise_kl', 0):.6f}, p = {test.get('p_value', 1):.2g}")
    return "  " + "; ".join(found)


def perplexity_table(binary: Path, model: Path, text: Path, out: Path, gpu: int) -> None:
    base = out / "f16.kld"
    common = [str(binary), "-m", str(model), "-f", str(text), "-c", "512", "-ngl", str(gpu),
              "-fa", "on"]
    subprocess.run([*common, "--kl-divergence-base", str(base)], check=True,
                   capture_output=True)
    print("\nllama-perplexity --kl-divergence (GSM8K train text, f16 KV as the base):")
    for label, kv in (("f16 re-run", "f16"), ("q8_0", "q8_0"), ("q4_0", "q4_0")):
        done = subprocess.run([*common, "--kl-divergence-base", str(base), "--kl-divergence",
                               "-ctk", kv, "-ctv", kv], capture_output=True, text=True)
        lines = done.stdout + done.stderr
        (out / f"perplexity-{kv}-{label.split()[0]}.log").write_text(lines)
        wanted = ("Mean    KLD", "Median  KLD", "99.0%   KLD", "99.9%   KLD", "Maximum KLD",
                  "RMS Δp", "Same top p")
        found = [re.sub(r"\s+", " ", line.strip()) for line in lines.splitlines()
                 if line.strip().startswith(wanted)]
        print(f"  {label}: " + " | ".join(found), flush=True)


def gsm8k_text(data: Path, out: Path, chars: int = 130_000) -> Path:
    """GSM8K train questions and answers as plain text, about 30k tokens."""
    text, path = [], out / "gsm8k-train.txt"
    for line in (data / "train.jsonl").read_text().splitlines():
        item = json.loads(line)
        text.append(f"Question: {item['question']}\nAnswer: {item['answer']}\n")
        if sum(map(len, text)) > chars:
            break
    path.write_text("\n".join(text))
    return path


STAGES = ("perplexity", "baseline", *(label for label, _ in RUNS), DEFAULT_FLAGS, "report")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", type=Path, required=True)
    parser.add_argument("--model", type=Path)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--gsm8k", type=int, default=500)
    parser.add_argument("--prompts", type=int, default=50)
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--gpu-layers", type=int, default=0)
    parser.add_argument("--perplexity", type=Path, help="llama-perplexity, for its own table")
    parser.add_argument("--stages", default=",".join(STAGES),
                        help=f"which of {', '.join(STAGES)} to do (the output folder keeps the "
                             "files of earlier ones)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "bench-tf")
    args = parser.parse_args()
    if args.model is None:
        from kveval.run.engine_setup import bundled_model_path

        args.model = bundled_model_path()
    args.out.mkdir(parents=True, exist_ok=True)
    stages = args.stages.split(",")
    if "perplexity" in stages and args.perplexity:
        perplexity_table(args.perplexity, args.model, gsm8k_text(args.data, args.out), args.out,
                         args.gpu_layers)
    if "baseline" in stages:
        free_running(args)
    for label, kv in RUNS:
        if label in stages:
            forced_pass(args, label, kv)
    if DEFAULT_FLAGS in stages:
        forced_pass(args, DEFAULT_FLAGS, "f16", cache_idle_slots=True)
    if "report" in stages:
        report(args.out)


def free_running(args: argparse.Namespace) -> None:
    common = ["--logprobs", "5", "--concurrency", str(args.slots), "--overwrite"]
    prompts = ROOT / "kveval" / "data" / "prompts" / "regression.txt"
    with llama_server(args.model, "f16", args.slots, extra=("-ngl", str(args.gpu_layers)),
                      binary=args.server) as url:
        free = kveval("run", "--endpoint", url, "--task", "gsm8k", "--data", str(args.data),
                      "--limit", str(args.gsm8k), "-o", str(args.out / "base-gsm8k.jsonl"),
                      "--label", "base", *common)
        free += kveval("run", "--endpoint", url, "--task", "prompts", "--prompts", str(prompts),
                       "--limit", str(args.prompts), "-o", str(args.out / "base-prompts.jsonl"),
                       "--label", "base", *common)
    merge(args.out / "base-gsm8k.jsonl", args.out / "base-prompts.jsonl",
          args.out / "baseline.jsonl")
    (args.out / "free-running.s").write_text(f"{free}\n")
    print(f"free-running baseline (f16): {free:.1f} s for {args.gsm8k} GSM8K + "
          f"{args.prompts} prompt items, {args.slots} slots", flush=True)


def forced_pass(args: argparse.Namespace, label: str, kv: str,
                cache_idle_slots: bool = False) -> None:
    common = ["--logprobs", "5", "--concurrency", str(args.slots), "--overwrite"]
    free = float((args.out / "free-running.s").read_text())
    with llama_server(args.model, kv, args.slots, extra=("-ngl", str(args.gpu_layers)),
                      binary=args.server, cache_idle_slots=cache_idle_slots) as url:
        took = kveval("run", "--endpoint", url, "--teacher-force",
                      str(args.out / "baseline.jsonl"), "-o", str(args.out / f"{label}.jsonl"),
                      "--label", label, *common)
    forced = read_run(args.out / f"{label}.jsonl")
    positions = sum(len(i.logprobs["tokens"]) for i in forced.items if i.logprobs)
    print(f"teacher-forced {label}: {took:.1f} s ({took / free:.2f}x the free-running pass), "
          f"{positions} positions, {positions / took:.0f} positions/s", flush=True)


def merge(first: Path, second: Path, out: Path) -> None:
    """Two runs of one setup as one baseline file: the first header, with both tasks."""
    a, b = first.read_text().splitlines(), second.read_text().splitlines()
    header = json.loads(a[0])
    header["tasks"] = header["tasks"] + json.loads(b[0])["tasks"]
    out.write_text("\n".join([json.dumps(header), *a[1:], *b[1:]]) + "\n")


def report(out: Path) -> None:
    head = (f"  {'run':<22} {'pos':>7} {'mean KL ± se':>21} {'median':>10} {'p99':>9} "
            f"{'p99.9':>9} {'max':>8} {'same top ± se':>17} {'RMS Δp':>8}")
    for against in ("baseline", "f16-a"):
        name = "the free-running baseline" if against == "baseline" else "forced f16-a"
        print(f"\nKL table against {name} (top-5 bound):")
        print(head)
        for label, _ in RUNS:
            if label == against:
                continue
            for task, table in tables(out / f"{against}.jsonl", out / f"{label}.jsonl").items():
                print(row(f"{label} {task}", table))
    print("\ncompare's test against the noise floor (forced f16-b), base = forced f16-a:")
    for label in ("q8_0", "q4_0"):
        print(f"  {label}:" + floor_test(out, label))
    gate_table(out)
    print("\nkveval plan from a pilot of forced f16-a with two restarts (f16-b, f16-c):")
    for rise in ("6.1%", "10%"):
        print(f"  --detect-kl {rise}: " + plan_line(out, rise))


def gate_table(out: Path) -> None:
    """`gate --max-kl 0` against forced f16-a with the first n forced restarts as noise."""
    print("\ngate --max-kl 0, base forced f16-a, noise the first n of "
          f"{', '.join(RESTARTS)} (per task: divergence p, Holm-adjusted p):")
    for label in ("q8_0", "q4_0", RESTARTS[-1]):
        for n in range(1, len(RESTARTS) + (0 if label in RESTARTS else 1)):
            print(f"  {label:<6} n = {n}: " + gate_line(out, label, RESTARTS[:n]), flush=True)


def _json(args: list[str]) -> tuple[int, dict[str, Any] | None, str]:
    result = subprocess.run([sys.executable, "-m", "kveval.cli.cli", *args],
                            capture_output=True, text=True)
    try:
        return result.returncode, json.loads(result.stdout), result.stderr
    except ValueError:
        return result.returncode, None, result.stderr


def gate_line(out: Path, label: str, noise: tuple[str, ...]) -> str:
    args = ["gate", "--baseline", str(out / "f16-a.jsonl"), "--candidate",
            str(out / f"{label}.jsonl"), "--max-kl", "0", "--json"]
    for n in noise:
        args += ["--noise", str(out / f"{n}.jsonl")]
    code, data, err = _json(args)
    if data is None:
        return f"exit {code}: {err.strip()[-200:]}"
    found = []
    for task in data.get("tasks", []):
        test = ((task.get("divergence") or {}).get("test")) or {}
        seen = ((task.get("detectable") or {}).get("divergence") or {}).get("summary", "")
        found.append(f"{task['task']} p {test.get('p_value', float('nan')):.2g} (adjusted "
                     f"{test.get('adjusted_p') or float('nan'):.2g}; could have seen: {seen})")
    return f"exit {code}; " + "; ".join(found)


def plan_line(out: Path, rise: str) -> str:
    code, data, err = _json(["plan", str(out / "f16-a.jsonl"), "--noise",
                             str(out / "f16-b.jsonl"), "--noise", str(out / "f16-c.jsonl"),
                             "--detect-kl", rise, "--json"])
    if data is None:
        return f"exit {code}: {err.strip()[-200:]}"
    return "; ".join(f"{t['task']}: {t['summary']}" for t in data["tasks"]
                     if t["check"] == "divergence")


if __name__ == "__main__":
    main()
