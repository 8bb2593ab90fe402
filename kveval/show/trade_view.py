"""The gate's `trade` in words: one sentence beside the verdict, and a table of each run's
figures (text, Markdown and the page draw the same rows). Figures a run does not hold are a
dash: a run made without `kveval ab` has only what its header and items say. Every ratio is to
the baseline's setup (the median of the baseline and its restarts), its runs' own range
beside it. Beside the speed ratios, one line of caution where the runs were timed under
different host loads or the candidate's answers stopped at max_tokens far more often."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kveval.show.blocks import Heading, Table

HEADER = ("run", "KV pool (tokens)", "KV bytes/token", "KV source", "output tok/s",
          "latency p50", "latency p95", "host load (1 min)")
# (key, how a ratio of it reads)
WORDS = (("kv_bytes_per_token", "KV {r} the bytes per token"),
         ("kv_tokens_in_same_memory", "{r} the tokens in the same memory"),
         ("kv_tokens", "KV pool {r} the tokens"),
         ("output_tokens_per_s", "output {r} tokens/s"),
         ("latency_p50_s", "latency p50 {r}"))
SPEED = ("output_tokens_per_s", "latency_p50_s", "latency_p95_s")


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
            _n(run.get("latency_p50_s"), " s"), _n(run.get("latency_p95_s"), " s"),
            _n(run.get("host_load_1m"), digits=2))


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


def _load_words(load: Mapping[str, Any]) -> str:
    loads = ", ".join(f"{label} {value:.1f}" for label, value in load["loads"].items())
    cpus = f", on {load['cpus']} CPUs" if load.get("cpus") else ""
    return f"the runs were timed under different host loads (1-minute load average {loads}" \
           f"{cpus}; {load['apart']:.1f} apart): the speed ratios measure the host as much " \
           "as the cache"


def _cut_words(cut: Mapping[str, Any]) -> str:
    return f"{cut['label']}'s answers stopped at max_tokens on {cut['cut']} of " \
           f"{cut['answered']} items ({cut['share']:.0%}; the baseline and its restarts " \
           f"{cut['setup_share']:.0%}): its speed is the pace of cut text, not of answers"


def caution(trade: Mapping[str, Any]) -> str | None:
    """One line beside the speed ratios where they cannot be read as the change's."""
    caveats = trade.get("speed_caveats") or {}
    if not any(k in (trade.get("ratio") or {}) for k in SPEED):
        return None
    parts = ([_load_words(caveats["load"])] if "load" in caveats else []) + \
        ([_cut_words(caveats["cut"])] if "cut" in caveats else [])
    return f"speed caution: {'; '.join(parts)}" if parts else None


def trade_blocks(trade: Mapping[str, Any]) -> list[Any]:
    line = caution(trade)
    return [Heading("trade: what the change bought"), sentence(trade),
            *([line] if line else []), Table(HEADER, rows(trade))]


def trade_section(trade: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The page's section: the sentence and the table."""
    if not trade:
        return None
    return {"line": sentence(trade), "caution": caution(trade), "header": list(HEADER),
            "rows": [list(r) for r in rows(trade)]}
