"""What an item's types cannot say, checked as it is read: the long-context metadata judging
sorts and groups by, and log-probabilities that are probabilities.

A needle whose `depth` is "deep" or whose `target_tokens` is null would reach the length
curves as a value that sorts with nothing; a log-probability of 5.0, a top-K whose
probabilities sum past 1 or one token listed twice would be judged as a divergence. Each is
one line naming the field (the reader adds the file and line), never a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any

import msgspec

# A log-probability is at most 0; records round to 4 decimals, so one unit of that is allowed.
LOGPROB_TOLERANCE = 1e-4
# A top-K's probabilities sum to at most 1; rounding and a server's float32 softmax may
# overshoot by a little.
MASS_TOLERANCE = 1e-3
ARRAYS = ("tokens", "logprobs", "top_tokens", "top_logprobs")

LogProb = Annotated[float, msgspec.Meta(le=LOGPROB_TOLERANCE)]


class _LogProbs(msgspec.Struct):
    """The compact shape of run/logprobs.py, checked for types and signs in one pass."""

    tokens: list[str]
    logprobs: list[LogProb | None]
    top_tokens: list[list[str]]
    top_logprobs: list[list[LogProb]]
    k: Annotated[int, msgspec.Meta(ge=0)] | None = None


def _int(low: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low


def _number(low: float, high: float) -> Callable[[Any], bool]:
    return lambda v: (isinstance(v, (int, float)) and not isinstance(v, bool)
                      and low <= v <= high)


# Long-context metadata that judging sorts, groups and averages: what each must be.
META: dict[str, tuple[Callable[[Any], bool], str]] = {
    "target_tokens": (_int(1), "an integer >= 1"),
    "measured_tokens": (_int(0), "an integer >= 0"),
    "depth": (_number(0, 100), "a number from 0 to 100"),
    "score": (_number(0, 1), "a number from 0 to 1"),
}
META_KEYS = frozenset(META)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def meta_problem(meta: Mapping[str, Any]) -> str | None:
    """None when the metadata is fine, else `meta.depth: expected ..., got 'deep'`. (Its
    nesting the reader bounds with the rest of the line.)"""
    if not meta or META_KEYS.isdisjoint(meta):
        return None
    for key in META_KEYS.intersection(meta):
        ok, wanted = META[key]
        if not ok(meta[key]):
            return f"meta.{key}: expected {wanted}, got {_shown(meta[key])}"
    return None


def record_problem(meta: Mapping[str, Any] | None, logprobs: Any) -> str | None:
    """What reading refuses in an item beyond its types, or None: the one check every item
    passes on read (formats/reader.py) and every server reply before it is written
    (run/client.py `checked`)."""
    problem = meta_problem(meta) if meta and not META_KEYS.isdisjoint(meta) else None
    return problem or (logprobs_problem(logprobs) if logprobs is not None else None)


def logprobs_problem(lp: Any) -> str | None:
    """None when `lp` is the compact shape of probabilities, else what is wrong with it."""
    if lp is None:
        return None
    if not isinstance(lp, Mapping):
        return "logprobs: expected an object"
    try:
        msgspec.convert(lp, _LogProbs)
    except msgspec.ValidationError as exc:
        what, _, where = str(exc).replace("`", "").partition(" - at $")
        what = f"{what[:1].lower()}{what[1:]}"
        if "<=" in what:
            what += " (a log-probability is at most 0)"
        return f"logprobs{where}: {what}"
    return _shape_problem(lp) or _mass_problem(lp["top_tokens"], lp["top_logprobs"])


def _shape_problem(lp: Mapping[str, Any]) -> str | None:
    lengths = [len(lp[key]) for key in ARRAYS]
    if len(set(lengths)) != 1:
        return (f"logprobs: {', '.join(ARRAYS)} differ in length "
                f"({', '.join(map(str, lengths))}); they are parallel arrays")
    tokens, values = lp["top_tokens"], lp["top_logprobs"]
    widths = list(map(len, tokens))
    if widths != list(map(len, values)):
        row = next(i for i, (a, b) in enumerate(zip(tokens, values, strict=True))
                   if len(a) != len(b))
        return (f"logprobs.top_logprobs[{row}]: {len(values[row])} values for "
                f"{len(tokens[row])} top_tokens")
    if widths != list(map(len, map(set, tokens))):
        row = next(i for i, r in enumerate(tokens) if len(set(r)) != len(r))
        return f"logprobs.top_tokens[{row}]: a token listed twice in one top-K"
    return None


def _mass_problem(tokens: Sequence[Sequence[str]], values: Sequence[Sequence[float]]
                  ) -> str | None:
    if not values:
        return None
    masses = _masses(values)
    worst = max(range(len(masses)), key=masses.__getitem__)
    if masses[worst] > 1 + MASS_TOLERANCE:
        return (f"logprobs.top_logprobs[{worst}]: the top-K's probabilities sum to "
                f"{masses[worst]:.4g}, above 1")
    return None


def _masses(values: Sequence[Sequence[float]]) -> list[float]:
    """Each row's probability mass; numpy for rows of one width (the usual case)."""
    if len(set(map(len, values))) == 1 and len(values) > 8:
        import numpy as np

        return list(np.exp(np.asarray(values, dtype=float)).sum(axis=1))
    return [math.fsum(map(math.exp, row)) for row in values]
