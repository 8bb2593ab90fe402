"""Reports as JSON, built from the verdict objects as plain dicts (not from the blocks), so the
shape is a contract that does not depend on the layout. Strings stay as they are: json.dumps
escapes them, and a page that renders them escapes them itself."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kveval.judge.accuracy import WorstCase
from kveval.judge.collapse import NGRAM, Collapse, TaskCollapse, length_ratio
from kveval.judge.compare import Comparison, Drift, NoiseTest, Pairing, Side, TaskDrift
from kveval.judge.decide import TaskDecision
from kveval.judge.floor import SpreadTest
from kveval.judge.stats import Interval
from kveval.judge.verdict import Accuracy, GateReport, PairedComparison, ScoreReport, Setup
from kveval.show.blocks import Block, Heading, Note, Rendered, SideBySide, Table
from kveval.show.gate_view import collapse_reason, decision_reason, gate_summary
from kveval.show.score_view import TaskExtras
from kveval.show.words import drift_sentence, overlap_sentence, paired_sentence, worst_sentence


def dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2)


def interval_json(interval: Interval) -> list[float]:
    return [interval.low, interval.high]


def accuracy_json(acc: Accuracy | None) -> dict[str, Any] | None:
    if acc is None:
        return None
    return {"correct": acc.correct, "n": acc.n, "accuracy": acc.rate,
            "interval": interval_json(acc.interval)}


def side_json(side: Side | None) -> dict[str, Any] | None:
    return None if side is None else {"label": side.label, "path": side.path}


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


def test_json(t: NoiseTest | None) -> dict[str, Any] | None:
    if t is None:
        return None
    return {"items": t.items, "candidate_changed": t.candidate_changed,
            "noise_changed": t.noise_changed, "candidate_only": t.candidate_only,
            "noise_only": t.noise_only, "p_value": t.p_value, "drifts_more": t.drifts_more}


def spread_json(s: SpreadTest | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"items": s.items, "candidate": s.candidate, "noise": list(s.noise),
            "prediction_limit": s.limit, "p_value": s.p_value, "adjusted_p": s.adjusted_p,
            "exceeds": s.exceeds, "method": "one-sided 95% prediction interval (logit scale)"}


def collapse_side_json(c: Collapse, ratio: float | None) -> dict[str, Any]:
    return {"answers": c.answers, "truncated": c.truncated, "empty": c.empty,
            "length_ratio": ratio, "repetition": c.repetition, "mean_length": c.mean_length}


def collapse_json(k: TaskCollapse | None) -> dict[str, Any] | None:
    """The candidate's figures at the top, the baseline's and each noise run's inside."""
    if k is None:
        return None
    return {**collapse_side_json(k.candidate, k.length_ratio), "ngram": NGRAM,
            "baseline": collapse_side_json(k.baseline, 1.0),
            "noise": [collapse_side_json(n, length_ratio(n, k.baseline)) for n in k.noise],
            "candidate_only": k.candidate_only, "reference_only": k.reference_only}


def task_drift_json(t: TaskDrift, candidate: str, noise: str | None) -> dict[str, Any]:
    return {
        "task": t.task,
        "candidate": drift_json(t.candidate),
        "noise": drift_json(t.noise),
        "noise_test": test_json(t.test),
        "noise_runs": [drift_json(d) for d in t.noise_runs],
        "between_noise": [drift_json(d) for d in t.between_noise],
        "floor_spread_known": len(t.noise_runs) >= 2,
        "spread_test": spread_json(t.spread),
        "instability": [drift_json(d) for d in t.instability],
        "reasoning": drift_json(t.reasoning),
        "collapse": collapse_json(t.collapse),
        "summary": drift_sentence(t, candidate, noise),
        "diverged": [{"item_id": p.key[1], "prefix_ratio": p.prefix_ratio,
                      "first_difference": p.first_difference, "baseline": p.base_text,
                      "candidate": p.other_text} for p in t.diverged],
    }


def compare_json(setup: Setup | None, c: Comparison) -> dict[str, Any]:
    noise = c.noise.label if c.noise else None
    return {
        "command": "compare",
        "baseline": side_json(c.base),
        "candidate": side_json(c.candidate),
        "noise": side_json(c.noise),
        "noises": [side_json(n) for n in c.noises],
        "candidate_repeats": [side_json(x) for x in c.repeats],
        "setup": setup_json(setup),
        "pairing": pairing_json(c.pairing),
        "tasks": [task_drift_json(t, c.candidate.label, noise) for t in c.tasks],
    }


def paired_json(c: PairedComparison, base: str, candidate: str) -> dict[str, Any]:
    t = c.table
    return {
        "task": c.task, "metric": c.metric,
        "baseline": accuracy_json(c.baseline), "candidate": accuracy_json(c.candidate),
        "both": t.both, "lost": t.lost, "gained": t.gained, "neither": t.neither,
        "p_value": c.p_value, "difference": t.difference,
        "difference_interval": interval_json(c.difference),
        "largest_loss": c.largest_loss, "overlap": c.overlap,
        "overlap_verdict": overlap_sentence(c, candidate),
        "summary": paired_sentence(c, base, candidate),
        "sole_metric": c.sole_metric,
        "worst_case": worst_json(c.worst, candidate),
    }


def worst_json(w: WorstCase | None, candidate: str) -> dict[str, Any] | None:
    if w is None:
        return None
    t = w.table
    return {"errors": w.errors, "both": t.both, "lost": t.lost, "gained": t.gained,
            "neither": t.neither, "difference": t.difference,
            "difference_interval": interval_json(w.difference), "largest_loss": w.largest_loss,
            "summary": worst_sentence(w, candidate)}


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


def score_json(r: ScoreReport, extras: TaskExtras | None = None) -> dict[str, Any]:
    extras = extras or {}
    base = r.baseline.label if r.baseline else ""
    return {
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
        "paired": [paired_json(c, base, r.run.label) for c in r.accuracy],
    }


def score_collapse_json(r: ScoreReport, task: str) -> dict[str, Any] | None:
    c = r.collapse.get(task)
    if c is None:
        return None
    base = r.baseline_collapse.get(task)
    return {**collapse_side_json(c, length_ratio(c, base) if base else None), "ngram": NGRAM}


def decision_json(d: TaskDecision, r: GateReport) -> dict[str, Any]:
    return {"task": d.task, "rule": d.rule, "passed": d.passed, "status": d.status,
            "cannot_judge": d.cannot_judge, "skipped": d.skipped, "collapsed": d.collapsed,
            "drift_p_adjusted": d.drift_p, "collapse_p_adjusted": d.collapse_p,
            "reason": decision_reason(d, r), "collapse_reason": collapse_reason(d, r)}


def gate_json(r: GateReport) -> dict[str, Any]:
    c = r.comparison
    base, cand = c.base.label, c.candidate.label
    noise = c.noise.label if c.noise else None
    comps = {a.task: a for a in r.accuracy}
    drifts = {t.task: t for t in c.tasks}
    return {
        "command": "gate",
        "verdict": r.verdict,
        "exit_code": r.exit_code,
        "policy": r.policy, "margin_points": r.margin if r.policy == "paired" else None,
        "metric": r.metric,
        "baseline": side_json(c.base), "candidate": side_json(c.candidate),
        "noise": side_json(c.noise),
        "noises": [side_json(n) for n in c.noises],
        "candidate_repeats": [side_json(x) for x in c.repeats],
        "setup": setup_json(r.setup),
        "pairing": pairing_json(c.pairing),
        "tasks": [{**decision_json(d, r),
                   "accuracy": paired_json(comps[d.task], base, cand) if d.task in comps else None,
                   "drift": (task_drift_json(drifts[d.task], cand, noise)
                             if d.task in drifts else None),
                   "collapse": collapse_json(drifts[d.task].collapse) if d.task in drifts else None}
                  for d in r.decisions],
        "summary": gate_summary(r),
    }


def cannot_judge_json(reason: str) -> dict[str, Any]:
    return {"command": "gate", "verdict": "cannot judge", "exit_code": 2, "reason": reason}
