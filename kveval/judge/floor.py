"""The noise floor as a pool: is a candidate's count (wrong answers, changed answers, answers
cut short, empty answers) more than the baseline's setup itself produces?

The baseline and every noise run are draws of one setup (the pool); the candidate is tested
against the pool, never against one run. Two parts, and the p-value is the larger:

- Exact, for a setup whose runs share one rate (no spread between restarts): under the null
  hypothesis the candidate is exchangeable with the runs it is compared with, item by item.
  Conditional on how many of those runs flag each item, the candidate's flag on an item with
  t of M runs flagging it is Bernoulli(t / M), independently across items, so its count is a
  Poisson-binomial whose upper tail is the p-value (a permutation test within items; with one
  other run it is the exact one-sided McNemar test). Items may differ in how often they flip.
- Spread, for restarts that differ (batches, cache state): the candidate's figure as one more
  draw among the pool runs' (judge/spread.py: the pool's own variance moderated by a declared
  prior, never below the counting variance its items show, Student's t). A restart that
  changes more answers than another also scores lower where departed answers are more often
  wrong (an accurate model), so accuracy is judged against what a restart does too, not
  against the baseline alone. Figures: for accuracy the wrong count itself, with a prior
  spread of PRIORS["accuracy"].spread times the answers a run changes; for the other counts
  the logit of the share, logit((y + 1/2) / (n - y + 1/2)), with a prior log-sd.

Exchangeable sets: for an own count (wrong, truncated, empty) the candidate and every pool
run; for changed answers the candidate and the noise runs, each against the baseline, while
the spread part uses each run's own share of the pairwise changes (the additive model of a
round-robin, c_ab = q_a + q_b, solved by least squares over the pool and the candidate). A
count no higher than a pool run's own, and wrong answers that are a pool run's item for item,
are within the floor (p = 1): the setup itself did as much, so a copy of the baseline never
fails.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from kveval.judge.answers import answer_codes, pairwise_changes, run_effects
from kveval.judge.novel import NovelCost
from kveval.judge.spread import (
    PRIORS,
    Prior,
    Spread,
    beyond_counting,
    moderated,
    prediction_bound,
    prediction_p,
    within_item_variance,
)


@dataclass(frozen=True)
class CountTest:
    """A candidate's count against the pool of runs of the baseline's setup."""

    items: int
    candidate: int  # the candidate's count (against the baseline for changed answers)
    pool: tuple[int, ...]  # the same count of each pool run (noise runs only for changes)
    exact_p: float  # the permutation test within items (no spread between runs)
    spread_p: float  # the prediction test with the pool's spread (moderated by the prior)
    min_p: float  # the smallest p-value the exact test could give with these item totals
    spread_measured: bool  # two or more pool runs: their own spread joined the prior
    figures: tuple[float, ...] = ()  # the pool runs' counts the spread part compares with
    exchanged: int = 2  # the candidate and the runs it is exchanged with, item by item
    spread: Spread | None = None  # the spread part's variance, on its figure's scale
    scale: str = "logit"  # "logit" (of the share) or "count" (accuracy's wrong answers)
    gap: float = 0.0  # the candidate's figure less the pool's mean, on that scale
    strata: tuple[int, ...] = ()  # items that 1 .. M - 1 of the M runs flag (the exact part)
    sure: int = 0  # items every run flags
    novel: NovelCost | None = None  # accuracy with three runs of the setup: judge/novel.py

    @property
    def p_value(self) -> float:
        """The larger of the two parts' p; with three runs of the setup, accuracy's is the
        new answers' cost alone (it allows for restarts that change more, item by item)."""
        return self.spread_p if self.novel is not None else max(self.exact_p, self.spread_p)

    def exact_threshold(self, level: float) -> int:
        """The smallest count the exact part shows at this level."""
        low, high = self.sure, self.sure + sum(self.strata) + 1
        while low < high:
            mid = (low + high) // 2
            if poisson_binomial_sf(mid, self.strata, self.exchanged, self.sure) < level:
                high = mid
            else:
                low = mid + 1
        return low

    def spread_threshold(self, level: float) -> float:
        """The count at which the spread part reaches this level."""
        if self.novel is not None:
            return self.novel.threshold(self.candidate, level)
        if self.spread is None:
            return -math.inf
        bar = float(np.mean(self.figures_on_scale)) + (self.gap - prediction_bound(
            self.gap, self.spread, level))
        if self.scale == "count":
            return bar
        return (self.items + 1) / (1 + math.exp(-bar)) - 0.5

    @property
    def figures_on_scale(self) -> list[float]:
        if self.scale in ("count", "novel"):
            return list(self.figures)
        return [logit_share(min(max(q, 0.0), float(self.items)), self.items)
                for q in self.figures]

    def bound(self, level: float) -> float:
        """How far the candidate's count lies beyond the largest one neither part shows at this
        level (answers); 0 or below: nothing shown. Agrees with the p-value at that level."""
        own = self.own_figure
        if self.novel is not None:
            return own - self.spread_threshold(level)
        below = float(self.exact_threshold(level) - 1) - (self.candidate - own)
        return own - max(below, self.spread_threshold(level))

    @property
    def own_figure(self) -> float:
        """The candidate's figure the spread part reads, as a count (for changed answers its
        own share of the changes, else its count)."""
        if self.scale in ("count", "novel"):
            return float(self.candidate)
        base = float(np.mean(self.figures_on_scale)) + self.gap
        return (self.items + 1) / (1 + math.exp(-base)) - 0.5


def _convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The pmf of a sum from two pmfs: direct for small ones, numpy's FFT for large ones."""
    if a.size * b.size <= 1 << 16:
        return np.convolve(a, b)
    size = a.size + b.size - 1
    return np.fft.irfft(np.fft.rfft(a, size) * np.fft.rfft(b, size), size)


def poisson_binomial_sf(x: int, counts: Sequence[int], m: int, sure: int = 0) -> float:
    """P(X >= x) for X = sure + sum_j Binomial(counts[j - 1], j / m), j = 1 .. m - 1: the
    probabilities take m - 1 values, so the pmf is a few binomials convolved (scipy's
    poisson_binom is quadratic in the items)."""
    from scipy.stats import binom

    need = x - sure
    if need <= 0:
        return 1.0
    pmf = np.ones(1)
    for j, n in enumerate(counts, start=1):
        if n:
            pmf = _convolve(pmf, binom.pmf(np.arange(n + 1), n, j / m))
    pmf = np.clip(pmf, 0.0, None)
    return float(min(1.0, pmf[need:].sum())) if need < pmf.size else 0.0


def strata_of(candidate: np.ndarray, others: np.ndarray) -> tuple[tuple[int, ...], int]:
    """(items flagged by 1 .. M - 1 of the M runs, items flagged by all)."""
    m = others.shape[0] + 1
    per_level = np.bincount(others.sum(axis=0) + candidate, minlength=m + 1)
    return tuple(int(c) for c in per_level[1:m]), int(per_level[m])


def exact_p(candidate: np.ndarray, others: np.ndarray) -> tuple[float, float]:
    """(p, smallest attainable p) of the candidate's flags against the other runs' flags
    (runs x items), conditional on each item's number of flags."""
    m = others.shape[0] + 1
    counts, sure = strata_of(candidate, others)
    attainable = sure + sum(counts)
    x = int(candidate.sum())
    smallest = math.prod((j / m) ** c for j, c in enumerate(counts, start=1))
    return poisson_binomial_sf(x, counts, m, sure), (smallest if attainable else 1.0)


def logit_share(y: float, n: int) -> float:
    return math.log((y + 0.5) / (n - y + 0.5))


def logit_slope(y: float, n: int) -> float:
    """d logit_share / dy: turns a count's variance into its logit's (the delta method)."""
    return 1 / (y + 0.5) + 1 / (n - y + 0.5)


def _counting(flags: np.ndarray) -> float:
    """Accuracy's counting variance from the runs' flags (runs x items, the candidate last):
    the pool's own where it has two runs or more, else the baseline's and the candidate's
    (McNemar's: the discordant items, halved)."""
    return within_item_variance(flags[:-1] if flags.shape[0] > 2 else flags)


def own_counting(pool: np.ndarray) -> float:
    """A count's counting variance from the pool alone (runs x items): item by item where it
    has two runs or more, else the baseline's count itself (a Poisson bound on sum p (1 - p)):
    never the candidate's, whose excess is what is tested."""
    if pool.shape[0] >= 2:
        return within_item_variance(pool)
    return float(pool.sum())


def logit_spread_p(candidate: float, pool: Sequence[float], n: int, counting: float,
                   prior: Prior | None = None) -> tuple[float, Spread, float]:
    """(one-sided p, spread, gap) of one more run's count of n items among the pool's, on the
    logit scale; `counting`: one run's counting variance (counts); `prior`: PRIORS' if None."""
    prior = prior or PRIORS["count"]
    clipped = [min(max(q, 0.0), float(n)) for q in pool]
    cand = min(max(candidate, 0.0), float(n))
    floor = counting * logit_slope(float(np.mean(clipped)), n) ** 2
    figures = [logit_share(q, n) for q in clipped]
    spread = beyond_counting(figures, prior.spread ** 2, prior.df, floor)
    gap = logit_share(cand, n) - float(np.mean(figures))
    if cand <= max(clipped) + 1e-9:
        return 1.0, spread, gap
    return prediction_p(gap, spread), spread, gap


def own_count_test(candidate: np.ndarray, pool: np.ndarray) -> CountTest:
    """A count each run has on its own (answers cut short, empty answers): the candidate's
    flags (items) against the pool's (runs x items, the baseline first)."""
    p, smallest = exact_p(candidate, pool)
    counts = tuple(int(c) for c in pool.sum(axis=1))
    x = int(candidate.sum())
    spread_p, spread, gap = logit_spread_p(x, counts, candidate.size, own_counting(pool))
    return CountTest(candidate.size, x, counts, p, spread_p, smallest, spread.measured,
                     tuple(map(float, counts)), pool.shape[0] + 1, spread, "logit", gap,
                     *strata_of(candidate, pool))


def accuracy_test(wrong: np.ndarray, changed: float, harm: float,
                  novel: NovelCost | None = None) -> CountTest:
    """Wrong answers: `wrong` holds runs x items, the pool (the baseline first) then the
    candidate last; `changed`: how many answers one run of the setup changes (half the
    pool's mean pairwise changes); `harm`: how much a changed answer costs, net (judge/
    harm.py). The candidate's wrong count against the pool's, item by item and as one more
    draw whose spread is the pool's own moderated by a prior: a restart moves the answers it
    changes by a log-sd of PRIORS["accuracy"].spread, each costing `harm`. With three runs of
    the setup (`novel`, judge/novel.py) the spread part is the cost of the candidate's new
    answers instead, and it decides alone."""
    pool, candidate = wrong[:-1], wrong[-1]
    p, smallest = exact_p(candidate, pool)
    counts = tuple(int(c) for c in pool.sum(axis=1))
    x = int(candidate.sum())
    gap = x - float(np.mean(counts))
    strata = strata_of(candidate, pool)
    if novel is not None:
        spread_p = novel.p_value  # a copy of a pool run has no new answer: p = 1
        return CountTest(candidate.size, x, counts, p, spread_p, smallest, True,
                         tuple(map(float, counts)), pool.shape[0] + 1, novel.spread, "novel",
                         gap, *strata, novel=novel)
    spread = count_spread(pool, candidate, changed * harm, max(_counting(wrong), 0.25))
    spread_p = 1.0 if copies_a_run(pool, candidate) else prediction_p(gap, spread)
    return CountTest(candidate.size, x, counts, p, spread_p, smallest, spread.measured,
                     tuple(map(float, counts)), pool.shape[0] + 1, spread, "count", gap,
                     *strata)


def count_spread(pool: np.ndarray, candidate: np.ndarray, moved: float, floor: float,
                 ) -> Spread:
    """The wrong count's spread: a restart moves it by PRIORS["accuracy"].spread of `moved`
    (the answers a run changes, at their net cost). With the baseline alone the counting
    variance `floor` (McNemar's) is known, Satterthwaite's df; else the pool's spread too."""
    prior = PRIORS["accuracy"]
    run = (prior.spread * moved) ** 2
    counts = [float(c) for c in pool.sum(axis=1)]
    if len(counts) == 1:
        spread = beyond_counting(counts, run, prior.df, floor)
        return replace(spread, extra=spread.extra + own_excess(pool, candidate, floor))
    return replace(moderated(counts, floor + run, prior.df, floor),
                   extra=own_excess(pool, candidate, floor))


def copies_a_run(pool: np.ndarray, candidate: np.ndarray) -> bool:
    """Whether the candidate's flags are some pool run's, item for item: the setup itself
    did exactly this, so it is within the floor (a copy of the baseline never fails)."""
    return bool((pool == candidate[None, :]).all(axis=1).any())


def own_excess(pool: np.ndarray, candidate: np.ndarray, floor: float) -> float:
    """The candidate's own counting variance beyond a restart's: sum over items of its flag
    less the pool's mean flag, squared (an unbiased estimate of the counting part of its gap
    under the null), less what a restart's would be. A candidate that changes many answers
    both ways is noisier than a restart, as McNemar's test allows for with its discordant
    pairs; against the baseline alone this is McNemar's variance exactly."""
    m = pool.shape[0]
    mean = pool.mean(axis=0)
    own = float(((candidate.astype(float) - mean) ** 2).sum())
    return max(0.0, own - floor * (1 + 1 / m))


def changed_test(answers: Sequence[Sequence[object]]) -> CountTest:
    """Changed answers: `answers` holds the baseline's, each noise run's and last the
    candidate's answers to the same items; an answer None (no text) differs from every
    other. The candidate's changes from the baseline against the noise runs'."""
    coded = answer_codes(answers)
    differs = coded[1:] != coded[0]
    p, smallest = exact_p(differs[-1], differs[:-1])
    own = run_effects(pairwise_changes(coded))
    n = coded.shape[1]
    pool = [float(q) for q in own[:-1]]
    counting = max(float(np.mean(np.clip(pool, 0, n))), 0.0)  # a Poisson count's variance
    spread_p, spread, gap = logit_spread_p(float(own[-1]), pool, n, counting)
    counts = tuple(int(c) for c in differs[:-1].sum(axis=1))
    return CountTest(n, int(differs[-1].sum()), counts, p, spread_p, smallest,
                     spread.measured, tuple(pool), differs.shape[0], spread, "logit", gap,
                     *strata_of(differs[-1], differs[:-1]))
