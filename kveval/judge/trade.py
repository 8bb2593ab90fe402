"""What a serving change bought beside what it cost: the gate's `trade` (pure).

Reported figures, never part of the pass/fail decision. Per run: the KV pool in tokens and
bytes per token where the server told them (`kveval ab`'s `DIR/servers/LABEL.json`, read from
the started server's log; else what the run header's fingerprint holds: vLLM's
`cache_config_info`, llama.cpp's `n_ctx`), output tokens per second at the run's concurrency
(`kveval ab` times each stretch of sending; a run made without it does not say), latency
p50/p95 of its answered items, and the `--speed` load where measured. The candidate's `ratio`
to the baseline, beside the range the noise runs' ratios span (a restart is the speed's noise
floor as it is the answers').
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kveval.formats.figures import ServerFigures
from kveval.judge.sides import Side

# the figures a ratio is taken of; higher is better for none of them by itself: the words
# say which way each moved
RATIO_KEYS = ("kv_tokens", "kv_bytes_per_token", "output_tokens_per_s", "latency_p50_s",
              "latency_p95_s")


def _int(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


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
        found.update(kv_tokens=figures.kv.tokens, kv_bytes_per_token=figures.kv.bytes_per_token,
                     kv_cache_type=figures.kv.cache_type, kv_source="server log")
        if figures.kv.max_concurrency is not None:
            found.update(max_concurrency=figures.kv.max_concurrency,
                         max_concurrency_at_tokens=figures.kv.at_tokens)
    if figures.run is not None:
        found.update(output_tokens_per_s=figures.run.output_tokens_per_s,
                     concurrency=figures.run.concurrency)
    if figures.starts:
        found["ready_s"] = figures.starts[-1].ready_s
    if figures.speed:
        found["speed"] = [{k: v for k, v in _load(load).items() if v is not None}
                          for load in figures.speed]
    return found


def _load(load: Any) -> dict[str, Any]:
    import msgspec

    return msgspec.structs.asdict(load)


def run_figures(side: Side, figures: ServerFigures | None,
                latencies: Sequence[float]) -> dict[str, Any]:
    """One run's figures: its header's and its items' latencies, then what `kveval ab`
    measured of its server."""
    setup = dict(side.header.setup) if side.header else {}
    found: dict[str, Any] = {"label": side.label, "path": side.path, "setup": setup,
                             **header_kv(side),
                             "latency_p50_s": _pct(latencies, 50),
                             "latency_p95_s": _pct(latencies, 95)}
    if side.header is not None:
        found.setdefault("concurrency", side.header.concurrency)
    if figures is not None:
        found.update({k: v for k, v in _from_figures(figures).items() if v is not None})
    return {k: v for k, v in found.items() if v is not None}


def _ratio(run: dict[str, Any], base: dict[str, Any], key: str) -> float | None:
    a, b = run.get(key), base.get(key)
    if isinstance(a, int | float) and isinstance(b, int | float) and b > 0:
        return float(a) / float(b)
    return None


def ratios(runs: Sequence[dict[str, Any]], base: dict[str, Any]) -> dict[str, Any]:
    """Each figure of the first run over the baseline's; with the noise runs' range."""
    first, noise = runs[0], runs[1:]
    found: dict[str, Any] = {}
    for key in RATIO_KEYS:
        ratio = _ratio(first, base, key)
        if ratio is None:
            continue
        spread = [r for r in (_ratio(n, base, key) for n in noise) if r is not None]
        found[key] = {"ratio": ratio, **({"noise_range": [min(spread), max(spread)],
                                          "outside_noise": not min(spread) <= ratio
                                          <= max(spread)} if spread else {})}
    return found


def trade(base: Side, cand: Side, noise: Sequence[Side],
          figures: dict[str, ServerFigures | None],
          latencies: dict[str, Sequence[float]]) -> dict[str, Any]:
    """The gate's `trade` key; `figures`: what `kveval ab` measured of each run's server,
    keyed by run path (None or absent: the run's header alone); `latencies`: each run's
    answered items' latencies, by path."""
    runs = [run_figures(side, figures.get(side.path), latencies.get(side.path, ()))
            for side in (base, cand, *noise)]
    return {"baseline": runs[0], "candidate": runs[1], "noise": runs[2:],
            "ratio": ratios([runs[1], *runs[2:]], runs[0])}
