"""Numbers and verdicts in words: percentages, intervals, p-values and the sentences the
reports print (overlap, paired, loss, drift)."""

from __future__ import annotations

from kveval.judge.compare import ALPHA, NoiseTest, TaskDrift
from kveval.judge.stats import Interval
from kveval.judge.verdict import Accuracy, PairedComparison


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def span(interval: Interval) -> str:
    return f"{100 * interval.low:.1f} to {100 * interval.high:.1f}"


def signed(x: float) -> str:
    return f"{100 * x:+.1f}"


def points(x: float) -> str:
    return f"{100 * x:.1f}"


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


def loss_sentence(c: PairedComparison) -> str:
    """The largest loss the paired data cannot rule out, in one sentence."""
    n, d = c.table.n, c.difference
    if d.high < 0:
        return (f"{n} questions show a loss of at least {points(-d.high)} points "
                f"(up to {points(-d.low)}).")
    if c.largest_loss == 0:
        return f"{n} questions rule out any loss."
    return f"{n} questions cannot rule out a loss of {points(c.largest_loss)} points."


def paired_sentence(c: PairedComparison, base: str, candidate: str) -> str:
    t = c.table
    return (f"paired on {t.n} items: {candidate} got {t.lost} wrong that {base} got right and "
            f"{t.gained} right that {base} got wrong (exact McNemar {p_text(c.p_value)}); "
            f"difference {signed(t.difference)} points, 95% CI {signed(c.difference.low)} to "
            f"{signed(c.difference.high)}. {loss_sentence(c)}")


def drift_sentence(d: TaskDrift, candidate: str, noise: str | None) -> str:
    if d.test is None or noise is None:
        c = d.candidate
        return (f"{candidate} changed {c.changed} of {c.pairs} answers "
                f"({pct(c.changed / c.pairs if c.pairs else None)}); no noise run to compare with")
    return noise_sentence(d.test, candidate, noise)


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
