"""Length curves of long-context tasks: how a score falls with the context's length.

An item's score is its graded `score` in meta (copy: word similarity; mrcr: openai/mrcr's
difflib grade), else 1 or 0 from `correct` (needle, evidence). Per length bucket: the mean
score with a 95% interval (Wilson when every score is 0 or 1, else Student's t, clipped to
0..1). The AUC is the trapezoid area under the bucket means over log2(length), divided by
the log-length span, so a perfect curve has AUC 1 (one bucket: its mean).

Against a baseline, on the paired items (same task, item_id and prompt, both answered):
a one-sided paired test per length (every length counts in full, the longest included) and
one across every length together, stratified by item (judge/lengthstats.py); the AUC
recovery (candidate AUC / baseline AUC) with a paired bootstrap 95% interval (items
resampled within each bucket, the same draw for both runs; numpy, seeded), which needs at
least MIN_PER_LENGTH paired items in every length.

The effective length two ways, each with a bootstrap 95% interval: relative, the longest
length up to which every bucket's mean stays at or above a fraction (default 0.9) of the
run's own shortest-bucket mean; absolute (RULER, Hsieh et al. 2024), the longest length up to
which every bucket scores at least a fixed score (default 0.85).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kveval.formats.records import ItemRecord
from kveval.judge.lengthstats import (
    MIN_PER_LENGTH,
    PairedScores,
    Recovery,
    auc,
    bootstrap_recovery,
    effective_absolute,
    effective_interval,
    effective_length,
    interval,
    paired_scores,
)

DEFAULT_FRACTION = 0.9  # of the shortest bucket's mean: --effective-fraction
DEFAULT_SCORE = 0.85  # RULER's absolute threshold: --effective-threshold


@dataclass(frozen=True)
class Effective:
    """The effective length by one rule, with its bootstrap 95% interval."""

    threshold: float | None  # the score every bucket up to it reaches
    length: int | None
    low: int | None
    high: int | None


@dataclass(frozen=True)
class Bucket:
    length: int
    n: int
    mean: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Versus:
    """The curve against a baseline run."""

    label: str
    buckets: tuple[Bucket, ...]  # the baseline's own curve
    auc: float | None
    effective_length: int | None
    paired: tuple[PairedScores, ...]  # one per length, in order
    across: PairedScores  # every length together
    recovery: Recovery

    @property
    def fewest_pairs(self) -> int:
        return min((p.pairs for p in self.paired), default=0)

    @property
    def recovery_judgeable(self) -> bool:
        return self.fewest_pairs >= MIN_PER_LENGTH and self.recovery.high is not None


@dataclass(frozen=True)
class Curve:
    task: str
    buckets: tuple[Bucket, ...]
    auc: float | None
    threshold_fraction: float
    relative: Effective
    absolute: Effective
    versus: Versus | None = None

    @property
    def threshold(self) -> float | None:
        return self.relative.threshold

    @property
    def effective_length(self) -> int | None:
        return self.relative.length


# ---------------------------------------------------------------- scores per item


def item_score(record: ItemRecord) -> float | None:
    """The graded score in 0..1, or None for an error or an item without ground truth."""
    if not record.ok:
        return None
    value = record.meta.get("score")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None if record.correct is None else float(record.correct)


def long_context_items(task: str, items: Iterable[ItemRecord]) -> list[ItemRecord]:
    return [r for r in items if r.task == task and isinstance(r.meta.get("target_tokens"), int)
            and not isinstance(r.meta.get("target_tokens"), bool)]


def is_long_context(task: str, items: Iterable[ItemRecord]) -> bool:
    return bool(long_context_items(task, items))


def _by_length(items: Iterable[ItemRecord]) -> dict[int, list[float]]:
    groups: dict[int, list[float]] = {}
    for r in items:
        score = item_score(r)
        if score is not None:
            groups.setdefault(r.meta["target_tokens"], []).append(score)
    return groups


# ---------------------------------------------------------------- curves of runs


def bucket(length: int, values: Sequence[float]) -> Bucket:
    low, high = interval(values)
    mean = sum(values) / len(values) if values else None
    return Bucket(length, len(values), mean, low, high)


def _scored(buckets: Sequence[Bucket]) -> list[Bucket]:
    return [b for b in buckets if b.mean is not None]


def effective(groups: dict[int, list[float]], buckets: Sequence[Bucket], fraction: float,
              score: float) -> tuple[Effective, Effective]:
    """(relative, absolute) effective lengths of a run's own curve."""
    scored = _scored(buckets)
    lengths, means = [b.length for b in scored], [b.mean or 0.0 for b in scored]
    values = [groups[n] for n in lengths]
    threshold, longest = effective_length(lengths, means, fraction)
    rel = Effective(threshold, longest,
                    *(effective_interval(values, lengths, fraction, None) if threshold
                      else (None, None)))
    absolute = Effective(score, effective_absolute(lengths, means, score),
                         *effective_interval(values, lengths, None, score))
    return rel, absolute


def own_curve(task: str, items: Sequence[ItemRecord], lengths: Sequence[int]) -> list[Bucket]:
    groups = _by_length(long_context_items(task, items))
    return [bucket(length, groups.get(length, [])) for length in lengths]


def _paired_scores(task: str, items: Sequence[ItemRecord], baseline: Sequence[ItemRecord],
                   ) -> dict[int, list[tuple[float, float]]]:
    base = {r.key: r for r in long_context_items(task, baseline)}
    groups: dict[int, list[tuple[float, float]]] = {}
    for r in long_context_items(task, items):
        other = base.get(r.key)
        if other is None or other.prompt_sha256 != r.prompt_sha256:
            continue
        mine, theirs = item_score(r), item_score(other)
        if mine is not None and theirs is not None:
            groups.setdefault(r.meta["target_tokens"], []).append((mine, theirs))
    return groups


def versus(task: str, items: Sequence[ItemRecord], baseline: Sequence[ItemRecord], label: str,
           lengths: Sequence[int], fraction: float, minimum: float | None = None) -> Versus:
    groups = _paired_scores(task, items, baseline)
    paired = tuple(paired_scores(n, [b for _, b in groups.get(n, [])],
                                 [c for c, _ in groups.get(n, [])]) for n in lengths)
    every = [pair for n in lengths for pair in groups.get(n, [])]
    used = [n for n in lengths if groups.get(n)]
    recovery = bootstrap_recovery([[c for c, _ in groups[n]] for n in used],
                                  [[b for _, b in groups[n]] for n in used], used, minimum)
    buckets = own_curve(task, baseline, lengths)
    return Versus(label, tuple(buckets), _auc_of(buckets), _effective(buckets, fraction),
                  paired, paired_scores(None, [b for _, b in every], [c for c, _ in every]),
                  recovery)


def _effective(buckets: Sequence[Bucket], fraction: float) -> int | None:
    scored = _scored(buckets)
    return effective_length([b.length for b in scored], [b.mean or 0.0 for b in scored],
                            fraction)[1]


def _auc_of(buckets: Sequence[Bucket]) -> float | None:
    scored = _scored(buckets)
    return auc([b.length for b in scored], [b.mean or 0.0 for b in scored])


@dataclass(frozen=True)
class CurveOptions:
    """--effective-fraction, --effective-threshold and --min-recovery."""

    fraction: float = DEFAULT_FRACTION
    score: float = DEFAULT_SCORE
    minimum: float | None = None


def length_curve(task: str, items: Sequence[ItemRecord],
                 baseline: Sequence[ItemRecord] | None = None, baseline_label: str = "baseline",
                 options: CurveOptions = CurveOptions()) -> Curve | None:
    """The task's length curve, with the baseline comparison when a baseline is given;
    None when the task's items carry no length."""
    mine = long_context_items(task, items)
    if not mine:
        return None
    theirs = long_context_items(task, baseline) if baseline is not None else []
    lengths = sorted({r.meta["target_tokens"] for r in mine + theirs})
    buckets = own_curve(task, mine, lengths)
    relative, absolute = effective(_by_length(mine), buckets, options.fraction, options.score)
    against = (versus(task, mine, theirs, baseline_label, lengths, options.fraction,
                      options.minimum) if baseline is not None else None)
    return Curve(task, tuple(buckets), _auc_of(buckets), options.fraction, relative, absolute,
                 against)


def task_curves(items: Sequence[ItemRecord], baseline: Sequence[ItemRecord] | None = None,
                baseline_label: str = "baseline", options: CurveOptions = CurveOptions(),
                ) -> dict[str, Curve]:
    """The length curve of every long-context task in `items`, by task name."""
    found: dict[str, Curve] = {}
    for task in dict.fromkeys(r.task for r in items):
        curve = length_curve(task, items, baseline, baseline_label, options)
        if curve is not None:
            found[task] = curve
    return found
