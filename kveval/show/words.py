"""Numbers and verdicts in words: percentages, intervals, p-values and the sentences the
reports print (overlap, paired, loss, drift)."""

from __future__ import annotations

from kveval.judge.accuracy import WorstCase
from kveval.judge.collapse import NGRAM, REPETITION_SAMPLE, Collapse
from kveval.judge.compare import ALPHA, Drift, NoiseTest, TaskDrift
from kveval.judge.floor import SpreadTest
from kveval.judge.stats import Interval
from kveval.judge.verdict import Accuracy, PairedComparison


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def span(interval: Interval) -> str:
    return f"{100 * interval.low:.1f} to {100 * interval.high:.1f}"


def signed(x: float) -> str:
    return f"{100 * x:+.1f}"


def points(x: float, margin: float | None = None) -> str:
    """x (a fraction) in points, one decimal; beside a margin (in points), as many more digits
    as it takes for the rounded figure to fall on the same side of the margin as x does."""
    digits = 1
    while margin is not None and digits < 6 and _wrong_side(100 * x, margin, digits):
        digits += 1
    return f"{100 * x:.{digits}f}"


def _wrong_side(value: float, margin: float, digits: int) -> bool:
    shown = round(value, digits)
    return (shown > margin) != (value > margin) or (shown == margin) != (value == margin)


def p_text(p: float) -> str:
    if p < 0.0001:
        return "p < 0.0001"
    if p < 0.001:
        return f"p = {p:.4f}"
    return f"p = {p:.3f}" if p < 0.01 else f"p = {p:.2f}"


def accuracy_text(acc: Accuracy | None) -> str:
    """`459/500  91.8%  89.1 to 93.9`, as the published FP8-KV reports print it."""
    if acc is None or acc.n == 0:
        return "-"
    return f"{acc.correct}/{acc.n}  {pct(acc.rate)}  {span(acc.interval)}"


def overlap_sentence(c: PairedComparison, candidate: str) -> str:
    if c.overlap:
        return "intervals overlap: no difference shown"
    side = "lower" if c.candidate.interval.high < c.baseline.interval.low else "higher"
    return f"intervals do not overlap: {candidate} is {side}"


def loss_sentence(c: PairedComparison | WorstCase, margin: float | None = None) -> str:
    """The largest loss the paired data cannot rule out, in one sentence; beside a margin (in
    points) with enough digits that the sentence cannot contradict the verdict."""
    n, d = c.table.n, c.difference
    if d.high < 0:
        return (f"{n} questions show a loss of at least {points(-d.high, margin)} points "
                f"(up to {points(-d.low, margin)}).")
    if c.largest_loss == 0:
        return f"{n} questions rule out any loss."
    return f"{n} questions cannot rule out a loss of {points(c.largest_loss, margin)} points."


def worst_sentence(w: WorstCase, candidate: str, margin: float | None = None) -> str:
    t = w.table
    return (f"worst case, counting {candidate}'s {w.errors} error(s) on items the baseline "
            f"answered as losses: difference {signed(t.difference)} points, 95% CI "
            f"{signed(w.difference.low)} to {signed(w.difference.high)}. "
            f"{loss_sentence(w, margin)}")


def paired_sentence(c: PairedComparison, base: str, candidate: str) -> str:
    t = c.table
    return (f"paired on {t.n} items: {candidate} got {t.lost} wrong that {base} got right and "
            f"{t.gained} right that {base} got wrong (exact McNemar {p_text(c.p_value)}); "
            f"difference {signed(t.difference)} points, 95% CI {signed(c.difference.low)} to "
            f"{signed(c.difference.high)}. {loss_sentence(c)}")


def changed_text(d: Drift) -> str:
    return f"{d.changed} of {d.pairs}"


def drift_sentence(d: TaskDrift, candidate: str, noise: str | None) -> str:
    if d.spread is not None:
        return spread_sentence(d, candidate)
    if d.test is None or noise is None:
        c = d.candidate
        return (f"{candidate} changed {c.changed} of {c.pairs} answers "
                f"({pct(c.changed / c.pairs if c.pairs else None)}); no noise run to compare with")
    return (noise_sentence(d.test, candidate, noise) + "; one noise run: the floor's own "
            "spread is unknown (give --noise two or three times)")


def noise_sentence(t: NoiseTest, candidate: str, noise: str) -> str:
    if t.drifts_more:
        verdict = "more drift than the noise floor"
    elif t.candidate_only < t.noise_only and t.p_value < ALPHA:
        verdict = "less drift than the noise run"
    else:
        verdict = "within the noise floor"
    return (f"{candidate} changed {t.candidate_changed} of {t.items} answers; the noise run "
            f"{noise} changed {t.noise_changed}; {p_text(t.p_value)} (exact McNemar on the same "
            f"items): {verdict}")


def spread_sentence(d: TaskDrift, candidate: str) -> str:
    s = d.spread
    assert s is not None
    between = ", ".join(str(b.changed) for b in d.between_noise)
    return (f"{candidate} changed {s.candidate} of {s.items} answers; {len(s.noise)} noise runs "
            f"changed {', '.join(map(str, s.noise))} (and {between} against each other); "
            f"{floor_verdict(s)}")


def floor_verdict(s: SpreadTest) -> str:
    word = "beyond the noise floor" if s.exceeds else "within the noise floor"
    adjusted = f", Holm-adjusted {p_text(s.adjusted_p)}" if s.adjusted_p != s.p_value else ""
    return (f"one-sided 95% prediction limit {s.limit:.1f} from the spread of the baseline's "
            f"setup, {p_text(s.p_value)}{adjusted}: {word}")


def instability_sentence(d: TaskDrift, candidate: str, repeats: list[str]) -> str:
    own = "; ".join(f"{label} changed {changed_text(r)} of {candidate}'s answers"
                    for label, r in zip(repeats, d.instability, strict=True))
    floor = ", ".join(changed_text(n) for n in d.noise_runs) or "no noise run"
    return f"candidate's own instability: {own} (noise floor: {floor})"


def reasoning_sentence(d: Drift, candidate: str) -> str:
    ratio = "-" if d.mean_prefix_ratio is None else f"{d.mean_prefix_ratio:.3f}"
    return (f"reasoning (compared apart from the answer): {candidate} changed "
            f"{changed_text(d)} reasoning texts; mean prefix ratio {ratio}")


def collapse_text(c: Collapse) -> tuple[str, str, str]:
    """(truncated, empty, repetition) as table cells."""
    share = (lambda k: pct(k / c.answers)) if c.answers else (lambda k: "-")
    rep = "-" if c.repetition is None else f"{c.repetition:.3f}"
    return f"{c.truncated} ({share(c.truncated)})", f"{c.empty} ({share(c.empty)})", rep


REPETITION_NOTE = (f"repetition: the share of each answer's word {NGRAM}-grams that repeat an "
                   f"earlier one, averaged over the first {REPETITION_SAMPLE:,} answers per task")
