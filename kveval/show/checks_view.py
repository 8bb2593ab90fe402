"""The family of checks rendered: one table with every check's p-value and adjusted p-value,
the collapse sentences, the divergence warning and the calibration note beside a verdict."""

from __future__ import annotations

from collections.abc import Sequence

from kveval.judge.calibration import false_alarm_note
from kveval.judge.checks import KL_KINDS, Check, first
from kveval.judge.kl_test import KlTest
from kveval.judge.verdict import Examined
from kveval.show.blocks import Block, Table
from kveval.show.words import count_sentence, over_floor, p_text, p_value, testable


def check_outcome(c: Check) -> str:
    if not c.run:
        return "not run"
    if not c.testable:
        return "cannot reach its level"
    return "SHOWN" if c.alarmed else "-"


def checks_table(checks: Sequence[Check]) -> Table:
    """Every check: what it tests, its declared weight, its one-sided p-value, the level it
    was tested at, the Holm-adjusted p-value, the result."""
    rows = tuple((c.task, c.name, f"{c.weight:g}", p_value(c.p_value, c.level),
                  f"{c.level:.2g}" if c.testable else "-",
                  p_value(c.adjusted_p, c.alpha) if c.testable else "-", check_outcome(c))
                 for c in checks)
    return Table(("task", "check", "weight", "p (one-sided)", "its level", "Holm-adjusted",
                  "result"), rows)


def check_lines(ex: Examined, accuracy: bool = True) -> list[Block]:
    """Sentences for the collapse checks that found anything to count."""
    cand = ex.comparison.candidate.label
    family = testable(ex.checks)
    lines: list[Block] = []
    for t in ex.comparison.tasks:
        k = t.collapse
        if k is None or t.task in ex.by_position:
            continue
        for kind, test in (("truncated", k.truncated_test), ("empty", k.empty_test)):
            check = first(ex.checks, t.task, kind)
            if test.candidate or (check is not None and check.alarmed):
                lines.append(f"{t.task} {kind}: "
                             f"{count_sentence(kind, test, cand, check, family)}")
    return lines


def shown_checks(ex: Examined) -> list[Check]:
    """The divergence checks significant without --max-kl: stated, never deciding."""
    if ex.family.max_kl is not None:
        return []
    return [c for c in ex.checks if c.alarmed and c.kind in KL_KINDS]


def kl_test_of(ex: Examined, c: Check) -> KlTest | None:
    e = next((e for e in ex.evidence if e.task == c.task), None)
    return None if e is None else (e.forced if c.kind == "forced" else e.divergence)


def rise_words(ex: Examined, c: Check) -> str:
    """A divergence check's rise in nats and over the floor, of the per-item means its test
    compares: "gsm8k forced KL +0.0012 nats per token, per-item mean (+6.1% over the floor)";
    the context task's with where it starts."""
    found = next((f for f in ex.context if f.task == c.task), None)
    if c.kind == "context" and found is not None:
        from kveval.show.context_view import rise_words as context_rise

        return context_rise(found, c)
    test = kl_test_of(ex, c)
    what = f"{c.task} {'forced KL' if c.kind == 'forced' else 'KL'}"
    if test is None:
        return what
    rise = test.candidate_kl - test.noise_kl
    over = over_floor(rise, test.noise_kl) if test.noise_kl > 0 else "from a floor of 0"
    return f"{what} {rise:+.2g} nats per token, per-item mean ({over})"


def warnings_sentence(ex: Examined) -> str:
    """Divergence beyond the noise floor without --max-kl, with its size."""
    shown = shown_checks(ex)
    if not shown:
        return ""
    worst = max(c.adjusted_p for c in shown)
    assumed = ("; with fewer than three noise runs the restarts' own spread of KL is assumed"
               if len(ex.comparison.noises) < 3 else "")
    return (f"next-token distributions moved beyond the noise floor: "
            f"{', '.join(rise_words(ex, c) for c in shown)} (Holm-adjusted {p_text(worst)}"
            f"{assumed}; --max-kl NATS gates on it)")


def calibration_notes(noise_runs: int, max_kl: bool) -> list[str]:
    """What the simulation measured for a gate with this few noise runs, where it exceeds
    the declared level: the defaults' checks, and with --max-kl divergence's."""
    notes = [false_alarm_note(noise_runs)] + ([false_alarm_note(noise_runs, True)] if max_kl
                                              else [])
    return [n for n in notes if n]


def notice_items(ex: Examined) -> list[tuple[str, str]]:
    """(kind, sentence) of everything a verdict must say beside its checks: inputs set apart
    (copies, bad batches), a spread between restarts not measured, the simulated false-alarm
    rate of a gate with this few noise runs."""
    found = [("inputs", text) for text in ex.notices]
    runs = len(ex.comparison.noises)
    return found + [("spread", n) for n in calibration_notes(runs, ex.family.max_kl is not None)]


def notices(ex: Examined) -> list[str]:
    return [text for _, text in notice_items(ex)]
