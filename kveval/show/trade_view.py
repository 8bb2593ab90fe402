"""The gate's `trade` in words: one sentence beside the verdict, and a table of each run's
figures (text, Markdown and the page draw the same rows). Figures a run does not hold are a
dash: a run made without `kveval ab` has only what its header and items say. Every ratio is to
the baseline's setup (the median of the baseline and its restarts), its runs' own range
beside it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kveval.show.blocks import Heading, Table

HEADER = ("run", "KV pool (tokens)", "KV bytes/token", "KV source", "output tok/s",
          "latency p50", "latency p95")
# (key, how a ratio of it reads)
WORDS = (("kv_bytes_per_token", "KV {r} the bytes per token"),
         ("kv_tokens_in_same_memory", "{r} the tokens in the same memory"),
         ("kv_tokens", "KV pool {r} the tokens"),
         ("output_tokens_per_s", "output {r} tokens/s"),
         ("latency_p50_s", "latency p50 {r}"))


def _n(value: Any, unit: str = "", digits: int = 3) -> str:
    if not isinstance(value, int | float):
        return "-"
    if isinstance(value, int) or float(value).is_integer() and abs(value) >= 1000:
        return f"{int(value):,}{unit}"
    return f"{value:.{digits}g}{unit}"


def row(run: Mapping[str, Any]) -> tuple[str, ...]:
    return (str(run.get("label", "?")), _n(run.get("kv_tokens")),
            _n(run.get("kv_bytes_per_token"), digits=4), str(run.get("kv_source") or "-"),
            _n(run.get("output_tokens_per_s")),
            _n(run.get("latency_p50_s"), " s"), _n(run.get("latency_p95_s"), " s"))


def rows(trade: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    runs = [trade["baseline"], trade["candidate"], *trade.get("noise", [])]
    return tuple(row(run) for run in runs)


def _phrase(template: str, found: Mapping[str, Any]) -> str:
    text = template.format(r=f"{found['ratio']:.2f}x")
    spread = found.get("noise_range")
    if spread and found.get("setup_runs", 0) > 1:
        text += f" (the baseline and its restarts {spread[0]:.2f}-{spread[1]:.2f}x)"
    return text


def sentence(trade: Mapping[str, Any]) -> str:
    """'q8_0: KV 0.53x the bytes per token (the baseline and its restarts 1.00-1.00x); 1.88x
    the tokens in the same memory (...); output 1.02x tokens/s (... 0.99-1.01x)', each to the
    median of the baseline and its restarts."""
    ratio = trade.get("ratio") or {}
    parts = [_phrase(t, ratio[k]) for k, t in WORDS if k in ratio]
    name = trade["candidate"].get("label", "candidate")
    if not parts:
        return f"{name}: no figure of what the change bought is on file (no server log, " \
               "no timing in the run headers)"
    return f"{name}: {'; '.join(parts)}"


def trade_blocks(trade: Mapping[str, Any]) -> list[Any]:
    return [Heading("trade: what the change bought"), sentence(trade),
            Table(HEADER, rows(trade))]


def trade_section(trade: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The page's section: the sentence and the table."""
    if not trade:
        return None
    return {"line": sentence(trade), "header": list(HEADER), "rows": [list(r) for r in
                                                                      rows(trade)]}
