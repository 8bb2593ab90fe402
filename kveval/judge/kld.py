"""Divergence in the shape `llama-perplexity --kl-divergence` prints it.

From per-position values of one run against the baseline (the KL, whether the top token is
the same, and the baseline token's probability in both runs) this computes llama.cpp's table:
mean KL with its standard error, median, p90, p99, p99.9 and maximum; "same top p" with its
standard error; the mean, RMS and quantiles of Δp, the change of the baseline token's
probability (the candidate's minus the baseline's). The formulas are llama.cpp's
(tools/perplexity/perplexity.cpp): a mean's standard error is the sample standard deviation
over sqrt(n) (reported as 0 for 10 values or fewer, as llama.cpp does), a quantile
interpolates linearly between order statistics, the RMS's error is the MSE's standard error
times 1 / (2 RMS), same top's is sqrt(p (1 - p) / (n - 1)).

One difference is the estimator: kveval's KL is the top-K bound of judge/kl_bound.py (a
lower bound of the full-vocabulary KL), and Δp is known only where the baseline token is in
the other run's top-K or is its recorded token (forced decoding on llama-server reports the
top-K alone); positions without it are counted apart (`dp_unknown`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# The share of the full-vocabulary KL the top-K bound captures, measured on the embedded engine
# with every position's logits (bench/topk_capture.py, SmolLM2-135M, 2,482 positions of q8_0
# and q4_0 KV caches against f16): top-5 71.7% and 74.8%, top-20 86.7% and 88.3%.
CAPTURE_SHARE = {5: 0.73, 20: 0.87}

KL_QUANTILES = (("median", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999))
DP_QUANTILES = (("p0.1", 0.001), ("p1", 0.01), ("p5", 0.05), ("p10", 0.1), ("p25", 0.25),
                ("median", 0.5), ("p75", 0.75), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99),
                ("p99.9", 0.999))


@dataclass(frozen=True)
class PositionValues:
    """One position of a run against the baseline."""

    kl: float
    same_top: bool
    p_base: float | None  # the baseline token's probability under the baseline
    p_other: float | None  # ... and under the other run; None: not known there


@dataclass(frozen=True)
class Estimate:
    value: float
    se: float  # standard error


@dataclass(frozen=True)
class KldTable:
    positions: int
    kl_mean: Estimate
    kl: dict[str, float]  # median, p90, p99, p99.9, max
    same_top: Estimate
    dp_positions: int  # positions with Δp known
    dp_unknown: int
    dp_mean: Estimate | None  # None without a known Δp
    dp_rms: Estimate | None
    dp: dict[str, float]  # min, p0.1 ... p99.9, max


def mean_se(values: np.ndarray) -> Estimate:
    """The mean and its standard error, as llama.cpp's mean_and_uncertainty computes them."""
    n = len(values)
    mean = float(values.mean())
    spread = float((values**2).mean()) - mean * mean
    se = math.sqrt(spread / (n - 1)) if spread > 0 and n > 10 else 0.0
    return Estimate(mean, se)


def _quantiles(values: np.ndarray, named: Sequence[tuple[str, float]]) -> dict[str, float]:
    return {name: float(np.quantile(values, q)) for name, q in named}


def kld_table(values: Sequence[Any]) -> KldTable:
    """llama-perplexity's KL divergence and token probability statistics of positions that
    hold `kl`, `same_top`, `p_base` and `p_other` (PositionValues, or judge/divergence.py's
    Position); ValueError without a position."""
    if not values:
        raise ValueError("no positions to summarize")
    kl = np.array([v.kl for v in values], dtype=float)
    same = np.array([v.same_top for v in values], dtype=float)
    known = [(v.p_other - v.p_base) for v in values
             if v.p_base is not None and v.p_other is not None]
    dp = np.array(known, dtype=float)
    top = float(same.mean())
    n = len(values)
    return KldTable(
        positions=n,
        kl_mean=mean_se(kl),
        kl={**_quantiles(kl, KL_QUANTILES), "max": float(kl.max())},
        same_top=Estimate(top, math.sqrt(top * (1 - top) / (n - 1)) if n > 1 else 0.0),
        dp_positions=len(dp), dp_unknown=n - len(dp),
        dp_mean=mean_se(dp) if len(dp) else None,
        dp_rms=_rms(dp) if len(dp) else None,
        dp={"min": float(dp.min()), **_quantiles(dp, DP_QUANTILES), "max": float(dp.max())}
        if len(dp) else {},
    )


def _rms(dp: np.ndarray) -> Estimate:
    mse = mean_se(dp**2)
    rms = math.sqrt(mse.value)
    return Estimate(rms, 0.5 / rms * mse.se if rms > 0 else 0.0)
