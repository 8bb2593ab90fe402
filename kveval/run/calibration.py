"""Prompt sizes without a tokenizer: a linear model of tokens on characters and digits,
fitted from probe requests' usage.prompt_tokens, and a counter that measures a prompt once
and sizes near-identical prompts (the cells of one haystack) from it. Pure: the requests
are the caller's (run/tokens.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kveval.adapters.base import Message, TokenCounter
from kveval.errors import EndpointError

HELLO = "Hello."
_DIGITS = "0123456789"


def roles_of(messages: Sequence[Message]) -> tuple[str, ...]:
    return tuple(m.get("role", "user") for m in messages)


def features(messages: Sequence[Message]) -> tuple[int, int]:
    """(characters, digits) of the messages' texts."""
    texts = [m.get("content", "") for m in messages]
    return sum(map(len, texts)), sum(t.count(d) for t in texts for d in _DIGITS)


@dataclass(frozen=True)
class LinearModel:
    """tokens = intercept + per_char * characters + per_digit * digits"""

    intercept: float
    per_char: float
    per_digit: float

    def tokens(self, chars: int, digits: int) -> float:
        return self.intercept + self.per_char * chars + self.per_digit * digits


def linear_counter(model: LinearModel) -> TokenCounter:
    """A pure counter from a fitted (or assumed) linear model, for offline building."""
    return lambda messages: round(model.tokens(*features(messages)))


def calibration_texts() -> list[str]:
    """Probe texts like the ones kveval sends: its own prose, with and without numbers."""
    from kveval.adapters.prose import prose

    stream = prose("kveval/calibration")
    rng = random.Random("kveval/calibration/numbers")
    short, long_ = stream.count_for(2000), stream.count_for(10000)

    def prose_text(start: int, stop: int) -> str:
        return " ".join(stream.sentences(start, stop))

    def number() -> str:
        return f"0.{rng.randrange(1000, 10000)}" if rng.random() < 0.6 else \
            str(rng.randrange(1_000_000, 10_000_000))

    mixed = " ".join(f"{s} {number()}." for s in stream.sentences(0, short))
    numbers = " ".join(number() for _ in range(300))
    return [HELLO, prose_text(0, short), prose_text(short, long_), mixed, numbers]


def fit_linear(points: Sequence[tuple[int, int, int]]) -> LinearModel:
    """Least squares of tokens on (1, chars, digits); (1, chars) when digits never vary."""
    rows = [(1.0, float(c), float(d)) for c, d, _ in points]
    ys = [float(t) for _, _, t in points]
    solved = _solve_normal(rows, ys)
    if solved is not None and solved[1] > 0 and solved[2] >= 0:
        return LinearModel(*solved)
    pair = _solve_normal([(1.0, c) for _, c, _ in rows], ys)
    if pair is None or pair[1] <= 0:
        raise EndpointError("cannot calibrate prompt sizes: probe requests gave no usable "
                            "usage.prompt_tokens")
    return LinearModel(pair[0], pair[1], 0.0)


def _solve_normal(rows: Sequence[Sequence[float]], ys: Sequence[float]) -> list[float] | None:
    """Least squares of ys on rows (numpy's lstsq); None when the columns are dependent."""
    import numpy as np

    solution, _, rank, _ = np.linalg.lstsq(np.asarray(rows), np.asarray(ys), rcond=None)
    return [float(w) for w in solution] if rank == len(rows[0]) else None


def _pieces(messages: Sequence[Message]) -> frozenset[int]:
    """The texts' sentences (hashed): what two prompts built from one haystack share."""
    return frozenset(hash(piece) for m in messages for piece in m.get("content", "").split(". "))


@dataclass(frozen=True)
class _Measured:
    roles: tuple[str, ...]
    chars: int
    digits: int
    tokens: int
    pieces: frozenset[int]


class Calibrated:
    """Counts without a tokenizer: a prompt is measured exactly (one request with
    max_tokens 1, read usage.prompt_tokens) unless it shares at least ANCHOR_SHARE of its
    sentences with one already measured; then it is that count plus the linear model's
    change for the characters and digits that differ. Sizing a grid cell thus measures
    about once per length and trial; the model's error only touches the small difference.
    """

    ANCHOR_SHARE = 0.9

    def __init__(self, measure: Callable[[Sequence[Message]], int], slopes: LinearModel) -> None:
        self._measure = measure
        self.slopes = slopes
        self._measured: list[_Measured] = []

    def __call__(self, messages: Sequence[Message]) -> int:
        roles = roles_of(messages)
        chars, digits = features(messages)
        pieces = _pieces(messages)
        anchor = self._anchor(roles, chars, pieces)
        if anchor is None:
            tokens = self._measure(messages)
            self._measured.append(_Measured(roles, chars, digits, tokens, pieces))
            return tokens
        change = self.slopes.per_char * (chars - anchor.chars) \
            + self.slopes.per_digit * (digits - anchor.digits)
        return anchor.tokens + round(change)

    def _anchor(self, roles: tuple[str, ...], chars: int, pieces: frozenset[int],
                ) -> _Measured | None:
        best, best_share = None, 0.0
        for seen in self._measured:
            if seen.roles != roles or abs(seen.chars - chars) > (1 - self.ANCHOR_SHARE) * chars:
                continue
            share = len(pieces & seen.pieces) / max(len(pieces), len(seen.pieces))
            if share > best_share:
                best, best_share = seen, share
        return best if best_share >= self.ANCHOR_SHARE else None


