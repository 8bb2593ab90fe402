"""What a serving change bought beside what it cost: the gate's `trade` (pure).

Reported figures, never part of the pass/fail decision. Per run: the KV pool in tokens and
bytes per token where the server told them (`kveval ab`'s `DIR/servers/LABEL.json`: the
started server's log, or its model's shape and the cache types of its command line; else what
the run header's fingerprint holds: vLLM's `cache_config_info`, llama.cpp's `n_ctx`, the
embedded engine's own KV size), output tokens per second at the run's concurrency (`kveval ab`
times each stretch of sending; a run made without it does not say), latency p50/p95 of its
answered items, and the `--speed` load where measured.

Every ratio is the candidate's figure over the baseline's setup: the median of the baseline
and its restarts (a first start is often slow; one run is no reference), with the setup's own
runs' ratios to that median beside it (`noise_range`: what the setup does by itself). The
tokens that fit the same memory are the setup's bytes per token over the candidate's. A
number read from a server or a file outside a sane range is unknown, never an error.

Speed is a wall clock: runs made at different times share the host with different work. Each
`kveval ab` run records the host's 1-minute load average at its start and end and its CPU
count; `speed_caveats` says where the runs' loads differ by a core's worth or more, or where
the candidate's answers stopped at max_tokens far more often than the setup's (its tokens/s
is then the pace of text cut at the limit). The KV memory figures are not clocks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from kveval.formats.figures import Answered, ServerFigures
from kveval.judge.sides import Side

# the figures a ratio is taken of; higher is better for none of them by itself: the words
# say which way each moved
RATIO_KEYS = ("kv_tokens", "kv_bytes_per_token", "output_tokens_per_s", "latency_p50_s",
              "latency_p95_s")
FIT = "kv_tokens_in_same_memory"  # the setup's bytes per token over the run's
LARGEST = 1e15  # a figure above this (tokens, bytes, tokens/s, seconds) is not one
LOAD_APART = 1.0  # host loads this far apart (or a tenth of the CPUs, if more) differ
CUT_MORE = 0.25  # the candidate's share cut at max_tokens this far above the setup's


def _int(value: Any) -> int | None:
    """A positive count as a server reported it (an int or its digits), else None."""
    if isinstance(value, str) and not (value.isascii() and value.isdigit() and len(value) < 16):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if 0 < number <= LARGEST else None


def figure(value: Any) -> float | None:
    """A finite positive figure, else None (a bool, a string, NaN, a 400-digit count)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and 0 < number <= LARGEST else None


def header_kv(side: Side) -> dict[str, Any]:
    """The KV pool a run header's fingerprint holds, where it holds one."""
    fingerprint = side.header.fingerprint if side.header else {}
    metrics = fingerprint.get("metrics") if isinstance(fingerprint, dict) else None
    cache = metrics.get("cache_config_info") if isinstance(metrics, dict) else None
    if isinstance(cache, dict):
        blocks, size = _int(cache.get("num_gpu_blocks")), _int(cache.get("block_size"))
        tokens = blocks * size if blocks and size else None
        return {"kv_tokens": tokens, "kv_cache_type": cache.get("cache_dtype"),
                "kv_source": "/metrics cache_config_info"}
    if isinstance(fingerprint, dict) and figure(fingerprint.get("kv_bytes_per_token")):
        return {"kv_tokens": _int(fingerprint.get("n_ctx")),
                "kv_bytes_per_token": figure(fingerprint.get("kv_bytes_per_token")),
                "kv_cache_type": fingerprint.get("kv_cache_type"),
                "kv_source": "embedded engine"}
    props = fingerprint.get("props") if isinstance(fingerprint, dict) else None
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    n_ctx = _int((settings or {}).get("n_ctx") if isinstance(settings, dict) else None)
    n_ctx = n_ctx or _int(props.get("n_ctx") if isinstance(props, dict) else None)
    return {"kv_tokens": n_ctx, "kv_source": "/props n_ctx"} if n_ctx else {}


def _pct(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def _from_figures(figures: ServerFigures) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if figures.kv is not None:
        found.update(kv_tokens=_int(figures.kv.tokens),
                     kv_bytes_per_token=figure(figures.kv.bytes_per_token),
                     kv_cache_type=figures.kv.cache_type, kv_source=figures.kv.source)
        if figure(figures.kv.max_concurrency) is not None:
            found.update(max_concurrency=figure(figures.kv.max_concurrency),
                         max_concurrency_at_tokens=_int(figures.kv.at_tokens))
    if figures.run is not None:
        found.update(output_tokens_per_s=figure(figures.run.output_tokens_per_s),
                     concurrency=_int(figures.run.concurrency),
                     host_load_1m=_load_avg(figures.run.host_load), cpus=_int(figures.run.cpus))
    if figures.starts:
        found["ready_s"] = figure(figures.starts[-1].ready_s)
    if figures.speed:
        found["speed"] = [{k: v for k, v in _load(load).items() if v is not None}
                          for load in figures.speed]
    return found


def _load_avg(value: Any) -> float | None:
    """A load average (0 on an idle host), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and 0 <= value <= LARGEST else None


def _load(load: Any) -> dict[str, Any]:
    import msgspec

    return {k: figure(v) if isinstance(v, float) else v
            for k, v in msgspec.structs.asdict(load).items()}


def run_figures(side: Side, figures: ServerFigures | None, answered: Answered) -> dict[str, Any]:
    """One run's figures: its header's and its items' latencies, then what `kveval ab`
    measured of its server."""
    setup = dict(side.header.setup) if side.header else {}
    found: dict[str, Any] = {"label": side.label, "path": side.path, "setup": setup,
                             **header_kv(side),
                             "latency_p50_s": _pct(answered.latencies, 50),
                             "latency_p95_s": _pct(answered.latencies, 95)}
    if answered.items:
        found.update(answered=answered.items, cut_at_max_tokens=answered.cut)
    if side.header is not None:
        found.setdefault("concurrency", side.header.concurrency)
    if figures is not None:
        found.update({k: v for k, v in _from_figures(figures).items() if v is not None})
    return {k: v for k, v in found.items() if v is not None}


def _value(run: dict[str, Any], key: str) -> float | None:
    return figure(run.get(key))


def _against(value: float, setup: Sequence[float]) -> dict[str, Any]:
    """One figure over the setup's median, with the setup's own runs' ratios to it."""
    middle = float(np.median(setup))
    spread = [v / middle for v in setup]
    ratio = value / middle
    return {"ratio": ratio, "setup": middle, "setup_runs": len(setup),
            "noise_range": [min(spread), max(spread)],
            "outside_noise": not min(spread) <= ratio <= max(spread)}


def ratios(run: dict[str, Any], setup: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each figure of `run` over the median of the setup's runs (the baseline and its
    restarts), with their range; and the tokens that fit the same memory."""
    found: dict[str, Any] = {}
    for key in RATIO_KEYS:
        value = _value(run, key)
        known = [v for v in (_value(s, key) for s in setup) if v is not None]
        if value is not None and known:
            found[key] = _against(value, known)
    size = found.get("kv_bytes_per_token")
    if size is not None:
        low, high = size["noise_range"]
        found[FIT] = {"ratio": 1 / size["ratio"], "setup_runs": size["setup_runs"],
                      "noise_range": [1 / high, 1 / low],
                      "outside_noise": size["outside_noise"]}
    return found


def load_apart(runs: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The host loads the runs were timed under, where they differ by a core's worth or
    more (or a tenth of the CPUs, on a large host)."""
    loads = {run["label"]: run["host_load_1m"] for run in runs if "host_load_1m" in run}
    cpus = max((run.get("cpus", 0) for run in runs), default=0)
    if len(loads) < 2 or max(loads.values()) - min(loads.values()) < max(LOAD_APART,
                                                                           cpus / 10):
        return None
    return {"loads": loads, "apart": max(loads.values()) - min(loads.values()),
            "cpus": cpus or None}


def _cut(run: dict[str, Any]) -> float | None:
    return run["cut_at_max_tokens"] / run["answered"] if run.get("answered") else None


def cut_more(cand: dict[str, Any], setup: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The candidate's share of answers cut at max_tokens, where it is far above the
    setup's (the median of the baseline and its restarts)."""
    known = [v for v in map(_cut, setup) if v is not None]
    share = _cut(cand)
    if share is None or not known or share - float(np.median(known)) < CUT_MORE:
        return None
    return {"label": cand["label"], "share": share, "cut": cand["cut_at_max_tokens"],
            "answered": cand["answered"], "setup_share": float(np.median(known))}


def trade(base: Side, cand: Side, noise: Sequence[Side],
          figures: dict[str, ServerFigures | None],
          answered: dict[str, Answered]) -> dict[str, Any]:
    """The gate's `trade` key; `figures`: what `kveval ab` measured of each run's server,
    keyed by run path (None or absent: the run's header alone); `answered`: each run's
    answered items' latencies and cuts, by path."""
    runs = [run_figures(side, figures.get(side.path), answered.get(side.path, Answered([])))
            for side in (base, cand, *noise)]
    caveats = {"load": load_apart(runs), "cut": cut_more(runs[1], [runs[0], *runs[2:]])}
    return {"baseline": runs[0], "candidate": runs[1], "noise": runs[2:],
            "ratio": ratios(runs[1], [runs[0], *runs[2:]]),
            "speed_caveats": {k: v for k, v in caveats.items() if v is not None}}
