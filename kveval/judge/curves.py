"""Length curves of long-context tasks: how a score falls with the context's length.

An item's score is its graded `score` in meta (copy: word similarity; mrcr: openai/mrcr's
difflib grade), else 1 or 0 from `correct` (needle, evidence). Per length bucket: the mean
score with a 95% interval (Wilson when every score is 0 or 1, else Student's t, clipped to
0..1). The AUC is the trapezoid area under the bucket means over log2(length), divided by
the log-length span, so a perfect curve has AUC 1 (one bucket: its mean).

Against a baseline, on the paired items (same task, item_id and prompt, both answered):
the AUC recovery (candidate AUC / baseline AUC) with a paired bootstrap 95% interval
(items resampled within each bucket, the same draw for both runs; numpy, seeded), and a
sign test across buckets: in how many the candidate's paired mean is lower, one-sided
exact binomial test against "lower and higher are equally likely" (ties dropped).

The effective length is the longest bucket up to which every bucket's mean stays at or
above a threshold: a fraction (default 0.9) of the run's own shortest-bucket mean.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kveval.formats.records import ItemRecord
from kveval.judge.lengthstats import (
    Recovery,
    SignTest,
    auc,
    bootstrap_recovery,
    effective_length,
    interval,
    sign_test,
)

DEFAULT_THRESHOLD = 0.9  # of the shortest bucket's mean


@dataclass(frozen=True)
class Bucket:
    length: int
    n: int
    mean: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class PairedBucket:
    length: int
    pairs: int
    mean: float | None  # the candidate's mean on the paired items
    baseline_mean: float | None

    @property
    def difference(self) -> float | None:
        if self.mean is None or self.baseline_mean is None:
            return None
        return self.mean - self.baseline_mean


@dataclass(frozen=True)
class Versus:
    """The curve against a baseline run."""

    label: str
    buckets: tuple[Bucket, ...]  # the baseline's own curve
    auc: float | None
    effective_length: int | None
    paired: tuple[PairedBucket, ...]
    recovery: Recovery
    sign: SignTest


@dataclass(frozen=True)
class Curve:
    task: str
    buckets: tuple[Bucket, ...]
    auc: float | None
    threshold_fraction: float
    threshold: float | None  # the absolute score the effective length is judged against
    effective_length: int | None
    versus: Versus | None = None


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
    return [r for r in items if r.task == task and isinstance(r.meta.get("target_tokens"), int)]


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


def _effective(buckets: Sequence[Bucket], fraction: float) -> tuple[float | None, int | None]:
    scored = [b for b in buckets if b.mean is not None]
    return effective_length([b.length for b in scored], [b.mean or 0.0 for b in scored], fraction)


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
           lengths: Sequence[int], fraction: float) -> Versus:
    groups = _paired_scores(task, items, baseline)
    paired = tuple(PairedBucket(n, len(groups.get(n, [])),
                                _mean([c for c, _ in groups.get(n, [])]),
                                _mean([b for _, b in groups.get(n, [])])) for n in lengths)
    used = [n for n in lengths if groups.get(n)]
    recovery = bootstrap_recovery([[c for c, _ in groups[n]] for n in used],
                                  [[b for _, b in groups[n]] for n in used], used)
    buckets = own_curve(task, baseline, lengths)
    return Versus(label, tuple(buckets), _auc_of(buckets), _effective(buckets, fraction)[1],
                  paired, recovery, sign_test([p.difference for p in paired]))


def _auc_of(buckets: Sequence[Bucket]) -> float | None:
    scored = [b for b in buckets if b.mean is not None]
    return auc([b.length for b in scored], [b.mean or 0.0 for b in scored])


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def length_curve(task: str, items: Sequence[ItemRecord],
                 baseline: Sequence[ItemRecord] | None = None, baseline_label: str = "baseline",
                 fraction: float = DEFAULT_THRESHOLD) -> Curve | None:
    """The task's length curve, with the baseline comparison when a baseline is given;
    None when the task's items carry no length."""
    mine = long_context_items(task, items)
    if not mine:
        return None
    theirs = long_context_items(task, baseline) if baseline is not None else []
    lengths = sorted({r.meta["target_tokens"] for r in mine + theirs})
    buckets = own_curve(task, mine, lengths)
    threshold, longest = _effective(buckets, fraction)
    against = versus(task, mine, theirs, baseline_label, lengths, fraction) \
        if baseline is not None else None
    return Curve(task, tuple(buckets), _auc_of(buckets), fraction, threshold, longest, against)


def recovery_failed(curve: Curve, minimum: float) -> bool | None:
    """The gate's rule: fails when the recovery interval's upper end is below `minimum`;
    None when there is no interval to judge."""
    if curve.versus is None or curve.versus.recovery.high is None:
        return None
    return curve.versus.recovery.high < minimum


def task_curves(items: Sequence[ItemRecord], baseline: Sequence[ItemRecord] | None = None,
                baseline_label: str = "baseline", fraction: float = DEFAULT_THRESHOLD,
                ) -> dict[str, Curve]:
    """The length curve of every long-context task in `items`, by task name."""
    found: dict[str, Curve] = {}
    for task in dict.fromkeys(r.task for r in items):
        curve = length_curve(task, items, baseline, baseline_label, fraction)
        if curve is not None:
            found[task] = curve
    return found


def recovery_reason(curve: Curve, minimum: float) -> str:
    """Why the gate's --min-recovery rule passed, failed or could not judge a task."""
    r = curve.versus.recovery if curve.versus else Recovery(None, None, None)
    if r.value is None or r.high is None or r.low is None:
        return "AUC recovery cannot be judged: no paired scored items, or a baseline AUC of 0"
    where = "is below" if r.high < minimum else "reaches"
    return (f"AUC recovery {100 * r.value:.1f}% (95%: {100 * r.low:.1f}% to {100 * r.high:.1f}%); "
            f"its upper end {where} the minimum {100 * minimum:g}%")
