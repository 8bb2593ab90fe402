"""A sweep of candidates against one pool (`kveval ab` with several): each candidate's own
gate, its costs and what it bought, and the sweep's exit (pure).

Each candidate is its own rollout decision and is gated at the gate's level, as it would be
alone: a user who rolls out one setting takes that setting's risk, not the sweep's, and a
family over candidates would make each verdict depend on how many others were tried beside
it (docs/verdicts.md). The sweep exits 1 where any candidate shows a regression, else 2
where any could not be judged, else 0.

A candidate's costs are read from its gate's JSON, the worst task of each, named beside it:
accuracy points lost against the baseline, the share of answers it changed beyond the
restarts' share, and the mean KL per token over the restarts' (forced where the experiment
forced, else free; a context task's pooled over its documents' positions, whose answers
count in no drift).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kveval.errors import EXIT_INPUT, EXIT_OK, EXIT_REGRESSION

BOUGHT = ("kv_bytes_per_token", "kv_tokens_in_same_memory", "output_tokens_per_s",
          "latency_p50_s")


@dataclass(frozen=True)
class Costs:
    points_lost: float | None  # accuracy points the worst task lost (negative: gained)
    drift: float | None  # share of answers changed beyond the restarts' share
    kl_rise: float | None  # mean KL per token over the restarts' mean
    forced: bool  # kl_rise is of the forced passes
    shown: tuple[str, ...]  # the checks that alarmed, "task: check"
    worst: dict[str, str] = field(default_factory=dict)  # each cost's worst task, by field


@dataclass(frozen=True)
class Row:
    name: str
    verdict: str
    exit_code: int
    costs: Costs
    bought: dict[str, Any]  # the trade's ratios of BOUGHT (ratio, noise_range)
    speed_caveats: dict[str, Any] = field(default_factory=dict)  # the trade's, where any


def json_number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def _worst(values: Sequence[tuple[str, float | None]]) -> tuple[str, float] | None:
    """The task of the largest known value, and that value."""
    known = [(task, v) for task, v in values if v is not None]
    return max(known, key=lambda pair: pair[1]) if known else None


def _points(task: Mapping[str, Any]) -> float | None:
    acc = task.get("accuracy") or {}
    difference = json_number(acc.get("difference"))
    return None if difference is None else -100.0 * difference


def _share(drift: Any) -> float | None:
    if not isinstance(drift, dict) or not drift.get("pairs"):
        return None
    return float(drift.get("changed") or 0) / float(drift["pairs"])


def _drift(task: Mapping[str, Any]) -> float | None:
    if task.get("context"):  # forced documents: their answers never change
        return None
    found = task.get("drift") or {}
    cand, noise = _share(found.get("candidate")), _share(found.get("noise"))
    return None if cand is None or noise is None else cand - noise


def _kl(entry: Any) -> float | None:
    if not isinstance(entry, dict):
        return None
    cand, noise = json_number(entry.get("kl_mean")), json_number((entry.get("noise") or {})
                                                         .get("kl_mean"))
    return None if cand is None or noise is None else cand - noise


def _pooled(buckets: Any) -> float | None:
    """A run's mean KL over every position of its buckets."""
    pairs = [(json_number(b.get("kl_mean")), json_number(b.get("positions"))) for b in buckets or []
             if isinstance(b, dict)]
    known = [(kl, n) for kl, n in pairs if kl is not None and n]
    total = sum(n for _, n in known)
    return sum(kl * n for kl, n in known) / total if total else None


def _context_kl(task: Mapping[str, Any]) -> float | None:
    """A context task's KL rise over its first restart's, pooled over positions."""
    found = task.get("context")
    if not isinstance(found, dict) or not found.get("noise_runs"):
        return None
    cand = _pooled((found.get("candidate") or {}).get("buckets"))
    noise = _pooled((found["noise_runs"][0] or {}).get("buckets"))
    return None if cand is None or noise is None else cand - noise


def costs(gate: Mapping[str, Any]) -> Costs:
    tasks = [t for t in gate.get("tasks") or [] if isinstance(t, dict)]
    forced = any(t.get("forced_divergence") for t in tasks)
    key = "forced_divergence" if forced else "divergence"
    shown = tuple(f"{c.get('task')}: {c.get('check')}" for c in gate.get("checks") or []
                  if isinstance(c, dict) and c.get("shown"))
    worst = {"points_lost": _worst([(str(t.get("task")), _points(t)) for t in tasks]),
             "drift": _worst([(str(t.get("task")), _drift(t)) for t in tasks]),
             "kl_rise": _worst([(str(t.get("task")), _context_kl(t) if t.get("context")
                                 else _kl(t.get(key))) for t in tasks])}
    value = {k: None if w is None else w[1] for k, w in worst.items()}
    return Costs(value["points_lost"], value["drift"], value["kl_rise"], forced, shown,
                 {k: w[0] for k, w in worst.items() if w is not None})


def row(name: str, gate: Mapping[str, Any]) -> Row:
    trade = gate.get("trade") or {}
    ratio = trade.get("ratio") or {}
    return Row(name, str(gate.get("verdict", "cannot judge")),
               int(gate.get("exit_code", EXIT_INPUT)), costs(gate),
               {k: ratio[k] for k in BOUGHT if isinstance(ratio.get(k), dict)},
               dict(trade.get("speed_caveats") or {}))


def sweep_exit(rows: Sequence[Row]) -> tuple[int, str]:
    """The sweep's exit code and verdict in words: which candidates decided it."""
    failed = [r.name for r in rows if r.exit_code == EXIT_REGRESSION]
    unjudged = [r.name for r in rows if r.exit_code not in (EXIT_OK, EXIT_REGRESSION)]
    passed = [r.name for r in rows if r.exit_code == EXIT_OK]
    if failed:
        return EXIT_REGRESSION, f"REGRESSION in {', '.join(failed)}" + _rest(passed, unjudged)
    if unjudged:
        return EXIT_INPUT, f"CANNOT JUDGE {', '.join(unjudged)}" + _rest(passed, [])
    return EXIT_OK, f"PASS: {', '.join(passed)}"


def _rest(passed: Sequence[str], unjudged: Sequence[str]) -> str:
    parts = ([f"pass: {', '.join(passed)}"] if passed else []) + \
        ([f"cannot judge: {', '.join(unjudged)}"] if unjudged else [])
    return f" ({'; '.join(parts)})" if parts else ""
