"""How much one more restart of the baseline's setup moves a figure: the spread between runs,
estimated from few runs honestly.

One to three runs of a setup cannot estimate a variance alone (two noise runs and the
baseline give two degrees of freedom: a t quantile of 7 at the one-sided 1% level). The
estimate borrows strength the way moderated t-statistics do (Smyth 2004, Stat. Appl. Genet.
Mol. Biol. 3, article 3): a declared prior variance with declared degrees of freedom d0,
combined with the pool's own sample variance on its m - 1,

    V = (d0 V0 + (m - 1) s^2) / (d0 + m - 1),   T = (y_c - mean) / sqrt(V (1 + 1/m)),

and T is referred to Student's t with d0 + m - 1 degrees of freedom (Hahn & Meeker,
"Statistical Intervals", 2nd ed., section 4.7, for the prediction of one more draw). V never
falls below the counting variance the runs' items show on their own (`floor`): a pool whose
figures happen to agree (12, 12, 12) is not certainty. With a single run in the pool the
spread is the prior alone, and the verdict says it was not measured.

The priors are declared in PRIORS, one per kind of figure, and printed with the family; the
false-alarm rates they give are measured by bench/gate_calibration.py in the worlds it
simulates (loss-biased departures, restarts whose rates differ, bursts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Prior:
    """A declared prior on the spread between restarts, in the figure's own unit: `spread`
    is its standard deviation between runs beyond counting (a log-sd for a count's logit,
    a share of the answers a run changes for accuracy), `df` its weight in runs."""

    spread: float
    df: float


# accuracy: a restart's correct count moves by a share of the answers it changes (loss-biased
# departures make a restart that changes more answers score lower); counts (changed,
# truncated, empty answers): a restart's rate moves by a log-sd
# novel: a restart's net cost per new answer (judge/novel.py) moves by an sd, a normal shift
# on the exact exchange (no degrees of freedom to learn; calibrated: bench/novel_reference.py)
PRIORS = {
    "accuracy": Prior(0.5, 4.0),
    "count": Prior(0.25, 3.0),
    "novel": Prior(0.03, math.inf),
}


@dataclass(frozen=True)
class Spread:
    """The variance of one run's figure between restarts, and what it rests on."""

    variance: float
    df: float  # of the t reference: the prior's and the pool's own
    runs: int  # m: the pool runs the candidate is one more draw among
    measured: bool  # two or more pool runs: the pool's own spread joined the prior
    floor: float  # the counting variance alone
    extra: float = 0.0  # the candidate's own counting variance beyond a restart's (known)


def moderated(pool: Sequence[float], prior_variance: float, prior_df: float,
              floor: float) -> Spread:
    """The pool's sample variance shrunk toward the prior, never below `floor`."""
    m = len(pool)
    own_df = m - 1
    if own_df < 1:
        return Spread(max(prior_variance, floor), prior_df, m, False, floor)
    mean = math.fsum(pool) / m
    sample = math.fsum((y - mean) ** 2 for y in pool) / own_df
    pooled = (prior_df * prior_variance + own_df * sample) / (prior_df + own_df)
    return Spread(max(pooled, floor), prior_df + own_df, m, True, floor)


def beyond_counting(pool: Sequence[float], prior_variance: float, prior_df: float,
                    floor: float) -> Spread:
    """The spread between restarts beyond counting, moderated toward the prior, with the
    counting variance `floor` known (it is read item by item, not from the runs' spread):
    Student's t then takes the estimated part's degrees of freedom by Satterthwaite, so a
    setup whose counts vary by counting alone is not judged on two degrees of freedom."""
    m = len(pool)
    known = floor * (1 + 1 / max(m, 1))
    if m < 2:
        return Spread(prior_variance, prior_df, m, False, floor, extra=known)
    mean = math.fsum(pool) / m
    sample = math.fsum((y - mean) ** 2 for y in pool) / (m - 1)
    beyond = max(sample - floor, 0.0)
    pooled = (prior_df * prior_variance + (m - 1) * beyond) / (prior_df + m - 1)
    return Spread(pooled, prior_df + m - 1, m, True, floor, extra=known)


def scale(spread: Spread) -> float:
    """The standard deviation of the candidate's figure less the pool's mean."""
    return math.sqrt(spread.variance * (1 + 1 / max(spread.runs, 1)) + spread.extra)


def reference_df(spread: Spread) -> float:
    """The t reference's degrees of freedom: the estimated part's, by Satterthwaite where a
    known part (`extra`) joins it."""
    estimated = spread.variance * (1 + 1 / max(spread.runs, 1))
    if spread.extra <= 0 or estimated <= 0:
        return spread.df
    return spread.df * ((estimated + spread.extra) / estimated) ** 2


def prediction_p(gap: float, spread: Spread) -> float:
    """One-sided p of a candidate whose figure lies `gap` above the pool's mean."""
    from scipy.stats import t

    sd = scale(spread)
    if sd <= 0:
        return 1.0 if gap <= 0 else 0.0
    return float(t.sf(gap / sd, reference_df(spread)))


def prediction_bound(gap: float, spread: Spread, level: float) -> float:
    """The smallest true shift the gap still shows at this one-sided level: gap less the
    t quantile times the scale (below 0: no shift shown)."""
    from scipy.stats import t

    return gap - float(t.isf(level, reference_df(spread))) * scale(spread)


def within_item_variance(flags: Sequence[Sequence[bool]] | object) -> float:
    """The counting variance of one run's count: sum over items of t (M - t) / (M (M - 1))
    for an item that t of M runs flag, the unbiased estimate of sum p_i (1 - p_i) when the
    runs are exchangeable item by item. `flags`: runs x items (a numpy array)."""
    import numpy as np

    runs = np.asarray(flags, dtype=bool)
    m = runs.shape[0]
    if m < 2:
        return 0.0
    t = runs.sum(axis=0)
    return float((t * (m - t)).sum() / (m * (m - 1)))
