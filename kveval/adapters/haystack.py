"""The long-context grid: length x depth x trial, fitted to lengths in the server's tokens.

Shared by the long-context adapters: the grid of cells they build, and sizing every cell's
filler so the measured prompt lands within 2% below its target length. The filler is the
seeded prose of kveval.adapters.prose.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kveval.adapters.base import BuildContext, Message, TaskSpec, TokenCounter
from kveval.adapters.prose import Prose, prose
from kveval.errors import UsageError

# ---------------------------------------------------------------- sizing in tokens


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A rough count for building without a server: 4 characters a token, 8 per message."""
    return sum(8 + len(m.get("content", "")) // 4 for m in messages)


@dataclass(frozen=True)
class Fit:
    count: int  # filler sentences
    tokens: int  # the measured prompt at that count


def token_window(target: int, tolerance: float) -> tuple[int, int]:
    """The accepted measured lengths: within `tolerance` below the target, never above it."""
    return math.ceil(target * (1.0 - tolerance)), target


def fit_filler(
    measure: Callable[[int], int],
    stream: Prose,
    target: int,
    start: int | None = None,
    tolerance: float = 0.02,
    max_calls: int = 12,
) -> Fit:
    """The filler size whose measured prompt lands in [target*(1-tolerance), target].

    `measure(n)` counts the whole prompt built with n filler sentences (one call to the
    server's tokenizer). Secant steps on characters -> tokens aim at the middle of the
    window; a warm `start` (the size that fit a sibling item) usually needs one call.
    When no size fits (sentences too coarse, or the task alone exceeds the target) the
    largest size not above the target is returned, or 0.
    """
    low, high = token_window(target, tolerance)
    aim = (low + high) / 2
    seen: dict[int, int] = {}
    n = 0 if start is None else max(start, 0)
    for _ in range(max_calls):
        seen[n] = tokens = measure(n)
        if low <= tokens <= high:
            return Fit(n, tokens)
        below = max((k for k, t in seen.items() if t < low), default=None)
        above = min((k for k, t in seen.items() if t > high), default=None)
        if above is not None and (above == 0 or (below is not None and above - below <= 1)):
            break
        n = _next_guess(stream, seen, aim, below, above)
    fitting = [k for k, t in seen.items() if t <= high]
    best = max(fitting) if fitting else 0
    return Fit(best, seen[best] if best in seen else measure(best))


def _next_guess(stream: Prose, seen: dict[int, int], aim: float,
                below: int | None, above: int | None) -> int:
    """Interpolate (or extrapolate) tokens over characters; stay strictly inside the bracket."""
    other: int | None
    if below is not None and above is not None:
        ref, other = below, above
    else:
        ordered = sorted(seen, key=lambda k: abs(seen[k] - aim))
        ref = ordered[0]
        other = ordered[1] if len(ordered) > 1 else None
    slope = 0.25  # tokens per character of English-like prose, until two points say more
    if other is not None and stream.chars(other) != stream.chars(ref):
        measured = (seen[other] - seen[ref]) / (stream.chars(other) - stream.chars(ref))
        slope = measured if measured > 0 else slope
    guess = stream.count_for(stream.chars(ref) + (aim - seen[ref]) / slope)
    lo = below + 1 if below is not None else 0
    hi = above - 1 if above is not None else max(guess, lo)
    guess = min(max(guess, lo), hi)
    while guess in seen and lo <= hi:  # never measure the same size twice
        guess = guess + 1 if seen[guess] < aim else guess - 1
        if guess < lo or guess > hi:
            return (lo + hi) // 2
    return guess


# ---------------------------------------------------------------- the length x depth grid

DEFAULT_LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768)
DEFAULT_DEPTHS = (0, 10, 25, 50, 75, 90, 100)
DEFAULT_TRIALS = 3
DEFAULT_SEED = 1234
TOLERANCE = 0.02  # the prompt lands within 2% of its target length, never above it
# Sizing aims within 1.5%: a calibrated counter's estimates (kveval.run.tokens) then still land
# within 2% of what the server counts.
SIZING_WINDOW = 0.015
_UNITS = {"": 1, "k": 1024, "m": 1024 * 1024}


def parse_lengths(text: str) -> list[int]:
    """"4k,16k,128k,3000" -> [4096, 16384, 131072, 3000] (k = 1024); repeats dropped."""
    lengths: list[int] = []
    parts = [part.strip().lower() for part in str(text).split(",")]
    for part in parts:
        unit = part[-1:] if part[-1:] in ("k", "m") else ""
        number = part[: len(part) - len(unit)].strip()
        try:
            value = float(number) * _UNITS[unit] if number else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 1 or value != int(value):
            raise UsageError(f"lengths {text!r}: {part!r} is not a length in tokens "
                             "(e.g. 4k,16k,128k,3000; k = 1024)")
        if int(value) not in lengths:
            lengths.append(int(value))
    return lengths


def parse_depths(text: str) -> list[float]:
    """"0,25,50" -> [0, 25, 50]: percents of the document from its start."""
    try:
        depths = [float(part) for part in str(text).split(",")]
    except ValueError:
        raise UsageError(f"depths {text!r}: expected percents such as 0,25,50,75,100") from None
    return [_depth(d, text) for d in depths]


def _depth(value: Any, where: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100:
        raise UsageError(f"depths {where!r}: each depth is a percent from 0 to 100")
    return float(value)


def _lengths_param(value: Any) -> list[int]:
    if isinstance(value, str):
        return parse_lengths(value)
    if not isinstance(value, (list, tuple)) or not value:
        raise UsageError(f"lengths {value!r}: expected a list such as [4096, 16384] or \"4k,16k\"")
    found: list[int] = []
    for entry in value:
        if isinstance(entry, bool) or not isinstance(entry, (int, str)):
            raise UsageError(f"lengths {value!r}: {entry!r} is not a length in tokens")
        found += parse_lengths(str(entry))
    return found


def _depths_param(value: Any) -> list[float]:
    if isinstance(value, str):
        return parse_depths(value)
    if not isinstance(value, (list, tuple)) or not value:
        raise UsageError(f"depths {value!r}: expected a list of percents such as [0, 50, 100]")
    return [_depth(entry, value) for entry in value]


def _positive_int(params: dict[str, Any], key: str, default: int) -> int:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{key} = {value!r}: expected a whole number of at least 1")
    return value


@dataclass(frozen=True)
class Cell:
    """One item's place in the grid: target length in tokens, depth in percent, trial."""

    length: int
    depth: float
    trial: int

    @property
    def label(self) -> str:
        depth = f"{self.depth:g}"
        return f"L{self.length}/D{depth}/T{self.trial}"

    @property
    def depth_value(self) -> int | float:
        """The depth as recorded: 50 rather than 50.0 when whole."""
        return int(self.depth) if self.depth == int(self.depth) else self.depth


@dataclass(frozen=True)
class Grid:
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    trials: int
    seed: int | str

    @classmethod
    def from_spec(cls, spec: TaskSpec) -> Grid:
        params = spec.params
        lengths = _lengths_param(params.get("lengths", list(DEFAULT_LENGTHS)))
        depths = _depths_param(params.get("depths", list(DEFAULT_DEPTHS)))
        seed = params.get("seed", DEFAULT_SEED)
        if isinstance(seed, bool) or not isinstance(seed, (int, str)):
            raise UsageError(f"seed = {seed!r}: expected a whole number")
        return cls(tuple(sorted(set(lengths))), tuple(sorted(set(depths))),
                   _positive_int(params, "trials", DEFAULT_TRIALS), seed)

    def fits(self, length: int, spec: TaskSpec, max_context: int | None) -> bool:
        return max_context is None or length <= max_context - spec.max_tokens

    def cells(self, spec: TaskSpec, max_context: int | None) -> list[Cell]:
        """Every cell whose length fits the server, by length, depth and trial; spec.limit
        keeps the first N."""
        cells = [Cell(length, depth, trial) for length in self.lengths
                 if self.fits(length, spec, max_context)
                 for depth in self.depths for trial in range(self.trials)]
        return cells if spec.limit is None else cells[: spec.limit]

    def stream(self, trial: int) -> Prose:
        return prose(f"{self.seed}/haystack/T{trial}")

    def rng(self, variant: str, cell: Cell) -> random.Random:
        """The seeded source of a cell's own content (keys, values, records)."""
        return random.Random(f"{self.seed}/{variant}/{cell.label}")


def skipped_lengths(spec: TaskSpec, ctx: BuildContext) -> list[int]:
    """The lengths above the server's context minus the answer budget: not built."""
    grid = Grid.from_spec(spec)
    return [n for n in grid.lengths if not grid.fits(n, spec, ctx.max_context)]


# ---------------------------------------------------------------- sizing a whole grid

Layout = Callable[[int], tuple[Message, ...]]  # filler sentences -> the request's messages


@dataclass(frozen=True)
class Sized:
    cell: Cell
    messages: tuple[Message, ...]
    fit: Fit


def size_grid(
    jobs: Sequence[tuple[Cell, Prose, Layout]],
    count: TokenCounter | None,
    task: str,
) -> list[Sized]:
    """Fit each cell's filler to its length; a cell starts from its trial's last fit at the
    same length (or the previous length, scaled), so most cells cost one count."""
    counter = count or estimate_tokens
    last: dict[tuple[int, int], int] = {}
    sized: list[Sized] = []
    for cell, stream, layout in jobs:
        start = _warm_start(last, cell)
        fit = fit_filler(_measure(counter, layout), stream, cell.length, start, SIZING_WINDOW)
        if fit.tokens > cell.length:
            raise UsageError(f"{task}: length {cell.length} is too short: the task's own text "
                             f"takes {fit.tokens} tokens")
        last[(cell.length, cell.trial)] = fit.count
        sized.append(Sized(cell, layout(fit.count), fit))
    return sized


def _measure(counter: TokenCounter, layout: Layout) -> Callable[[int], int]:
    return lambda n: counter(layout(n))


def _warm_start(last: dict[tuple[int, int], int], cell: Cell) -> int | None:
    if (cell.length, cell.trial) in last:
        return last[(cell.length, cell.trial)]
    shorter = [length for length, trial in last if trial == cell.trial and length < cell.length]
    if not shorter:
        return None
    nearest = max(shorter)
    return round(last[(nearest, cell.trial)] * cell.length / nearest)
