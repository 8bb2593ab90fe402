"""What the one door out costs: microseconds to write one run-file line (formats/writer.py
`line`, through kveval/sink.py) of an 8-shot GSM8K item, with no secret registered and with
an API key and URL credentials registered (every spelling of each: masking.family), and the
same for a line holding non-ASCII text and a percent-encoded run of characters (where the
patterns that catch mixed spellings run).

    python bench/masking_cost.py [--tree DIR] [--lines 3000]

`--tree` measures another code tree (say, the one before the door) the same way.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHOT = ("Question: Natalia sold clips to 48 of her friends in April, and then she sold half as "
        "many clips in May. How many clips did Natalia sell altogether?\nAnswer: ")


def record(output: str) -> Any:
    from kveval.formats.records import ItemRecord

    return ItemRecord(task="gsm8k", item_id="gsm8k/test/0001", prompt_sha256="x" * 64,
                      status="ok", request={"model": "m", "prompt": SHOT * 8,
                                            "max_tokens": 256, "temperature": 0.0},
                      output=output, finish_reason="stop")


def per_line(item: Any, count: int) -> float:
    from kveval.formats.writer import line

    started = time.perf_counter()
    for _ in range(count):
        line(item)
    return (time.perf_counter() - started) / count * 1e6


def register() -> None:
    from kveval import masking, secret_sources

    key, url = "sk-very-secret-key-1234", "http://alice:p%40ss%20w%2Frd@h/v1"
    if hasattr(masking, "register_secrets"):
        masking.register_secrets([key, *secret_sources.url_secrets(url)])
    else:  # a tree before the door: literal forms only
        masking.register(masking.forms(key, url))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--lines", type=int, default=3000)
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    items = {"ASCII answer": record("Natalia sold 48/2 = 24 clips in May.\n#### 72"),
             "non-ASCII, %XX in it": record("Natalia verkaufte 24 Clips im Mai (50%25).\n#### 72")}
    rows = {name: [per_line(item, args.lines)] for name, item in items.items()}
    register()
    for name, item in items.items():
        rows[name].append(per_line(item, args.lines))
    print(f"run-file line of {len(SHOT) * 8:,} prompt characters, tree {args.tree}")
    print(f"{'answer':<22} {'no secret':>10} {'key + URL':>10}")
    for name, (bare, masked) in rows.items():
        print(f"{name:<22} {bare:>8.0f}us {masked:>8.0f}us")


if __name__ == "__main__":
    main()
