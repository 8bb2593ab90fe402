"""The context task by position: a table of buckets for the candidate and every restart (the
floor), one sentence per task saying whether the KL rose beyond the floor and from which
bucket on, llama-perplexity's KLD table per bucket, and their JSON (judge/positions.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kveval.judge.checks import Check, first
from kveval.judge.positions import Bucket, ContextFound, RunCurve
from kveval.judge.verdict import Examined
from kveval.safe import one_line
from kveval.show.blocks import Block, Heading, Table
from kveval.show.kld_view import _est, _g, kld_json
from kveval.show.words import p_text

HEADER = ("task", "run", "positions", "scored", "mean KL", "KL p99", "perplexity",
          "same top")
KLD_HEADER = ("task", "run", "positions", "mean KL ± se", "median", "p99", "p99.9",
              "same top ± se", "RMS Δp ± se")


def percent_change(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:+.{digits}f}%"


def share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _row(task: str, label: str, b: Bucket) -> tuple[str, ...]:
    return (task, one_line(label), b.label, f"{b.positions:,}", _g(b.kl_mean), _g(b.kl_p99),
            percent_change(b.ppl_change), share(b.same_top))


def _runs(found: ContextFound) -> list[RunCurve]:
    return [found.candidate, *found.noises]


def bucket_table(tasks: Sequence[ContextFound]) -> Table:
    rows = [_row(f.task, run.label, b) for f in tasks for run in _runs(f) for b in run.buckets]
    return Table(HEADER, tuple(rows))


def kld_table(tasks: Sequence[ContextFound]) -> Table:
    rows = []
    for f in tasks:
        for run in _runs(f):
            rows += [(f.task, one_line(run.label), b.label, _est(k.kl_mean), _g(k.kl["median"]),
                      _g(k.kl["p99"]), _g(k.kl["p99.9"]), _est(k.same_top, True),
                      _est(k.dp_rms, True)) for b in run.buckets if (k := b.kld) is not None]
    return Table(KLD_HEADER, tuple(rows))


def starts(found: ContextFound, check: Check | None) -> Bucket | None:
    """Where the rise starts, where the check showed one."""
    if check is None or not check.alarmed:
        return None
    return found.starts(check.level)


def sentence(found: ContextFound, check: Check | None) -> str:
    """One line: the rise and where it starts, or that none showed, with the adjusted p."""
    test = found.test
    if test is None or check is None or not check.run:
        return (f"{found.task}: {found.documents} document(s) forced; no restart holds them, "
                "so no rise can be told from a restart's own")
    rise = test.candidate_kl - test.noise_kl
    where = starts(found, check)
    beyond = f"by more than {test.shift:g} nats " if test.shift else ""
    figures = f"{test.candidate_kl:.3g} nats against {test.noise_kl:.3g}"
    if not check.alarmed:
        return (f"{found.task}: no rise of the KL {beyond}beyond the restarts' floor shown "
                f"({figures}; Holm-adjusted {p_text(check.adjusted_p)})")
    onset = f", from positions {where.label} on" if where else ""
    tolerated = f", more than the {test.shift:g} nats tolerated," if test.shift else ""
    return (f"{found.task}: the KL rose {rise:+.3g} nats over the restarts' floor{tolerated} "
            f"({figures}{onset}; Holm-adjusted {p_text(check.adjusted_p)})")


def rise_words(found: ContextFound, check: Check) -> str:
    """For the headline: "context KL +0.021 nats by position, from 2k-4k on"."""
    test = found.test
    rise = 0.0 if test is None else test.candidate_kl - test.noise_kl
    where = starts(found, check)
    return (f"{found.task} KL {rise:+.2g} nats by position"
            + (f", from positions {where.label} on" if where else ""))


def short_line(found: ContextFound) -> str | None:
    if not found.short:
        return None
    return (f"{found.task}: shorter than the longest bucket, so the later buckets hold fewer "
            f"documents: {', '.join(one_line(s) for s in found.short)}")


def context_blocks(ex: Examined) -> list[Block]:
    tasks = [f for f in ex.context if f.task not in ex.family.skip]
    if not tasks:
        return []
    blocks: list[Block] = [
        Heading("by position: long documents forced from their first token (each run against "
                "the baseline's pass; the restarts are the floor)"), bucket_table(tasks)]
    blocks += [sentence(f, first(ex.checks, f.task, "context")) for f in tasks]
    blocks += [line for f in tasks if (line := short_line(f)) is not None]
    return blocks + [Heading("by position, as llama-perplexity --kl-divergence prints it"),
                     kld_table(tasks),
                     "perplexity: the change of the document's own next-token perplexity "
                     "(exp of the mean change in its negative log-probability)"]


def _bucket_json(b: Bucket) -> dict[str, Any]:
    return {"start": b.start, "end": b.end, "label": b.label, "positions": b.positions,
            "kl_mean": b.kl_mean, "kl_p99": b.kl_p99, "ppl_change_pct": b.ppl_change,
            "same_top": b.same_top, "kld": kld_json(b.kld)}


def context_json(found: ContextFound, checks: Sequence[Check]) -> dict[str, Any]:
    check = first(checks, found.task, "context")
    where = starts(found, check)
    return {
        "documents": found.documents,
        "candidate": {"label": found.candidate.label,
                      "buckets": [_bucket_json(b) for b in found.candidate.buckets]},
        "noise_runs": [{"label": n.label, "buckets": [_bucket_json(b) for b in n.buckets]}
                       for n in found.noises],
        "bucket_p": list(found.bucket_p),
        "rise_starts": None if where is None else where.label,
        "max_ppl_rise": found.max_ppl_rise,
        "summary": sentence(found, check)}


def add_json(data: dict[str, Any], ex: Examined) -> dict[str, Any]:
    """Each task entry of a compare or gate JSON gets its "context" (null but for a context
    task)."""
    found = {f.task: f for f in ex.context}
    for entry in data.get("tasks", []):
        f = found.get(entry.get("task"))
        entry["context"] = context_json(f, ex.checks) if f else None
    return data
