"""Reports as JSON, built from the verdict objects as plain dicts (not from the blocks), so the
shape is a contract that does not depend on the layout. Strings stay as they are: json.dumps
escapes them, and a page that renders them escapes them itself."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from kveval.judge.accuracy import WorstCase
from kveval.judge.checks import WEIGHTS, Check, family_weight, first
from kveval.judge.collapse import NGRAM, Collapse, TaskCollapse, length_ratio
from kveval.judge.compare import Drift, Pairing, Side, TaskDrift
from kveval.judge.floor import CountTest
from kveval.judge.stats import Interval
from kveval.judge.verdict import (
    Accuracy,
    Examined,
    PairedComparison,
    ScoreReport,
    Setup,
)
from kveval.show import context_view
from kveval.show.blocks import Block, Heading, Note, Rendered, SideBySide, Table
from kveval.show.checks_view import notice_items, shown_checks, warnings_sentence
from kveval.show.curves import attach
from kveval.show.divergence import add_json
from kveval.show.score_view import TaskExtras
from kveval.show.seen import attach as attach_detectable
from kveval.show.words import (
    count_sentence,
    drift_sentence,
    overlap_sentence,
    paired_sentence,
    testable,
    worst_sentence,
)


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: such a figure is written as null."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def dumps(data: Mapping[str, Any]) -> str:
    from kveval.sink import json_text

    return json_text(_finite(dict(data)), indent=2, allow_nan=False)


def check_json(c: Check) -> dict[str, Any]:
    return {"task": c.task, "check": c.name, "kind": c.kind, "p_value": c.p_value,
            "min_p": c.min_p, "testable": c.testable, "adjusted_p": c.adjusted_p,
            "alpha": c.alpha, "weight": c.weight, "level": c.level, "run": c.run,
            "why_not": c.why_not or None, "shown": c.alarmed}


def interval_json(interval: Interval) -> list[float]:
    return [interval.low, interval.high]


def accuracy_json(acc: Accuracy | None) -> dict[str, Any] | None:
    if acc is None:
        return None
    return {"correct": acc.correct, "n": acc.n, "accuracy": acc.rate,
            "interval": interval_json(acc.interval)}


def side_json(side: Side | None) -> dict[str, Any] | None:
    if side is None:
        return None
    found = side.not_forced
    return {"label": side.label, "path": side.path, **({"not_forced": found} if found else {})}


def setup_json(setup: Setup | None) -> dict[str, Any] | None:
    if setup is None:
        return None
    return {
        "labels": list(setup.labels),
        "models": list(setup.models),
        "concurrency": list(setup.concurrency),
        "differences": [{"key": d.key, "baseline": d.base, "candidate": d.other}
                        for d in setup.differences],
        "warnings": list(setup.warnings),
    }


def pairing_json(p: Pairing) -> dict[str, int]:
    return {"pairs": len(p.pairs), "only_baseline": p.only_base, "only_other": p.only_other,
            "with_errors": p.with_errors}


def drift_json(d: Drift | None) -> dict[str, Any] | None:
    if d is None:
        return None
    return {"pairs": d.pairs, "identical": d.identical, "changed": d.changed,
            "mean_prefix_ratio": d.mean_prefix_ratio,
            "median_first_difference": d.median_first_difference}


def count_json(t: CountTest | None, check: Check | None) -> dict[str, Any] | None:
    if t is None:
        return None
    spread = t.spread
    return {"items": t.items, "candidate": t.candidate, "pool": list(t.pool),
            "exact_p": t.exact_p, "spread_p": t.spread_p, "p_value": t.p_value,
            "spread_measured": t.spread_measured,
            "spread": None if spread is None else {
                "scale": t.scale, "variance": spread.variance,
                "df": spread.df if math.isfinite(spread.df) else None,
                "counting_floor": spread.floor, "runs": spread.runs},
            "adjusted_p": None if check is None else check.adjusted_p,
            "level": None if check is None else check.level,
            "beyond_at_level": None if check is None or not check.run else t.bound(check.level),
            "shown": None if check is None else check.alarmed,
            "new_answers": novel_json(t)}


def novel_json(t: CountTest) -> dict[str, Any] | None:
    """The accuracy check's test from three runs of the setup or more (judge/novel.py)."""
    n = t.novel
    if n is None:
        return None
    return {"answers": n.answers, "losses": n.losses, "gains": n.gains,
            "net_cost": n.cost, "pool_answers": n.pool_answers, "pool_losses": n.pool_losses,
            "pool_gains": n.pool_gains, "shift_sd": n.shift_sd,
            "pool_cost_per_answer": n.rate, "excess": n.excess}


def collapse_side_json(c: Collapse, ratio: float | None) -> dict[str, Any]:
    return {"answers": c.answers, "truncated": c.truncated, "empty": c.empty,
            "length_ratio": ratio, "repetition": c.repetition, "mean_length": c.mean_length}


def collapse_json(k: TaskCollapse | None, checks: Sequence[Check] = (), task: str = "",
                  candidate: str = "") -> dict[str, Any] | None:
    """The candidate's figures at the top, the baseline's and each noise run's inside, and
    the truncated and empty checks."""
    if k is None:
        return None
    family = testable(checks)
    tests = {}
    for kind, test in (("truncated", k.truncated_test), ("empty", k.empty_test)):
        check = first(checks, task, kind)
        tests[f"{kind}_test"] = {**(count_json(test, check) or {}),
                                 "summary": count_sentence(kind, test, candidate, check, family)}
    return {**collapse_side_json(k.candidate, k.length_ratio), "ngram": NGRAM,
            "baseline": collapse_side_json(k.baseline, 1.0),
            "noise": [collapse_side_json(n, length_ratio(n, k.baseline)) for n in k.noise],
            **tests}


def task_drift_json(t: TaskDrift, ex: Examined) -> dict[str, Any]:
    cand = ex.comparison.candidate.label
    judged = {a.task for a in ex.accuracy}
    check = None if t.task in judged else first(ex.checks, t.task, "drift")
    return {
        "task": t.task,
        "candidate": drift_json(t.candidate),
        "noise": drift_json(t.noise),
        "noise_runs": [drift_json(d) for d in t.noise_runs],
        "between_noise": [drift_json(d) for d in t.between_noise],
        "drift_test": count_json(t.changed, check),
        "instability": [drift_json(d) for d in t.instability],
        "reasoning": drift_json(t.reasoning),
        "collapse": collapse_json(t.collapse, ex.checks, t.task, cand),
        "summary": drift_sentence(t, cand, check, testable(ex.checks),
                                  [n.label for n in ex.comparison.noises], t.task in judged),
        "diverged": [{"item_id": p.key[1], "prefix_ratio": p.prefix_ratio,
                      "first_difference": p.first_difference, "baseline": p.base_text,
                      "candidate": p.other_text} for p in t.diverged],
    }


def family_json(ex: Examined) -> dict[str, Any]:
    """The family of checks and the warnings (divergence beyond the floor, noise runs that are
    copies, bad batches set apart, a spread not measured), as every verdict JSON holds them."""
    return {"alpha": ex.family.alpha, "checks": [check_json(c) for c in ex.checks],
            "family_size": testable(ex.checks), "family_weight": family_weight(ex.checks),
            "weights": dict(WEIGHTS),
            "warnings": [check_json(c) for c in shown_checks(ex)]
            + [{"kind": kind, "text": text} for kind, text in notice_items(ex)],
            "warning": warnings_sentence(ex) or None}


def compare_json(setup: Setup | None, ex: Examined) -> dict[str, Any]:
    c = ex.comparison
    data = {
        "command": "compare",
        "baseline": side_json(c.base),
        "candidate": side_json(c.candidate),
        "noise": side_json(c.noise),
        "noises": [side_json(n) for n in c.noises],
        "candidate_repeats": [side_json(x) for x in c.repeats],
        "setup": setup_json(setup),
        "pairing": pairing_json(c.pairing),
        **family_json(ex),
        "tasks": [task_drift_json(t, ex) for t in c.tasks],
    }
    return attach_detectable(context_view.add_json(
        add_json(attach(data, ex.curves, ex.checks), ex), ex), ex)


def paired_json(c: PairedComparison, base: str, candidate: str, check: Check | None = None,
                family: int = 1, pooled: CountTest | None = None) -> dict[str, Any]:
    """`p_value` and `adjusted_p` are the family's one-sided accuracy check (the candidate
    against the baseline's setup); McNemar's two-sided p of the baseline-candidate table is
    `mcnemar_p`, and the 95% interval beside it is unadjusted."""
    t = c.table
    return {
        "task": c.task, "metric": c.metric,
        "baseline": accuracy_json(c.baseline), "candidate": accuracy_json(c.candidate),
        "both": t.both, "lost": t.lost, "gained": t.gained, "neither": t.neither,
        "p_value": None if check is None else check.p_value,
        "mcnemar_p": c.p_value, "difference": t.difference,
        "difference_interval": interval_json(c.difference), "interval_adjusted": False,
        "largest_loss": c.largest_loss, "overlap": c.overlap,
        "overlap_verdict": overlap_sentence(c, candidate),
        "summary": paired_sentence(c, base, candidate, check, family, pooled),
        "sole_metric": c.sole_metric,
        "worst_case": worst_json(c.worst, candidate, check, family),
        "adjusted_p": None if check is None else check.adjusted_p,
        "level": None if check is None else check.level,
        "loss_shown": None if check is None else check.alarmed,
        "against_pool": count_json(pooled, check),
    }


def worst_json(w: WorstCase | None, candidate: str, check: Check | None = None,
               family: int = 1) -> dict[str, Any] | None:
    if w is None:
        return None
    t = w.table
    return {"errors": w.errors, "both": t.both, "lost": t.lost, "gained": t.gained,
            "neither": t.neither, "difference": t.difference,
            "difference_interval": interval_json(w.difference), "largest_loss": w.largest_loss,
            "summary": worst_sentence(w, candidate, None, check, family)}


def block_json(block: Block) -> dict[str, Any]:
    if isinstance(block, Table):
        return {"header": list(block.header), "rows": [list(r) for r in block.rows]}
    if isinstance(block, (Heading, Note)):
        return {"heading" if isinstance(block, Heading) else "warning": block.text}
    if isinstance(block, SideBySide):
        return {"title": block.title, block.left_label: block.left, block.right_label: block.right}
    if isinstance(block, Rendered):
        return block.data
    return {"text": block}


def score_json(r: ScoreReport, extras: TaskExtras | None = None,
               ex: Examined | None = None) -> dict[str, Any]:
    extras = extras or {}
    base = r.baseline.label if r.baseline else ""
    family = testable(ex.checks) if ex else 1
    judged = {(a.task, a.metric) for a in ex.accuracy} if ex else set()

    def check(c: PairedComparison) -> Check | None:
        return first(ex.checks, c.task, "accuracy") if ex and (c.task, c.metric) in judged \
            else None

    data = {
        "command": "score",
        "run": side_json(r.run),
        "tasks": [{"task": s.task, "items": s.items, "errors": s.errors, "unscored": s.unscored,
                   "flexible": accuracy_json(s.flexible), "strict": accuracy_json(s.strict),
                   "extras": [block_json(b) for b in extras.get(s.task, ())],
                   "collapse": score_collapse_json(r, s.task)}
                  for s in r.scores],
        "baseline": side_json(r.baseline),
        "setup": setup_json(r.setup),
        "pairing": pairing_json(r.pairing) if r.pairing else None,
        "paired": [paired_json(c, base, r.run.label, check(c), family,
                               ex.pooled(c.task) if ex and check(c) else None)
                   for c in r.accuracy],
        **(family_json(ex) if ex else {}),
    }
    return attach_detectable(attach(data, ex.curves, ex.checks), ex) if ex else data


def score_collapse_json(r: ScoreReport, task: str) -> dict[str, Any] | None:
    c = r.collapse.get(task)
    if c is None:
        return None
    base = r.baseline_collapse.get(task)
    return {**collapse_side_json(c, length_ratio(c, base) if base else None), "ngram": NGRAM}


