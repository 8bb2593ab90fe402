"""`kveval ab --detect POINTS`: the experiment sizes itself.

A pilot first: the baseline and one restart on `--pilot N` items a task. `kveval plan` reads
them and says the items and restarts at which a loss of POINTS would show at 80%
(judge/sizing.py); the pool grows to that (its runs extended on restarted servers, new
restarts added) and is planned again from the larger runs, until the plan asks no more, the
data has no more items, or `--budget` is spent (server starts, or hours after which no growth
begins). Then the candidates run at the pool's final size and the gate judges. The size
reached is kept in `DIR/ab.json` (`sizing`): a rerun resumes from it. bench/ab_detect.py
measures the whole procedure's false-alarm rate and power.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import click

from kveval.judge.sizing import Size, from_json, grows, starts_of, wanted
from kveval.run.ab.options import AbOptions, Sizing
from kveval.run.ab.plan import Folder, pool_labels

PILOT_STARTS = 2  # the pilot: the baseline and one restart


def _figures(folder: Folder) -> list[Any]:
    """Every server's figures (one that does not parse: one line, RunFileError)."""
    from kveval.formats.figures import read_optional

    found = [read_optional(path) for path in sorted((folder.root / "servers").glob("*.json"))]
    return [f for f in found if f is not None]


def spent(folder: Folder) -> tuple[int, float]:
    """Server starts made so far, and seconds since the first."""
    from kveval.formats.figures import timestamp

    starts = [s for f in _figures(folder) for s in f.starts]
    times = [t for s in starts if (t := timestamp(s.at)) is not None]
    return len(starts), (time.time() - min(times)) if times else 0.0


def over_budget(sizing: Sizing, folder: Folder, cost: int, candidates: int) -> str:
    """Why the next growth may not start, or ""."""
    made, seconds = spent(folder)
    if sizing.starts is not None and made + cost + candidates > sizing.starts:
        return (f"budget: {made} server starts made, the next growth needs {cost} and the "
                f"candidates {candidates}, over --budget {sizing.starts}")
    if sizing.seconds is not None and seconds >= sizing.seconds:
        return f"budget: {seconds / 3600:.2f} h spent, --budget {sizing.seconds / 3600:g}h"
    return ""


def plan_now(opts: AbOptions, size: Size) -> tuple[Any, dict[str, int | None]]:
    """The plan of the pool's runs, and each task's data size (its items at most)."""
    from kveval.cli import reading
    from kveval.cli.plan import available, pilot_plan
    from kveval.judge.plan import Targets

    folder = Folder(opts.output)
    labels = pool_labels(size.noise_runs)
    assert opts.sizing is not None
    base = str(folder.run(labels[0]))
    found, _ = pilot_plan(base, [str(folder.run(n)) for n in labels[1:]], None,
                          Targets(detect=opts.sizing.detect))
    return found, available(reading.load_run(base))


def grow(opts: AbOptions, size: Size, run_pass: Any, record: Any) -> tuple[Size, int]:
    """The pool grown until the plan asks no more or the budget ends it; the worst code."""
    assert opts.sizing is not None
    code = 0
    while True:
        code = max(code, run_pass(replace(opts, noise_runs=size.noise_runs, limit=size.items,
                                          candidates=())))
        found, data = plan_now(opts, size)
        nxt = wanted(found, size, opts.noise_runs, data)
        if not grows(nxt, size):
            size = replace(size, stopped="planned")
            break
        why = over_budget(opts.sizing, Folder(opts.output), starts_of(nxt, size),
                          len(opts.candidates))
        if why:
            size = replace(size, stopped=why)
            break
        size = nxt
        record(size, True)
    record(size, False)
    return size, code


def sized(opts: AbOptions, api_key: str | None) -> tuple[AbOptions, int, Size]:
    """The pool grown, then the candidates at its size: the options the gate reads, the
    worst run's exit code, and the size with why its growth ended."""
    from kveval.run.ab.experiment import send_pass
    from kveval.run.ab.state import read_state, record_sizing

    assert opts.sizing is not None
    folder = Folder(opts.output)
    state = read_state(folder.state)
    size = from_json(state.sizing if state else None) or Size(opts.sizing.pilot, PILOT_STARTS - 1)

    def record(found: Size, growing: bool) -> None:
        record_sizing(folder.state, found.to_json())
        if growing:
            click.echo(f"kveval ab: --detect: pass {found.passes}: {words(found)}", err=True)

    size, code = grow(opts, size, lambda o: send_pass(o, api_key), record)
    final = replace(opts, noise_runs=size.noise_runs, limit=size.items)
    return final, max(code, send_pass(final, api_key)), size


def words(size: Size) -> str:
    items = "the suite's own items" if size.items is None else f"{size.items} items a task"
    return f"{items}, {size.noise_runs} restart{'s' * (size.noise_runs != 1)}"


def budget(text: str | None) -> tuple[int | None, float | None]:
    """--budget 12 (server starts) or --budget 3h (hours after which no growth begins)."""
    from kveval.errors import UsageError

    if text is None:
        return None, None
    try:
        if text.lower().endswith("h"):
            hours = float(text[:-1])
            if 0 < hours < 1e4:
                return None, hours * 3600
        elif int(text) > 0:
            return int(text), None
    except ValueError:
        pass
    raise UsageError(f"--budget {text!r}: server starts (12) or hours (3h), above 0")


def sizing_of(given: dict[str, Any]) -> Sizing | None:
    from kveval.errors import UsageError

    detect, pilot, limit = given.pop("detect"), given.pop("pilot"), given.pop("budget")
    if detect is None:
        if limit is not None:
            raise UsageError("--budget bounds the growth of --detect: give --detect POINTS "
                             "too, or leave --budget out")
        return None
    starts, seconds = budget(limit)
    return Sizing(detect, pilot, starts, seconds)


def check_budget(opts: AbOptions) -> None:
    """--budget STARTS below what the pilot (the baseline and one restart) and the candidates
    make before any growth: one line."""
    from kveval.errors import UsageError

    starts = opts.sizing.starts if opts.sizing else None
    least = PILOT_STARTS + len(opts.candidates)
    if starts is not None and starts < least:
        raise UsageError(f"--budget {starts}: the pilot makes {PILOT_STARTS} server starts and "
                         f"the candidates {len(opts.candidates)}, {least} before any growth; "
                         f"give at least {least}, or hours (3h)")


def pilot_lines(sizing: Sizing) -> list[str]:
    return [f"--detect {sizing.detect:g}: a pilot first, the baseline and one restart on "
            f"{sizing.pilot} items a task; the plan then grows the pool (items, restarts) "
            "until a loss of that size would show at 80%, the data ends or the budget does; "
            "then each candidate at the pool's size"]
