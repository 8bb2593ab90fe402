"""The pace of one `kveval ab` run: each stretch of sending's items, output tokens and wall
clock, with the host's 1-minute load average at its start and end and its CPU count (the
trade says where runs were timed under different loads: judge/trade.py)."""

from __future__ import annotations

import os
from pathlib import Path

from kveval.formats.figures import RunFigures, Sending
from kveval.formats.numbers import count


def answered(path: Path) -> tuple[int, int, list[float], int]:
    """Answered items on file, their completion tokens and latencies, and the concurrency
    the run was sent at (the server's slots where the user gave none)."""
    from kveval.formats.reader import read_run

    if not path.exists():
        return 0, 0, [], 0
    run = read_run(path)
    ok = [item for item in run.items if item.ok]
    tokens = sum(count((item.usage or {}).get("completion_tokens")) or 0 for item in ok)
    return (len(ok), tokens, [item.latency_s for item in ok if item.latency_s is not None],
            run.header.concurrency)


def _pct(values: list[float], q: float) -> float | None:
    import numpy as np

    return float(np.percentile(values, q)) if values else None


def host_load() -> float | None:
    """The host's 1-minute load average now, where the system tells it."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def pace(before: tuple[int, int], path: Path, wall_s: float, old: RunFigures | None,
         loads: tuple[float | None, float | None]) -> RunFigures:
    """The run's figures with this stretch of sending added (`loads`: the host's load at
    its start and end)."""
    items, tokens, latencies, concurrency = answered(path)
    load = (loads[0], loads[1]) if loads[0] is not None and loads[1] is not None else None
    sent = (*(old.sent if old else ()), Sending(items - before[0], tokens - before[1], wall_s,
                                                load, os.cpu_count()))
    return RunFigures(concurrency, sent, items, _pct(latencies, 50), _pct(latencies, 95))
