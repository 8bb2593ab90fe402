"""Size and build time of the HTML page (`kveval report`) for a full GSM8K test run plus a
5 x 7 x 3 needle grid: baseline, restart and candidate, offline.

    .venv/bin/python bench/report_size.py [--data DIR]

Two cases: a typical candidate (a quarter of the GSM8K answers changed, answers of about
600 characters) and a worst case (every answer changed, 4,000-character answers). The
answers are GSM8K's reference solutions (padded to length) when the data folder is found,
else generated text. Goal: the page stays under 2 MB in both cases.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from kveval.formats.records import ItemRecord, RunHeader
from kveval.formats.writer import create_run

GOAL_BYTES = 2_000_000
QUESTIONS = 1319
LENGTHS = (4096, 8192, 16384, 32768, 65536)
DEPTHS = (0, 17, 33, 50, 67, 83, 100)
TRIALS = 3
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k"


def solutions(folder: Path) -> list[str]:
    path = folder / "test.jsonl"
    if path.is_file():
        with path.open(encoding="utf-8") as lines:
            return [json.loads(line)["answer"] for line in lines][:QUESTIONS]
    rng = random.Random(0)
    return [" ".join(f"step {rng.randint(1, 999)} = {rng.randint(1, 999)}." for _ in range(20))
            for _ in range(QUESTIONS)]


def header(label: str, dtype: str) -> RunHeader:
    return RunHeader(
        label=label, endpoint="http://127.0.0.1:8000/v1", model="qwen3-8b",
        tasks=[{"name": n, "api": "completions", "max_tokens": 512, "stop": [],
                "temperature": 0.0} for n in ("gsm8k", "needle")],
        sampling={"temperature": 0.0, "seed": 0}, concurrency=8,
        fingerprint={"metrics": {"cache_config_info": {"cache_dtype": dtype}}},
        created="2026-11-29T00:00:00Z", kveval_version="0.1.0")


def gsm8k(texts: list[str], length: int, changed: float, wrong: float,
          seed: int) -> list[ItemRecord]:
    rng = random.Random(seed)
    items = []
    for i, text in enumerate(texts):
        output = (text * (length // max(1, len(text)) + 1))[:length]
        if rng.random() < changed:
            cut = rng.randrange(len(output))
            output = output[:cut] + " Let me recompute: " + output[cut:][::-1]
        items.append(ItemRecord(
            task="gsm8k", item_id=f"gsm8k/test/{i:04d}", prompt_sha256=f"g{i}", request={},
            status="ok", output=output, finish_reason="stop", extracted="18", reference="18",
            correct=rng.random() >= wrong, correct_strict=rng.random() >= wrong))
    return items


def needle(lost: float, seed: int) -> list[ItemRecord]:
    rng = random.Random(seed)
    items = []
    for length in LENGTHS:
        for depth in DEPTHS:
            for trial in range(TRIALS):
                found = rng.random() >= lost * length / LENGTHS[-1]
                items.append(ItemRecord(
                    task="needle", item_id=f"needle/L{length}/D{depth}/T{trial}",
                    prompt_sha256=f"n{length}/{depth}/{trial}", request={}, status="ok",
                    output="The magic number is 4172." if found else "I cannot find it.",
                    reference="4172", correct=found,
                    meta={"target_tokens": length, "depth": depth, "trial": trial,
                          "needle_class": "exact" if found else "no_answer"}))
    return items


def write(path: Path, head: RunHeader, items: list[ItemRecord]) -> str:
    with create_run(path, head) as writer:
        for item in items:
            writer.append(item)
    return str(path)


def page_size(folder: Path, texts: list[str], length: int, changed: float) -> tuple[int, float]:
    from kveval.cli.cli import main

    runs = [write(folder / f"{label}.jsonl", header(label, dtype),
                  gsm8k(texts, length, change, wrong, seed) + needle(lost, seed))
            for label, dtype, change, wrong, lost, seed in (
                ("bf16a", "auto", 0.0, 0.1, 0.0, 1), ("bf16b", "auto", 0.03, 0.1, 0.05, 2),
                ("fp8", "fp8", changed, 0.13, 0.3, 3))]
    page = folder / "report.html"
    started = time.perf_counter()
    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
        main(["report", "--baseline", runs[0], "--candidate", runs[2], "--noise", runs[1],
              "-o", str(page)])
    return page.stat().st_size, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    texts = solutions(parser.parse_args().data)
    worst = 0
    for name, length, changed in (("typical", 600, 0.25), ("worst", 4000, 1.0)):
        with tempfile.TemporaryDirectory() as folder:
            size, seconds = page_size(Path(folder), texts, length, changed)
        worst = max(worst, size)
        print(f"{name}: {QUESTIONS} GSM8K items ({length}-character answers, "
              f"{changed:.0%} changed) + {len(LENGTHS)}x{len(DEPTHS)}x{TRIALS} needle grid: "
              f"page {size / 1e6:.2f} MB, built in {seconds:.1f} s", file=sys.stderr)
    print(f"largest page {worst / 1e6:.2f} MB (goal: under {GOAL_BYTES / 1e6:.0f} MB): "
          f"{'ok' if worst < GOAL_BYTES else 'TOO LARGE'}", file=sys.stderr)
    return 0 if worst < GOAL_BYTES else 1


if __name__ == "__main__":
    sys.exit(main())
