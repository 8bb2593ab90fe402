"""What would judge the tasks a verdict could not: the plan of the judged runs as a pilot
(judge/plan.py), per task, for the change `kveval plan` plans by default (a 2-point loss, 10% of
the items changed beyond the floor, a forced KL rise of 10% over the floor)."""

from __future__ import annotations

from collections.abc import Sequence

from kveval.judge.forced import Forced
from kveval.judge.judgeable import Need
from kveval.judge.plan import Plan, Targets, plan
from kveval.judge.sides import Side
from kveval.judge.verdict import GateReport

KL_RISE = 0.10  # a share of the forced floor's mean KL


def _needs(found: Plan, tasks: set[str], forced: bool = False) -> list[Need]:
    """The plan's needs of these tasks: accuracy and drift from the free runs, divergence
    (named forced) from the forced ones."""
    t = found.targets
    target = ({"divergence": t.detect_kl or 0.0} if forced else
              {"accuracy": t.detect, "drift": t.detect_drift})
    return [Need(p.task, "forced" if forced else p.kind, target[p.kind], p.items_needed,
                 p.noise_runs_needed, p.items, found.noise_runs)
            for p in found.tasks if p.task in tasks and p.kind in target and not p.note]


def needs(report: GateReport, base: Side, noises: Sequence[Side], cand: Side,
          forced: Forced | None = None) -> tuple[Need, ...]:
    """For each task not judged: the items and noise runs its checks would need."""
    tasks = {d.task for d in report.decisions if d.status == "not judged"}
    if not tasks:
        return ()
    found = _needs(plan(base, list(noises), cand), tasks)
    if forced is not None and forced.noises:
        kl = Targets(detect_kl=KL_RISE, kl_relative=True)
        found += _needs(plan(forced.baseline, list(forced.noises), forced.candidate, kl),
                        tasks, forced=True)
    return tuple(found)
