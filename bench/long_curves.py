"""Length curves of the long-context probes on the embedded engine, as a Markdown table.

    python bench/long_curves.py --run [--out results/long]   # f16, f16 restart, q8_0, q4_0
    python bench/long_curves.py results/long/f16a.jsonl results/long/f16b.jsonl ...

With --run it first runs bench/long_suite.toml four times on the embedded llama.cpp engine
(f16, an f16 restart with --order shuffle, q8_0, q4_0; one to four minutes an item on 2 loaded
CPU cores, 14 items a run). The first file is the baseline: every other run's AUC recovery
(paired bootstrap 95%) and the paired test of each length are against it. Below the table:
how far each task's prompts landed from their target lengths (measured_tokens against the server's
usage.prompt_tokens, and that against the target).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from kveval.formats.reader import read_run
from kveval.formats.records import ItemRecord
from kveval.judge.curves import Curve, task_curves
from kveval.judge.grid import length_label

SUITE = Path(__file__).with_name("long_suite.toml")
# label, KV cache type, request order: the f16 restart sends the items shuffled, so its
# differences from the first f16 run are the noise floor (batching, threads, cache state).
CONFIGS = (("f16a", "f16", "data"), ("f16b", "f16", "shuffle"), ("q8", "q8_0", "data"),
           ("q4", "q4_0", "data"))


def run_one(out: Path, label: str, kv: str, order: str) -> Path:
    path = out / f"{label}.jsonl"
    subprocess.run([sys.executable, "-m", "kveval.cli", "run", "--suite", str(SUITE),
                    "--kv-cache-type", kv, "--label", label, "-o", str(path), "--overwrite",
                    "--concurrency", "1", "--order", order], check=False)
    return path


def run_all(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    return [run_one(out, *config) for config in CONFIGS]


def _cell(curve: Curve, length: int) -> str:
    found = next((b for b in curve.buckets if b.length == length), None)
    return "-" if found is None or found.mean is None else f"{found.mean:.2f}"


def _versus(curve: Curve) -> tuple[str, str]:
    v = curve.versus
    if v is None:
        return "(baseline)", "-"
    r = v.recovery
    recovery = "-" if r.value is None else f"{100 * r.value:.1f}%"
    if r.low is not None and r.high is not None:
        recovery += f" [{100 * r.low:.1f}, {100 * r.high:.1f}]"
    lower = [p for p in v.paired if p.lost]
    tested = ", ".join(f"{length_label(p.length or 0)}: {p.lost} lower, p = {p.p_value:.2g}"
                       for p in lower) or "no length lower"
    return recovery, tested


def table(paths: list[Path]) -> str:
    runs = [read_run(path) for path in paths]
    base = runs[0]
    by_run = [task_curves(r.items, None if r is base else base.items, base.header.label)
              for r in runs]
    lengths = sorted({b.length for found in by_run for c in found.values() for b in c.buckets})
    head = ["task", "run", *(length_label(n) for n in lengths), "AUC", "AUC recovery [95%]",
            "paired test per length (one-sided)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for task in by_run[0]:
        for r, found in zip(runs, by_run, strict=True):
            curve = found.get(task)
            if curve is None:
                continue
            auc = "-" if curve.auc is None else f"{curve.auc:.3f}"
            cells = [task, r.header.label, *(_cell(curve, n) for n in lengths), auc,
                     *_versus(curve)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _offsets(items: list[ItemRecord]) -> tuple[list[float], list[float], list[int]]:
    """Per sized item: |measured - served| / served, |served - target| / target, served."""
    to_served, to_target, served = [], [], []
    for item in items:
        measured, target = item.meta.get("measured_tokens"), item.meta.get("target_tokens")
        tokens = (item.usage or {}).get("prompt_tokens")
        if isinstance(measured, int) and isinstance(target, int) and isinstance(tokens, int):
            to_served.append(abs(measured - tokens) / tokens)
            to_target.append(abs(tokens - target) / target)
            served.append(tokens)
    return to_served, to_target, served


def sizing(paths: list[Path]) -> str:
    """How close each task's prompts came to their target lengths, over all the runs."""
    items = [item for path in paths for item in read_run(path).items if item.status == "ok"]
    lines = []
    for task in sorted({item.task for item in items}):
        to_served, to_target, served = _offsets([i for i in items if i.task == task])
        if not served:
            lines.append(f"{task}: no item carries measured_tokens and usage.prompt_tokens")
            continue
        lines.append(f"{task}: {len(served)} prompts of {min(served)} to {max(served)} tokens; "
                     f"measured vs usage.prompt_tokens at most {100 * max(to_served):.2f}% off, "
                     f"usage.prompt_tokens vs target at most {100 * max(to_target):.2f}% off")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path, help="run files; the first is the baseline")
    parser.add_argument("--run", action="store_true", help="run the four configurations first")
    parser.add_argument("--out", type=Path, default=Path("results/long"))
    args = parser.parse_args()
    paths = run_all(args.out) if args.run else args.runs
    if len(paths) < 1:
        parser.error("give run files, or --run")
    print(table(paths))
    print()
    print(sizing(paths))


if __name__ == "__main__":
    main()
