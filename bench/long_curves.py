"""Length curves of the long-context probes on the embedded engine, as a Markdown table.

    python bench/long_curves.py --run [--out results/long]   # f16, f16 restart, q8_0, q4_0
    python bench/long_curves.py results/long/f16a.jsonl results/long/f16b.jsonl ...

With --run it first runs bench/long_suite.toml four times on the embedded llama.cpp engine
(about 15 to 60 minutes on 2 CPU cores, depending on the load). The first file is the
baseline: every other run's AUC recovery (paired bootstrap 95%) and sign test are against it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from kveval.formats.records import read_run
from kveval.judge.curves import Curve, task_curves
from kveval.judge.grid import length_label

SUITE = Path(__file__).with_name("long_suite.toml")
CONFIGS = (("f16a", "f16"), ("q4", "q4_0"), ("q8", "q8_0"), ("f16b", "f16"))


def run_all(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for label, kv in CONFIGS:
        path = out / f"{label}.jsonl"
        subprocess.run([sys.executable, "-m", "kveval.cli", "run", "--suite", str(SUITE),
                        "--kv-cache-type", kv, "--label", label, "-o", str(path), "--overwrite",
                        "--concurrency", "1"], check=False)
        paths.append(path)
    return paths


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
    sign = "no bucket differs" if v.sign.p is None else \
        f"lower in {v.sign.lower} of {v.sign.buckets}, p = {v.sign.p:.2g}"
    return recovery, sign


def table(paths: list[Path]) -> str:
    runs = [read_run(path) for path in paths]
    base = runs[0]
    by_run = [task_curves(r.items, None if r is base else base.items, base.header.label)
              for r in runs]
    lengths = sorted({b.length for found in by_run for c in found.values() for b in c.buckets})
    head = ["task", "run", *(length_label(n) for n in lengths), "AUC", "AUC recovery [95%]",
            "sign test"]
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


if __name__ == "__main__":
    main()
