"""`kveval score` as blocks: accuracy per task, and with a baseline the paired view."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kveval.judge.checks import first
from kveval.judge.collapse import length_ratio
from kveval.judge.sides import Side
from kveval.judge.verdict import Examined, PairedComparison, ScoreReport, TaskScore
from kveval.safe import one_line
from kveval.show.blocks import Block, Heading, Note, Table
from kveval.show.checks_view import checks_table
from kveval.show.sections import pairing_line, setup_blocks, sides_block
from kveval.show.seen import detectable_lines
from kveval.show.words import (
    REPETITION_NOTE,
    accuracy_text,
    collapse_text,
    overlap_sentence,
    paired_sentence,
    testable,
    worst_sentence,
)

TaskExtras = Mapping[str, Sequence[Block]]  # per task: sections appended below its score


def _metric_label(score: TaskScore, metric: str) -> str:
    return metric if score.strict is not None else ""


def score_rows(scores: Sequence[TaskScore]) -> tuple[tuple[str, ...], ...]:
    rows = []
    for s in scores:
        if s.flexible is None:
            continue
        rows.append((s.task, _metric_label(s, "flexible"), accuracy_text(s.flexible),
                     str(s.errors)))
        if s.strict is not None:
            rows.append((s.task, "strict", accuracy_text(s.strict), str(s.errors)))
    return tuple(rows)


def unscored_lines(scores: Sequence[TaskScore]) -> list[str]:
    return [f"{s.task}: {s.unscored} answered, no ground truth; {s.errors} errors"
            for s in scores if s.flexible is None]


def paired_rows(comps: Sequence[PairedComparison], candidate: str) -> tuple[tuple[str, ...], ...]:
    return tuple(
        (c.task, "" if c.sole_metric else c.metric, accuracy_text(c.baseline),
         accuracy_text(c.candidate), overlap_sentence(c, candidate))
        for c in comps
    )


def collapse_rows(r: ScoreReport) -> tuple[tuple[str, ...], ...]:
    rows = []
    for task, c in r.collapse.items():
        base = r.baseline_collapse.get(task)
        ratio = length_ratio(c, base) if base is not None else None
        truncated, empty, repeated = collapse_text(c)
        rows.append((task, str(c.answers), truncated, empty,
                     "-" if ratio is None else f"{ratio:.2f}", repeated))
    return tuple(rows)


def collapse_blocks(r: ScoreReport) -> list[Block]:
    if not r.collapse:
        return []
    ratio = "length ratio" if r.baseline is not None else "length ratio (no baseline)"
    header = ("task", "answers", "truncated", "empty", ratio, "repetition")
    return [Heading("collapse"), Table(header, collapse_rows(r)), REPETITION_NOTE]


def paired_lines(r: ScoreReport, base: str, cand: str, ex: Examined | None) -> list[Block]:
    """The paired view of each task and metric; the metric the family judges carries its
    check's adjusted p-value, the other metric is shown without one."""
    lines: list[Block] = []
    family = testable(ex.checks) if ex else 1
    judged = {(a.task, a.metric) for a in ex.accuracy} if ex else set()
    for c in r.accuracy:
        name = c.task if c.sole_metric else f"{c.task} {c.metric}"
        check = first(ex.checks, c.task, "accuracy") if ex and (c.task, c.metric) in judged \
            else None
        pooled = ex.pooled(c.task) if ex and check else None
        lines.append(f"{name}: {paired_sentence(c, base, cand, check, family, pooled)}")
        if c.worst is not None:
            lines.append(f"{name}: {worst_sentence(c.worst, cand, None, check, family)}")
    return lines


def forced_note(side: Side) -> str | None:
    """A teacher-forced run holds the baseline's answers: their scores are not its own."""
    tf = side.header.teacher_force if side.header else None
    if not tf:
        return None
    base = one_line(str(tf.get("baseline") or "the baseline"))
    return (f"{side.label} is a teacher-forced pass: its {len(side.items)} answers are "
            f"{base}'s, forced, so their accuracy is {base}'s, not this server's (none is "
            "shown); `kveval compare` judges its log-probabilities")


def score_blocks(r: ScoreReport, extras: TaskExtras | None = None,
                 ex: Examined | None = None) -> list[Block]:
    blocks: list[Block] = [Heading(f"kveval score: {r.run.label}"),
                           sides_block(("run", r.run), ("baseline", r.baseline))]
    if r.run.truncated_tail and r.setup is None:
        blocks.append(Note(f"{r.run.path}: the last line was cut short (a crash mid-write) "
                           "and skipped"))
    forced = forced_note(r.run)
    rows = () if forced else score_rows(r.scores)
    if rows:
        blocks.append(Table(("task", "metric", "accuracy and 95% interval", "errors"), rows))
    blocks += [forced] if forced else [*unscored_lines(r.scores), *collapse_blocks(r)]
    for task, extra in (extras or {}).items():
        if extra:
            blocks += [Heading(task), *extra]
    if r.baseline is None or r.pairing is None:
        return blocks
    base, cand = r.baseline.label, r.run.label
    blocks += [Heading(f"against the baseline {base}"), *setup_blocks(r.setup)]
    blocks.append(Table(("task", "metric", base, cand, "overlap verdict"),
                        paired_rows(r.accuracy, cand)))
    blocks += paired_lines(r, base, cand, ex)
    if ex is not None:
        blocks += [Heading("checks"), checks_table(ex.checks), *detectable_lines(ex)]
    blocks.append(pairing_line(r.pairing, base, cand))
    return blocks
