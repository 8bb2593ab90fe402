"""The page's first sections as the template needs them: the verdict, the setup, accuracy
and drift, each built from the page dict (show/page.py) and None when the runs lack its data.

Strings stay raw here; the template escapes every one of them. Charts are SVG from
show/charts.py, drawn only when matplotlib is installed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kveval.show import charts
from kveval.show.words import p_value

WORDS = {"pass": "PASS", "regression": "REGRESSION", "cannot judge": "CANNOT JUDGE"}
PASSED = {True: "pass", False: "REGRESSION", None: "not judged"}


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def interval_text(acc: Mapping[str, Any] | None) -> str:
    if not acc or not acc.get("n"):
        return "-"
    low, high = acc["interval"]
    return f"{acc['correct']}/{acc['n']} {pct(acc['accuracy'])} [{100 * low:.1f}, {100 * high:.1f}]"


def tasks_of(data: Mapping[str, Any], part: str) -> list[dict[str, Any]]:
    found = data.get(part) or {}
    return list(found.get("tasks") or []) if isinstance(found, Mapping) else []


def task_value(data: Mapping[str, Any], task: str, key: str) -> Any:
    """`key` of `task` wherever a `--json` dict carries it: the gate's, score's or compare's
    task entry, one level inside it, or among score's extras."""
    for part in ("gate", "score", "compare"):
        for entry in tasks_of(data, part):
            if entry.get("task") != task:
                continue
            found = _find(entry, key)
            if found is not None:
                return found
    return None


def _find(entry: Mapping[str, Any], key: str) -> Any:
    if entry.get(key) is not None:
        return entry[key]
    inner: Iterable[Any] = list(entry.values()) + list(entry.get("extras") or [])
    for value in inner:
        if isinstance(value, Mapping) and value.get(key) is not None:
            return value[key]
    return None


def task_names(data: Mapping[str, Any]) -> list[str]:
    names = [t["task"] for part in ("gate", "score", "compare") for t in tasks_of(data, part)]
    return list(dict.fromkeys(names))


# ---------------------------------------------------------------- 1. verdict


def margin_text(gate: Mapping[str, Any]) -> str:
    policy = gate.get("policy") or "overlap"
    margin = gate.get("margin_points")
    return f"policy {policy}" + (f", margin {margin:g} points" if margin is not None else "")


def _joined(*parts: Any) -> str:
    """The strings among `parts`, each once (one may already contain another)."""
    kept: list[str] = []
    for part in parts:
        if isinstance(part, str) and part and not any(part in k for k in kept):
            kept.append(part)
    return "; ".join(kept)


def metric_name(data: Mapping[str, Any], task: str, metric: str) -> str:
    """"gsm8k flexible" where a task has a strict match beside it; a plain "needle" else."""
    paired = (data.get("score") or {}).get("paired") or []
    strict = any(p["task"] == task and p["metric"] == "strict" for p in paired)
    return f"{task} {metric}" if strict or metric == "strict" else task


def verdict_section(data: Mapping[str, Any]) -> dict[str, Any]:
    gate = data["gate"]
    word = WORDS.get(gate.get("verdict", ""), "CANNOT JUDGE")
    rows = []
    for t in gate.get("tasks") or []:
        status = t.get("status") or PASSED.get(t.get("passed"), "-")
        reason = _joined(t.get("reason"), t.get("cannot_judge"))
        seen = "; ".join(d.get("summary", "") for d in (t.get("detectable") or {}).values())
        rows.append({"task": t["task"], "rule": t.get("rule") or "-",
                     "verdict": "REGRESSION" if status == "regression" else status,
                     "failed": status == "regression", "reason": reason, "seen": seen})
    losses = [f"{r['task']}: {r['reason']}" for r in rows if r["failed"]]
    if gate.get("warning"):
        losses.append(gate["warning"])
    return {"word": word, "css": word.lower().replace(" ", "-"), "exit_code": gate.get("exit_code"),
            "policy": margin_text(gate), "metric": gate.get("metric"),
            "summary": gate.get("summary") or gate.get("reason") or "", "tasks": rows,
            "losses": losses, "checks": [_check_row(c) for c in gate.get("checks") or []],
            "alpha": gate.get("alpha"), "family_size": gate.get("family_size"),
            "notices": [w["text"] for w in gate.get("warnings") or []
                        if isinstance(w, Mapping) and isinstance(w.get("text"), str)]}


def _p(value: Any, alpha: Any = None) -> str:
    """The digits the text tables print (show/words.py)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-"
    level = alpha if isinstance(alpha, (int, float)) and not isinstance(alpha, bool) else 0.05
    return p_value(float(value), float(level))


def _check_row(c: Mapping[str, Any]) -> dict[str, Any]:
    if c.get("run") is False:
        result = "not run"
    else:
        result = "SHOWN" if c.get("shown") else ("-" if c.get("testable") else
                                                 "cannot reach its level")
    level = c.get("level")
    return {"task": c.get("task"), "check": c.get("check"), "p": _p(c.get("p_value"), level),
            "weight": c.get("weight") if isinstance(c.get("weight"), (int, float)) else "-",
            "level": f"{level:.2g}" if isinstance(level, float) and c.get("testable") else "-",
            "adjusted": _p(c.get("adjusted_p"), c.get("alpha")) if c.get("testable") else "-",
            "result": result, "shown": bool(c.get("shown"))}


# ---------------------------------------------------------------- 2. setup


RUN_FIELDS = ("label", "model", "endpoint", "created", "concurrency", "items", "errors", "path")


def setup_section(data: Mapping[str, Any]) -> dict[str, Any] | None:
    runs = data.get("runs") or []
    if not runs:
        return None
    head = [f"{r['role']}: {r['label']}" for r in runs]
    general = [_row(name, [r.get(name) for r in runs]) for name in RUN_FIELDS]
    keys = list(dict.fromkeys(k for r in runs for k in r["fingerprint"]))
    prints = [_row(k, [r["fingerprint"].get(k) for r in runs]) for k in keys]
    setup = (data.get("score") or {}).get("setup") or (data.get("compare") or {}).get("setup")
    return {"head": head, "general": general,
            "differing": [p for p in prints if p["differs"]],
            "same": [p for p in prints if not p["differs"]],
            "warnings": list((setup or {}).get("warnings") or [])}


def _row(key: str, values: Sequence[Any]) -> dict[str, Any]:
    shown = ["(absent)" if v is None else str(v) for v in values]
    differs = len(set(shown[:2])) > 1 if key not in ("label", "path", "created") else False
    return {"key": key, "values": shown, "differs": differs}


# ---------------------------------------------------------------- 3. accuracy


def _noise_accuracy(data: Mapping[str, Any], task: str, metric: str) -> list[dict[str, Any]]:
    found = []
    for score in data.get("noise_scores") or []:
        for entry in score.get("paired") or []:
            if entry["task"] == task and entry["metric"] == metric:
                found.append({"label": score["run"]["label"], **entry["candidate"]})
    return found


def _point(label: str, acc: Mapping[str, Any] | None) -> charts.Point | None:
    if not acc or not acc.get("n"):
        return None
    return charts.Point(label, acc["accuracy"], *acc["interval"])


def accuracy_section(data: Mapping[str, Any]) -> dict[str, Any] | None:
    score = data.get("score") or {}
    paired = score.get("paired") or []
    if not paired:
        return None
    base, cand = score["baseline"]["label"], score["run"]["label"]
    rows, chart_rows = [], []
    for p in paired:
        noise = _noise_accuracy(data, p["task"], p["metric"])
        name = metric_name(data, p["task"], p["metric"])
        low, high = p["difference_interval"]
        rows.append({"name": name, "baseline": interval_text(p["baseline"]),
                     "candidate": interval_text(p["candidate"]),
                     "noise": "; ".join(f"{n['label']}: {interval_text(n)}" for n in noise),
                     "difference": f"{100 * p['difference']:+.1f} [{100 * low:+.1f}, "
                                   f"{100 * high:+.1f}]",
                     "summary": p["summary"]})
        points = [_point(base, p["baseline"]), _point(cand, p["candidate"])]
        points += [_point(n["label"], n) for n in noise]
        chart_rows.append(charts.AccuracyRow(name, tuple(x for x in points if x is not None),
                                             charts.Point("difference", p["difference"], low,
                                                          high)))
    margin = data["gate"].get("margin_points")
    chart = charts.accuracy_chart(chart_rows, margin) if charts.available() else None
    return {"labels": (base, cand), "rows": rows, "chart": chart,
            "has_noise": any(r["noise"] for r in rows)}


# ---------------------------------------------------------------- 4. drift


def _drift_cells(d: Mapping[str, Any] | None) -> tuple[float | None, float | None, str]:
    if not d or not d.get("pairs"):
        return None, None, "-"
    share = d["identical"] / d["pairs"]
    return share, d["mean_prefix_ratio"], f"{d['identical']}/{d['pairs']} ({pct(share)})"


def as_list(value: Any) -> list[Any]:
    """One `--json` entry or a list of them (several noise runs) as a list."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _runs_of(comp: Mapping[str, Any], task: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(label, drift) of the candidate, each noise run and each repeat of the candidate, for
    one task (one noise run: `noise`; several: `noises` and `noise_runs`)."""
    noises = as_list(comp.get("noises")) or as_list(comp.get("noise"))
    drifts = as_list(task.get("noise_runs")) or as_list(task.get("noise"))
    repeats = [f"{r.get('label', 'repeat')} (candidate repeat)"
               for r in as_list(comp.get("candidate_repeats"))]
    return [(comp["candidate"]["label"], task["candidate"]),
            *zip([n.get("label", "noise") for n in noises], drifts, strict=False),
            *zip(repeats, as_list(task.get("instability")), strict=False)]


def drift_section(data: Mapping[str, Any]) -> dict[str, Any] | None:
    comp = data.get("compare")
    if not comp or not comp.get("tasks"):
        return None
    rows: list[dict[str, Any]] = []
    same: dict[str, list[float | None]] = {}
    ratio: dict[str, list[float | None]] = {}
    tasks = [t for t in comp["tasks"] if not t.get("context")]  # judged by position
    if not tasks:
        return None
    for t in tasks:
        for label, d in _runs_of(comp, t):
            share, prefix, text = _drift_cells(d)
            same.setdefault(label, []).append(share)
            ratio.setdefault(label, []).append(prefix)
            rows.append({"task": t["task"], "run": label, "identical": text,
                         "prefix": "-" if prefix is None else f"{prefix:.3f}",
                         "first": (d or {}).get("median_first_difference")})
    names = [t["task"] for t in tasks]
    return {"rows": rows, "chart": _drift_chart(names, same, ratio),
            "sentences": [f"{t['task']}: {t['summary']}" for t in tasks]}


def _drift_chart(names: Sequence[str], same: Mapping[str, Sequence[float | None]],
                 ratio: Mapping[str, Sequence[float | None]]) -> str | None:
    if not charts.available() or any(len(v) != len(names) for v in same.values()):
        return None
    panels = [charts.Bars("answers identical to the baseline %",
                          tuple((lb, tuple(v)) for lb, v in same.items())),
              charts.Bars("mean shared-prefix ratio",
                          tuple((lb, tuple(v)) for lb, v in ratio.items()), percent=False)]
    return charts.bar_chart(names, panels, (charts.CANDIDATE, charts.NOISE, *charts.COLOURS[3:]))
