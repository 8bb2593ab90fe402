"""Renderings of token-level divergence: a table and a sentence per task, and their JSON.

Worded like the drift line: "q8_0 raised the per-item mean KL from 0.0002 (restart) to
0.011 nats per token on 16 items (the mean of each item's mean, ...; one-sided permutation
within items): beyond the noise floor shown at alpha 0.05 (p = 0.0004; Holm-adjusted over 6
checks, p = 0.0024)"; the table's KL mean pools all positions instead. Each test is
a check of the gate's family; with --max-kl it can fail the task. The teacher-forced passes
are drawn the same way, each against the baseline's own forced pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kveval.judge.checks import Check, first
from kveval.judge.divergence import Divergence
from kveval.judge.kl_test import TaskDivergence
from kveval.judge.verdict import Examined
from kveval.safe import one_line
from kveval.show.blocks import Block, Heading, Table
from kveval.show.kld_view import CAPTURE_NOTE, kld_block, kld_json
from kveval.show.kld_view import row as kld_row
from kveval.show.words import check_result, pct, testable

ESTIMATOR = ("KL(baseline || run) per token from both runs' top-K (a token a run did not "
             "list has at most its K-th probability): a lower bound of the full-vocabulary KL")


PER_ITEM = ("the mean of each item's mean, every item weighing alike, where the table's KL "
            "mean pools all positions")


def nats(x: float | None) -> str:
    if x is None:
        return "-"
    return "0" if x == 0 else f"{x:.2g}"


def _row(task: str, label: str, d: Divergence) -> tuple[str, ...]:
    return (task, label, str(d.items), str(d.positions), nats(d.kl_mean), nats(d.kl_p99),
            pct(d.top1_agreement), nats(d.dlogp_mean),
            "-" if d.flip_margin_median is None else f"{d.flip_margin_median:.2f} ({d.flips})")


def _noise_rows(t: TaskDivergence, noises: Sequence[str]) -> list[tuple[Divergence, str]]:
    """Each noise run with log-probabilities for the task, with its label."""
    return [(d, label) for d, label in zip(t.noise_runs, noises, strict=False) if d is not None]


def _floor_name(t: TaskDivergence, noises: Sequence[str]) -> str:
    labels = [label for _, label in _noise_rows(t, noises)]
    return labels[0] if len(labels) == 1 else f"mean of {', '.join(labels)}"


def divergence_table(tasks: Sequence[TaskDivergence], candidate: str,
                     noises: Sequence[str]) -> Table:
    rows = []
    for t in tasks:
        rows.append(_row(t.task, candidate, t.candidate))
        rows += [_row(t.task, label, d) for d, label in _noise_rows(t, noises)]
    return Table(("task", "run", "items", "positions", "KL mean (pooled)", "KL p99", "top-1 same",
                  "mean |dlogp|", "flip margin (n)"), tuple(rows))


def kl_check(ex: Examined, task: str, kind: str = "divergence",
             ) -> tuple[Check | None, int, str]:
    """The task's divergence (or forced) check and the size of its family."""
    return first(ex.checks, task, kind), testable(ex.checks), "check"


def kl_sentence(t: TaskDivergence, candidate: str, noises: Sequence[str],
                check: Check | None = None, family: int = 1, noun: str = "check") -> str:
    c = t.candidate
    if t.test is None or not _noise_rows(t, noises):
        return (f"{candidate} moved the next-token distributions by a mean KL of "
                f"{nats(c.kl_mean)} nats per token over {c.positions} positions of {c.items} "
                f"items; no noise run with log-probabilities to compare with")
    k, noise = t.test, _floor_name(t, noises)
    if k.candidate_kl > k.noise_kl:
        what = (f"{candidate} raised the per-item mean KL from {nats(k.noise_kl)} ({noise}) "
                f"to {nats(k.candidate_kl)} nats per token")
    else:
        what = (f"{candidate}'s per-item mean KL of {nats(k.candidate_kl)} nats per token is no "
                f"higher than {noise}'s {nats(k.noise_kl)}")
    beyond = f"beyond the noise floor by more than {k.shift:g} nats" if k.shift else \
        "beyond the noise floor"
    return (f"{what} on {k.items} items ({PER_ITEM}; one-sided permutation within items, "
            f"every noise run its own draw): {beyond} {check_result(check, family, noun)}")


def divergence_blocks(ex: Examined) -> list[Block]:
    """The divergence table and one sentence per task with log-probabilities."""
    tasks = [t for t in ex.divergences if t.task not in ex.family.skip]
    if not tasks:
        return []
    candidate = one_line(ex.comparison.candidate.label)
    noises = [one_line(n.label) for n in ex.comparison.noises]
    blocks: list[Block] = [Heading("token divergence"),
                           divergence_table(tasks, candidate, noises)]
    blocks += [f"{t.task} divergence: {kl_sentence(t, candidate, noises, *kl_check(ex, t.task))}"
               for t in tasks]
    table = kld_block([kld_row(t.task, label, d) for t in tasks
                       for label, d in ((candidate, t.candidate),
                                        *((n, dn) for dn, n in _noise_rows(t, noises)))])
    blocks += [Heading("divergence as llama-perplexity --kl-divergence prints it"), table,
               CAPTURE_NOTE] if table else []
    return blocks + [f"KL: {ESTIMATOR}; flip margin: the baseline's top-1 minus top-2 "
                     "log-probability where the tokens first differ (median, items)"]


def forced_blocks(ex: Examined) -> list[Block]:
    """The forced passes: each run's forced KL against the baseline's own forced pass, and
    one sentence per task."""
    tasks = [t for t in ex.forced if t.task not in ex.family.skip]
    if not tasks or ex.forced_runs is None:
        return []
    candidate = one_line(ex.forced_runs.candidate.label)
    noises = [one_line(n.label) for n in ex.forced_runs.noises]
    reference = one_line(ex.forced_runs.baseline.label)
    blocks: list[Block] = [
        Heading(f"teacher-forced divergence (each forced pass against {reference}, the "
                "baseline's answers forced on its own server)"),
        divergence_table(tasks, candidate, noises)]
    return blocks + [f"{t.task} forced: "
                     f"{kl_sentence(t, candidate, noises, *kl_check(ex, t.task, 'forced'))}"
                     for t in tasks]


def summary_json(d: Divergence | None) -> dict[str, Any] | None:
    if d is None:
        return None
    return {"kl_mean": d.kl_mean, "kl_p99": d.kl_p99, "top1_agreement": d.top1_agreement,
            "dlogp_mean": d.dlogp_mean, "flip_margin_median": d.flip_margin_median,
            "positions": d.positions, "items": d.items, "flips": d.flips,
            "kld": kld_json(d.kld)}


def task_json(t: TaskDivergence, candidate: str, noises: Sequence[str],
              check: Check | None, family: int, noun: str = "check") -> dict[str, Any]:
    data = summary_json(t.candidate) or {}
    data["noise"] = summary_json(t.noise)
    data["noise_runs"] = [{"label": label, **(summary_json(d) or {})}
                          for d, label in _noise_rows(t, noises)]
    data["test"] = None if t.test is None else {
        "items": t.test.items, "candidate_kl": t.test.candidate_kl,
        "noise_kl": t.test.noise_kl, "noise_runs": t.test.noise_runs,
        "p_value": t.test.p_value, "shift": t.test.shift,
        "adjusted_p": None if check is None else check.adjusted_p,
        "beyond_floor": None if check is None else check.alarmed,
        "in_family": check is not None and check.run,
        "gating": t.max_kl is not None}
    data["summary"] = kl_sentence(t, candidate, noises, check, family, noun)
    if t.max_kl is not None:
        data["max_kl"] = t.max_kl
    return data


def add_json(data: dict[str, Any], ex: Examined) -> dict[str, Any]:
    """Each task entry of a compare or gate JSON gets its "divergence" (null without
    log-probabilities) and its "forced_divergence" (null without forced runs)."""
    found = {t.task: t for t in ex.divergences}
    forced = {t.task: t for t in ex.forced}
    candidate = ex.comparison.candidate.label
    noises = [n.label for n in ex.comparison.noises]
    runs = ex.forced_runs
    forced_cand = runs.candidate.label if runs else candidate
    forced_noises = [n.label for n in runs.noises] if runs else noises
    for entry in data.get("tasks", []):
        t, f = found.get(entry.get("task")), forced.get(entry.get("task"))
        entry["divergence"] = (task_json(t, candidate, noises, *kl_check(ex, t.task))
                               if t else None)
        entry["forced_divergence"] = (task_json(f, forced_cand, forced_noises,
                                                *kl_check(ex, f.task, "forced"))
                                      if f else None)
    return data
