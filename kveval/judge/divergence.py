"""How far each next-token distribution moved: KL, top-1 agreement, log-probability change.

Positions: a pair of runs is compared token by token while both had produced the same
tokens so far, so both distributions are conditioned on the same text. That is every
position up to and including the first position where the tokens differ (the two runs saw
the same prefix there, and chose differently). A teacher-forced run (`kveval run
--teacher-force BASE`) holds the baseline's own answer tokens, so it is compared over the
whole answer.

The KL estimator: judge/kl_bound.py `kl_topk`, a lower bound of the full-vocabulary
KL(baseline || other) from both runs' top-K and, where both records hold it, the baseline
token's own log-probability; it does not vanish when the two top-K sets are disjoint.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kveval.errors import RunFileError
from kveval.judge.kl_bound import kl_topk
from kveval.judge.kld import KldTable, kld_table


@dataclass(frozen=True)
class Position:
    """One position's comparison."""

    kl: float
    top1_same: bool
    p_base: float | None = None  # the baseline token's probability under the baseline
    p_other: float | None = None  # ... and under the other run; None: not known there

    @property
    def same_top(self) -> bool:
        return self.top1_same

    @property
    def dlogp(self) -> float | None:
        """|change| of the baseline token's log-probability; None: unknown."""
        if not self.p_base or not self.p_other:
            return None
        return abs(math.log(self.p_base) - math.log(self.p_other))


@dataclass(frozen=True)
class ItemDivergence:
    key: tuple[str, str]
    positions: tuple[Position, ...]
    flip_margin: float | None  # baseline top-1 minus top-2 log-probability where tokens differ

    @property
    def kl_mean(self) -> float:
        return float(np.mean([p.kl for p in self.positions]))


@dataclass(frozen=True)
class Divergence:
    """One run against the baseline, over the items both recorded log-probabilities for."""

    items: int
    positions: int
    kl_mean: float | None  # over all positions
    kl_p99: float | None
    top1_agreement: float | None
    dlogp_mean: float | None
    flip_margin_median: float | None  # over the items whose tokens differ somewhere
    flips: int  # items whose tokens differ
    kld: KldTable | None = None  # llama-perplexity --kl-divergence's table of the positions


def top_distribution(lp: Mapping[str, Any], i: int) -> dict[str, float]:
    """Position i's top-K tokens -> probabilities."""
    pairs = zip(lp["top_tokens"][i], lp["top_logprobs"][i], strict=False)
    return {t: math.exp(v) for t, v in pairs}


def _top1(lp: Mapping[str, Any], i: int) -> str | None:
    tops = lp["top_tokens"][i]
    return tops[0] if tops else None


def token_logprob(lp: Mapping[str, Any], i: int, token: str) -> float | None:
    if lp["tokens"][i] == token and lp["logprobs"][i] is not None:
        return float(lp["logprobs"][i])
    alternatives = dict(zip(lp["top_tokens"][i], lp["top_logprobs"][i], strict=False))
    return float(alternatives[token]) if token in alternatives else None


def compared_positions(base: Mapping[str, Any], other: Mapping[str, Any]) -> tuple[int, int | None]:
    """(number of comparable positions, the first position whose tokens differ or None)."""
    a, b = base["tokens"], other["tokens"]
    shared = min(len(a), len(b))
    first = next((i for i in range(shared) if a[i] != b[i]), None)
    return (shared if first is None else first + 1), first


def position(base: Mapping[str, Any], other: Mapping[str, Any], i: int) -> Position:
    token = base["tokens"][i]
    mine, theirs = token_logprob(base, i, token), token_logprob(other, i, token)
    p_base = None if mine is None else math.exp(mine)
    p_other = None if theirs is None else math.exp(theirs)
    known = None if p_base is None or p_other is None else (token, p_base, p_other)
    return Position(
        kl=kl_topk(top_distribution(base, i), top_distribution(other, i), known),
        top1_same=_top1(base, i) == _top1(other, i), p_base=p_base, p_other=p_other,
    )


def position_values(base: Mapping[str, Any], other: Mapping[str, Any]) -> list[Position]:
    """One item's compared positions, as judge/kld.py's table takes them."""
    count, _ = compared_positions(base, other)
    return [position(base, other, i) for i in range(count)]


def margin(lp: Mapping[str, Any], i: int) -> float | None:
    """Top-1 minus top-2 log-probability at position i (None with fewer than 2 recorded)."""
    tops = lp["top_logprobs"][i]
    return float(tops[0]) - float(tops[1]) if len(tops) >= 2 else None


def item_divergence(key: tuple[str, str], base: Mapping[str, Any],
                    other: Mapping[str, Any]) -> ItemDivergence | None:
    """One item's positions; None when there is nothing to compare."""
    count, first = compared_positions(base, other)
    if count == 0:
        return None
    positions = tuple(position(base, other, i) for i in range(count))
    return ItemDivergence(key, positions, None if first is None else margin(base, first))


def _pct(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def summarize(items: Sequence[ItemDivergence]) -> Divergence:
    positions = [p for item in items for p in item.positions]
    kls = [p.kl for p in positions]
    margins = [i.flip_margin for i in items if i.flip_margin is not None]
    return Divergence(
        items=len(items),
        positions=len(positions),
        kl_mean=_mean(kls),
        kl_p99=_pct(kls, 99),
        top1_agreement=_mean([float(p.top1_same) for p in positions]),
        dlogp_mean=_mean([p.dlogp for p in positions if p.dlogp is not None]),
        flip_margin_median=float(np.median(margins)) if margins else None,
        flips=sum(i.flip_margin is not None for i in items),
        kld=kld_table(positions) if positions else None,
    )


ARRAYS = ("tokens", "logprobs", "top_tokens", "top_logprobs")


def check_record(record: Any) -> Mapping[str, Any]:
    """A record's log-probabilities, or RunFileError when they are not the compact shape."""
    lp = record.logprobs
    ok = isinstance(lp, Mapping) and all(isinstance(lp.get(key), list) for key in ARRAYS)
    if not ok or len({len(lp[key]) for key in ARRAYS}) != 1:
        raise RunFileError(f"{record.task} {record.item_id}: malformed logprobs (want parallel "
                           f"arrays {', '.join(ARRAYS)})")
    return lp


def per_item(pairs: Sequence[tuple[Any, Any]]) -> list[ItemDivergence]:
    """(baseline record, other record) pairs -> per-item divergences, where both have
    log-probabilities."""
    found = (_compared(a, b) for a, b in pairs if a.logprobs and b.logprobs)
    return [item for item in found if item is not None]


def _compared(a: Any, b: Any) -> ItemDivergence | None:
    try:
        return item_divergence(a.key, check_record(a), check_record(b))
    except (TypeError, ValueError, KeyError, IndexError, OverflowError) as exc:
        raise RunFileError(f"{a.task} {a.item_id}: malformed logprobs ({exc})") from None


