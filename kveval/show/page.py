"""The data behind the HTML page: the `--json` dicts of gate, score and compare, plus what
only the page shows (both fingerprints in full, the baseline's own long-context grid, the
changed answers with their references and scores).

Everything here is a plain JSON-ready dict, so a figure another module adds to a `--json`
output (collapse, divergence, length curves) reaches the page by its key alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kveval.errors import KvevalError
from kveval.formats.records import ItemRecord
from kveval.judge.compare import Pair, Side, by_task
from kveval.judge.forced import Forced
from kveval.judge.verdict import (
    Examined,
    Family,
    GateReport,
    examine,
    flatten,
    inspect_setup,
    score_report,
)
from kveval.show import report

MAX_CHANGED = 60  # changed answers kept per task (the longest changes first)
MAX_ANSWER = 3000  # characters of each answer kept on the page
LEAD = 1000  # characters kept before a first difference that lies beyond MAX_ANSWER
# per task, the sections `kveval score` prints below the scores (the cli's task_extras)
Extras = Callable[[Side, Side | None], Mapping[str, Sequence[report.Block]]]


@dataclass(frozen=True)
class Inputs:
    """What the page is about: the runs as read (None where a file could not be read) and
    the gate's options."""

    baseline: Side | None
    candidate: Side | None
    noise: tuple[Side, ...]
    repeats: tuple[Side, ...]
    skip: tuple[str, ...]
    policy: str
    margin: float | None
    family: Family = Family()  # --metric, --alpha, --max-kl, --min-recovery, effective length
    forced: Forced | None = None  # the teacher-forced passes (judge/forced.py)


def page_data(inputs: Inputs, result: GateReport | None, error: str | None,
              extras: Extras | None = None, verdict: dict[str, Any] | None = None,
              ) -> dict[str, Any]:
    """The whole page as a dict; `error` is the reason the gate could not judge; `verdict`
    the gate's final JSON where the caller has it (else it is made from `result`)."""
    if verdict is None:
        verdict = report.gate_json(result) if result else report.cannot_judge_json(error or "")
    verdict.setdefault("policy", inputs.policy)
    verdict.setdefault("margin_points", inputs.margin)
    verdict.setdefault("metric", inputs.family.metric)
    data: dict[str, Any] = {"gate": verdict, "runs": runs_data(inputs)}
    if inputs.baseline is None or inputs.candidate is None:
        return data
    data.update(_judged(inputs, inputs.baseline, inputs.candidate, extras,
                        result.examined if result else None))
    return data


def _judged(inputs: Inputs, base: Side, cand: Side, extras: Extras | None,
            examined: Examined | None) -> dict[str, Any]:
    """score, compare, grids and changed answers, from the family the gate judged on; a part
    that cannot be computed is left out (the verdict banner already says why)."""
    data: dict[str, Any] = {}
    found: list[Examined | None] = [examined]

    def family() -> Examined:
        got = found[0] or examine(base, cand, inputs.noise, inputs.repeats, inputs.family,
                                  forced=inputs.forced)
        found[0] = got
        return got

    first = inputs.noise[0] if inputs.noise else None

    parts = (("score", lambda: _score(base, cand, extras, family())),
             ("noise_scores", lambda: [_score(base, n, None, None) for n in inputs.noise]),
             ("compare", lambda: report.compare_json(inspect_setup(base, cand, first), family())),
             ("grids", lambda: baseline_grids(base)),
             ("changed", lambda: changed_answers(base, cand)))
    for key, build in parts:
        try:
            data[key] = build()
        except KvevalError as exc:
            data.setdefault("skipped", []).append(f"{key}: {exc}")
    return data


def _score(base: Side, run: Side, extras: Extras | None,
           examined: Examined | None) -> dict[str, Any]:
    result = score_report(run, base)
    return report.score_json(result, extras(run, base) if extras else None, examined)


# ---------------------------------------------------------------- runs and fingerprints


def _flat_strings(fingerprint: dict[str, Any]) -> dict[str, str]:
    return {k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            for k, v in flatten(fingerprint).items()}


def run_data(role: str, side: Side) -> dict[str, Any]:
    head = side.header
    return {
        "role": role, "label": side.label, "path": side.path, "items": len(side.items),
        "errors": side.errors,
        "model": head.model if head else None,
        "endpoint": head.endpoint if head else None,
        "created": head.created if head else None,
        "concurrency": head.concurrency if head else None,
        "fingerprint": _flat_strings(head.fingerprint) if head else {},
    }


def runs_data(inputs: Inputs) -> list[dict[str, Any]]:
    named = [("baseline", inputs.baseline), ("candidate", inputs.candidate)]
    named += [("noise", n) for n in inputs.noise]
    named += [("candidate repeat", r) for r in inputs.repeats]
    return [run_data(role, side) for role, side in named if side is not None]


# ---------------------------------------------------------------- long context


def baseline_grids(base: Side) -> dict[str, Any]:
    """The baseline's own length x depth grid per task (score's extras hold the candidate's
    and the change per cell)."""
    from kveval.judge import grid

    found = {}
    for task in dict.fromkeys(item.task for item in base.items):
        section = grid.section(task, base.items)
        if section is not None:
            found[task] = section
    return found


# ---------------------------------------------------------------- changed answers


def _changed_chars(pair: Pair) -> int:
    return max(len(pair.base_text), len(pair.other_text)) - (pair.first_difference or 0)


def _side(item: ItemRecord, first: int) -> dict[str, Any]:
    """The answer, at most MAX_ANSWER characters of it, starting early enough that the first
    difference is on the page."""
    text = item.output or ""
    start = 0 if first + LEAD <= MAX_ANSWER else first - LEAD
    shown = text[start:start + MAX_ANSWER]
    return {"text": shown, "skipped": start, "cut": len(text) - start - len(shown),
            "extracted": item.extracted, "correct": item.correct,
            "finish_reason": item.finish_reason}


def changed_pair(pair: Pair) -> dict[str, Any]:
    first = pair.first_difference or 0
    return {
        "item_id": pair.key[1], "first_difference": pair.first_difference,
        "prefix_ratio": pair.prefix_ratio, "changed_chars": _changed_chars(pair),
        "reference": pair.base.reference, "baseline": _side(pair.base, first),
        "candidate": _side(pair.other, first),
    }


def changed_answers(base: Side, cand: Side) -> list[dict[str, Any]]:
    """Per task: the changed answers, longest change first, at most MAX_CHANGED."""
    from kveval.judge.compare import pair_sides

    out = []
    for task, pairs in by_task(pair_sides(base, cand).pairs).items():
        changed = sorted((p for p in pairs if not p.identical),
                         key=lambda p: (-_changed_chars(p), p.key))
        out.append({"task": task, "pairs": len(pairs), "changed": len(changed),
                    "shown": [changed_pair(p) for p in changed[:MAX_CHANGED]]})
    return out
