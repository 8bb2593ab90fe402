"""The gate's JSON document (`gate --json`, `DIR/gate.json`): the verdict, each task's decision
and its evidence, the family, what it could have seen; a contract other tools read."""

from __future__ import annotations

import dataclasses
from typing import Any

from kveval.judge.checks import first, of_task
from kveval.judge.decide import TaskDecision
from kveval.judge.verdict import (
    GateReport,
)
from kveval.show import context_view
from kveval.show.curves import attach
from kveval.show.divergence import add_json
from kveval.show.gate_view import decision_reason, gate_summary
from kveval.show.json_out import (
    check_json,
    collapse_json,
    family_json,
    paired_json,
    pairing_json,
    setup_json,
    side_json,
    task_drift_json,
)
from kveval.show.seen import attach as attach_detectable
from kveval.show.words import (
    testable,
)


def decision_json(d: TaskDecision, r: GateReport) -> dict[str, Any]:
    return {"task": d.task, "rule": d.rule, "passed": d.passed, "status": d.status,
            "outcome": d.outcome, "failed": list(d.failed), "cannot_judge": d.cannot_judge,
            "skipped": d.skipped, "margin_points": d.margin, "shown": list(d.shown),
            "not_judged": d.not_judged,
            "checks": [check_json(c) for c in of_task(r.checks, d.task)],
            "reason": decision_reason(d, r)}


def gate_json(r: GateReport) -> dict[str, Any]:
    ex = r.examined
    c = ex.comparison
    base, cand = c.base.label, c.candidate.label
    family = testable(ex.checks)
    comps = {a.task: a for a in r.accuracy}
    drifts = {t.task: t for t in c.tasks}
    data = {
        "command": "gate",
        "verdict": r.verdict,
        "exit_code": r.exit_code,
        "policy": r.policy, "margin_points": r.margin if r.policy == "paired" else None,
        "metric": r.metric,
        "min_recovery": ex.family.min_recovery, "max_kl": ex.family.max_kl,
        "max_ppl_rise": ex.family.max_ppl_rise,
        "baseline": side_json(c.base), "candidate": side_json(c.candidate),
        "noise": side_json(c.noise),
        "noises": [side_json(n) for n in c.noises],
        "candidate_repeats": [side_json(x) for x in c.repeats],
        "setup": setup_json(r.setup),
        "pairing": pairing_json(c.pairing),
        **family_json(ex),
        "tasks": [{**decision_json(d, r),
                   "accuracy": (paired_json(comps[d.task], base, cand,
                                            first(r.checks, d.task, "accuracy"), family,
                                            ex.pooled(d.task))
                                if d.task in comps else None),
                   "drift": task_drift_json(drifts[d.task], ex) if d.task in drifts else None,
                   "collapse": (collapse_json(drifts[d.task].collapse, r.checks, d.task, cand)
                                if d.task in drifts else None)}
                  for d in r.decisions],
        "needs": [dataclasses.asdict(n) for n in r.needs],
        "summary": gate_summary(r),
    }
    return attach_detectable(context_view.add_json(
        add_json(attach(data, ex.curves, ex.checks), ex), ex), ex)


def cannot_judge_json(reason: str) -> dict[str, Any]:
    return {"command": "gate", "verdict": "cannot judge", "exit_code": 2, "reason": reason}
