"""Numbers and verdicts in words: percentages, intervals, p-values and the sentences the
reports print (overlap, paired, loss, drift)."""

from __future__ import annotations

from collections.abc import Sequence

from kveval.judge.accuracy import WorstCase
from kveval.judge.checks import ALPHA, Check
from kveval.judge.collapse import NGRAM, REPETITION_SAMPLE, Collapse
from kveval.judge.compare import Drift, TaskDrift
from kveval.judge.floor import CountTest
from kveval.judge.judgeable import Need
from kveval.judge.spread import PRIORS
from kveval.judge.stats import Interval
from kveval.judge.verdict import Accuracy, PairedComparison


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def span(interval: Interval) -> str:
    return f"{100 * interval.low:.1f} to {100 * interval.high:.1f}"


def fixed(x: float, digits: int, sign: str = "") -> str:
    """x to `digits` decimals (sign "+": always signed), never "-0.0": a value that rounds to
    0 prints as 0."""
    return f"{round(x, digits) + 0.0:{sign}.{digits}f}"


def signed(x: float) -> str:
    return fixed(100 * x, 1, "+")


def points(x: float, margin: float | None = None) -> str:
    """x (a fraction) in points, one decimal; beside a margin (in points), as many more digits
    as it takes for the rounded figure to fall on the same side of the margin as x does."""
    digits = 1
    while margin is not None and digits < 6 and _wrong_side(100 * x, margin, digits):
        digits += 1
    return fixed(100 * x, digits)


def over_floor(rise: float, floor: float) -> str:
    """A rise over a floor (> 0): "+45.0% over the floor", or from ten times the floor up a
    ratio, "12.5x the floor", "4,307x the floor"."""
    ratio = (floor + rise) / floor
    if ratio < 10:
        return f"{fixed(100 * rise / floor, 1, '+')}% over the floor"
    return f"{ratio:,.0f}x the floor" if ratio >= 100 else f"{ratio:.1f}x the floor"


def _wrong_side(value: float, margin: float, digits: int) -> bool:
    shown = round(value, digits)
    return (shown > margin) != (value > margin) or (shown == margin) != (value == margin)


def p_text(p: float, alpha: float = ALPHA) -> str:
    """A p-value with as many digits as it takes to fall on the same side of alpha as the
    value does: 0.0508 is "0.051", never "0.05" beside a 0.0499 printed "0.050"."""
    if p < 0.0001:
        return "p < 0.0001"
    digits = 4 if p < 0.001 else (3 if p < 0.01 else 2)
    while digits < 8 and _misleads(p, alpha, digits):
        digits += 1
    return f"p = {p:.{digits}f}"


def _misleads(p: float, alpha: float, digits: int) -> bool:
    shown = round(p, digits)
    return (shown < alpha) != (p < alpha) or (shown == round(alpha, digits) and p != alpha)


def accuracy_text(acc: Accuracy | None) -> str:
    """`459/500  91.8%  89.1 to 93.9`, as the published FP8-KV reports print it."""
    if acc is None or acc.n == 0:
        return "-"
    return f"{acc.correct}/{acc.n}  {pct(acc.rate)}  {span(acc.interval)}"


def overlap_sentence(c: PairedComparison, candidate: str) -> str:
    if c.overlap:
        return "intervals overlap"
    side = "lower" if c.candidate.interval.high < c.baseline.interval.low else "higher"
    return f"intervals do not overlap: {candidate} is {side}"


def check_result(c: Check | None, family: int, noun: str = "check") -> str:
    """The check's p-values and what they show: "shown (p = 0.0010; Holm-adjusted over 12
    checks, weight 6, p = 0.012)", "not shown (...)", that the items cannot show it at all,
    or that these runs cannot run it. Every check says its weight in the family."""
    if c is None:
        return "not tested"
    if not c.run:
        return f"not run: {c.why_not} (it keeps its share of alpha)"
    if not c.testable:
        return (f"cannot show at alpha {c.alpha:g} with these items (the smallest p-value "
                f"they allow is {p_value(c.min_p, c.alpha)})")
    word = "shown" if c.alarmed else "not shown"
    weight = f", weight {c.weight:g}" if family > 1 else ""
    return (f"{word} at alpha {c.alpha:g} ({p_text(c.p_value, c.level)} one-sided, its level "
            f"{c.level:.2g}; Holm-adjusted over {plural(family, noun)}{weight}, "
            f"{p_text(c.adjusted_p, c.alpha)})")


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def p_value(p: float, alpha: float = ALPHA) -> str:
    """A p-value without its "p": "0.0010", "< 0.0001"."""
    return p_text(p, alpha).removeprefix("p = ").removeprefix("p ")


def testable(checks: Sequence[Check]) -> int:
    return sum(c.testable for c in checks)


def loss_sentence(c: PairedComparison | WorstCase, margin: float | None = None,
                  check: Check | None = None) -> str:
    """The 95% interval for the difference in one sentence, said to be unadjusted; "a loss
    shown" only where the family's accuracy check shows it, so the sentence cannot
    contradict the verdict."""
    n, d = c.table.n, c.difference
    loss = f"{points(-d.high, margin)} to {points(-d.low, margin)} points"
    if d.high < 0 and check is not None and check.alarmed:
        return (f"{n} questions show a loss (the check above); 95% CI of the loss {loss} "
                "(unadjusted).")
    if d.high < 0 and check is not None:
        return (f"{n} questions: the 95% CI alone puts the loss at {loss} (unadjusted); "
                "across the gate's checks, against the baseline's setup, it is not shown.")
    if d.high < 0:
        return f"{n} questions: 95% CI of the loss {loss} (unadjusted; not a check of the gate)."
    if c.largest_loss == 0:
        return f"{n} questions rule out any loss (95% CI, unadjusted)."
    return (f"{n} questions cannot rule out a loss of {points(c.largest_loss, margin)} points "
            "(95% CI, unadjusted).")


def pooled_sentence(t: CountTest | None, candidate: str, check: Check | None,
                    family: int) -> str:
    """The accuracy check in words: the candidate's wrong answers against the baseline's
    setup, what that shows, and how far at the check's own level."""
    if t is None or check is None:
        return ""
    runs = "the baseline" if len(t.pool) == 1 else \
        f"the baseline's setup ({len(t.pool)} runs)"
    level = bound_text(t, check)
    return (f"{candidate} has {t.candidate} of {t.items} wrong; {pool_text(t, runs + ' had')}; "
            + novel_text(t, candidate)
            + f"a loss beyond a restart's {check_result(check, family)}"
            + (f"; {level}" if level else "") + ".")


def novel_text(t: CountTest, candidate: str) -> str:
    """What the candidate's new answers cost beside a restart's (judge/novel.py)."""
    n = t.novel
    if n is None:
        return ""
    each = n.cost / n.answers if n.answers else 0.0
    return (f"{candidate} gave {n.answers} answers no run of the setup gave on items they "
            f"all answered alike ({n.losses} new losses, {n.gains} new gains), which turned "
            f"{n.cost:g} right answers wrong net ({each:.2f} each), where the setup's runs' "
            f"{n.pool_answers} such answers turned {n.rate:.2f} each; ")


def worst_sentence(w: WorstCase, candidate: str, margin: float | None = None,
                   check: Check | None = None, family: int = 1) -> str:
    t = w.table
    return (f"worst case, counting {candidate}'s {w.errors} error(s) on items the baseline "
            f"answered as losses: {t.lost} lost, {t.gained} gained; difference "
            f"{signed(t.difference)} points, 95% CI {signed(w.difference.low)} to "
            f"{signed(w.difference.high)} (unadjusted). {loss_sentence(w, margin, check)}")


def paired_sentence(c: PairedComparison, base: str, candidate: str, check: Check | None = None,
                    family: int = 1, pooled: CountTest | None = None) -> str:
    """The paired table in words, then the family's accuracy check on it: the candidate
    against the baseline's setup (its errors counted as wrong)."""
    t = c.table
    verdict = pooled_sentence(pooled, candidate, check, family)
    return (f"paired on {t.n} items, {candidate} got {t.lost} wrong that {base} got right and "
            f"{t.gained} right that {base} got wrong; difference {signed(t.difference)} "
            f"points, 95% CI {signed(c.difference.low)} to {signed(c.difference.high)} "
            f"(unadjusted). " + (verdict + " " if verdict else "")
            + loss_sentence(c, None, check))


def changed_text(d: Drift) -> str:
    return f"{d.changed} of {d.pairs}"


def spread_words(t: CountTest) -> str:
    """How the pool's spread entered the test: its own with the declared prior, or the prior
    alone."""
    prior = PRIORS[{"count": "accuracy", "novel": "novel"}.get(t.scale, "count")]
    unit = {"count": "of the answers a run changes, at their net cost",
            "novel": "sd of a new answer's net cost"}.get(t.scale, "log-sd of the rate")
    if t.scale == "novel":
        return (f"the candidate's new answers exchanged with the setup's, exactly, its cost "
                f"rate allowed to differ by the declared {prior.spread:g} {unit}")
    if t.spread_measured:
        return (f"their spread measured, moderated by the declared prior ({prior.spread:g} "
                f"{unit}, {prior.df:g} degrees of freedom)")
    return (f"their spread not measured: one run of the setup, so the declared prior "
            f"({prior.spread:g} {unit}) stands in; give --noise two or three times")


def pool_text(t: CountTest, runs: str) -> str:
    """The pool's counts and how their spread entered."""
    return f"{runs} {', '.join(map(str, t.pool))}; {spread_words(t)}"


def bound_text(t: CountTest, c: Check | None) -> str:
    """How far beyond the floor the candidate lies at the check's own level (judge/checks.py:
    its step of Holm), in the check's unit: it agrees with the verdict at that level."""
    if c is None or not c.run:
        return ""
    beyond = t.bound(c.level)
    share = f"{100 * (1 - c.level):.2f}".rstrip("0").rstrip(".")
    if t.scale in ("count", "novel"):
        what = (f"a loss of at least {points(beyond / t.items)} points beyond a restart's"
                if beyond > 0 else "no loss beyond a restart's shown")
    else:
        what = (f"at least {beyond:.0f} answers beyond the setup's own" if beyond > 0
                else "no excess over the setup's own shown")
    return f"at the check's level ({share}%, its share of alpha): {what}"


def drift_sentence(d: TaskDrift, candidate: str, check: Check | None = None,
                   family: int = 1, noises: Sequence[str] = (), judged: bool = False) -> str:
    """The candidate's changed answers against the noise runs'; `judged`: the task is judged
    by accuracy, so its drift is shown, not tested."""
    c = d.candidate
    if d.changed is None:
        return (f"{candidate} changed {c.changed} of {c.pairs} answers "
                f"({pct(c.changed / c.pairs if c.pairs else None)}); no noise run to compare with")
    t = d.changed
    named = f" {', '.join(noises)}" if noises else ""
    runs = f"the noise run{named} changed" if len(t.pool) == 1 else \
        f"the noise runs{named} changed"
    if judged:
        return (f"{candidate} changed {t.candidate} of {t.items} answers; {runs} "
                f"{', '.join(map(str, t.pool))} (shown, not judged: judged by accuracy)")
    return (f"{candidate} changed {t.candidate} of {t.items} answers; {pool_text(t, runs)}; "
            f"more drift than the noise floor {check_result(check, family)}")


def count_sentence(kind: str, t: CountTest, candidate: str, check: Check | None,
                   family: int) -> str:
    """Answers cut at max_tokens, or empty: the candidate's count against the pool's."""
    what = "cut at max_tokens" if kind == "truncated" else "empty"
    runs = "the baseline's setup had" if len(t.pool) > 1 else "the baseline had"
    return (f"{candidate} has {t.candidate} of {t.items} answers {what}; "
            f"{pool_text(t, runs)}; more than the floor {check_result(check, family)}")


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


NEED_UNITS = {"accuracy": "a loss of {:g} points", "drift": "{:g}% of its items changed",
              "forced": "a forced KL rise of {:.0%} over the floor"}


def need_sentence(n: Need) -> str:
    """What would judge one check of a task: "about 2,400 items and 2 noise runs would catch a
    loss of 2 points 80% of the time (this run has 24 items and 1 noise run)"."""
    what = NEED_UNITS.get(n.kind, "{}").format(n.target)
    runs = "noise runs" if n.kind != "forced" else "forced restarts"
    have = f"these runs have {n.have_items:,} items and {plural(n.have_noise_runs, 'noise run')}"
    if n.items is None or n.noise_runs is None:
        return f"no size with up to 8 {runs} would catch {what} 80% of the time ({have})"
    return (f"about {n.items:,} items and {n.noise_runs} {runs} would catch {what} 80% of the "
            f"time ({have})")
