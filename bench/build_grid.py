"""Time to build the default long-context grid extended to 128k tokens, offline.

    .venv/bin/python bench/build_grid.py

Builds needle, needle-multikey and evidence on lengths 1k..128k x 7 depths x 3 trials
(168 items each) with an offline linear token counter (about 4 characters a token, the
shape of a calibrated counter), from a cold haystack cache. Prints, per task, the build
time, the items, how many counts sizing asked for (with a server: one /tokenize call
each), and the prompt text made. Goal: under 1 second per task.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from kveval.adapters import evidence, needle
from kveval.adapters.base import Adapter, BuildContext, Message, TaskSpec
from kveval.adapters.prose import prose
from kveval.run.calibration import LinearModel, linear_counter

LENGTHS = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
GOAL_S = 1.0


def bench(adapter: Adapter) -> tuple[float, int, int, int]:
    counter = linear_counter(LinearModel(intercept=20.0, per_char=0.25, per_digit=0.4))
    counts = 0

    def count(messages: Sequence[Message]) -> int:
        nonlocal counts
        counts += 1
        return counter(messages)

    spec = TaskSpec(name=adapter.name, adapter=adapter.name, api="chat", max_tokens=32,
                    params={"lengths": LENGTHS})
    prose.cache_clear()
    started = time.perf_counter()
    items = adapter.build(spec, BuildContext(count_tokens=count))
    elapsed = time.perf_counter() - started
    chars = sum(len(m["content"]) for item in items for m in item.messages or ())
    return elapsed, len(items), counts, chars


def main() -> None:
    print(f"default grid extended to 128k: lengths {', '.join(f'{n // 1024}k' for n in LENGTHS)}"
          f" x 7 depths x 3 trials; offline linear counter; cold haystack cache")
    worst = 0.0
    for adapter in (needle.ADAPTER, needle.MULTIKEY_ADAPTER, evidence.ADAPTER):
        elapsed, items, counts, chars = bench(adapter)
        worst = max(worst, elapsed)
        print(f"  {adapter.name:<16} {elapsed:6.3f} s  {items} items  {counts} counts  "
              f"{chars / 1e6:5.1f} MB of prompt text")
    verdict = "met" if worst < GOAL_S else "MISSED"
    print(f"goal: under {GOAL_S:.0f} s per task: {verdict} (slowest {worst:.3f} s)")


if __name__ == "__main__":
    main()
