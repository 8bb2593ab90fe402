"""Divergence in the shape `llama-perplexity --kl-divergence` prints it: a row per task and
run beside kveval's own divergence table, its JSON, and what share of the full-vocabulary KL
the top-K bound captures (judge/kld.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kveval.judge.divergence import Divergence
from kveval.judge.kld import CAPTURE_SHARE, Estimate, KldTable
from kveval.show.blocks import Table

HEADER = ("task", "run", "positions", "mean KL ± se", "median", "p90", "p99", "p99.9", "max",
          "same top ± se", "RMS Δp ± se", "Δp p1", "Δp p99")


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _est(e: Estimate | None, percent: bool = False) -> str:
    if e is None:
        return "-"
    if percent:
        return f"{100 * e.value:.2f} ± {100 * e.se:.2f}%"
    return f"{e.value:.4g} ± {e.se:.2g}"


def row(task: str, label: str, d: Divergence) -> tuple[str, ...] | None:
    k = d.kld
    if k is None:
        return None
    return (task, label, str(k.positions), _est(k.kl_mean), _g(k.kl["median"]), _g(k.kl["p90"]),
            _g(k.kl["p99"]), _g(k.kl["p99.9"]), _g(k.kl["max"]), _est(k.same_top, True),
            _est(k.dp_rms, True), _pct(k.dp.get("p1")), _pct(k.dp.get("p99")))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.2f}%"


def kld_block(rows: Sequence[tuple[str, ...] | None]) -> Table | None:
    kept = tuple(r for r in rows if r is not None)
    return Table(HEADER, kept) if kept else None


CAPTURE_NOTE = ("llama-perplexity's figures are over the full vocabulary; kveval's KL is the "
                f"top-K bound, which captures about {100 * CAPTURE_SHARE[5]:.0f}% of it at K = "
                f"5 and {100 * CAPTURE_SHARE[20]:.0f}% at K = 20 (bench/topk_capture.py); Δp "
                "is the change of the baseline token's probability where the other run's top-K "
                "holds it")


def _est_json(e: Estimate | None) -> dict[str, float] | None:
    return None if e is None else {"value": e.value, "se": e.se}


def kld_json(k: KldTable | None) -> dict[str, Any] | None:
    if k is None:
        return None
    return {"positions": k.positions, "kl_mean": _est_json(k.kl_mean), "kl": dict(k.kl),
            "same_top": _est_json(k.same_top), "dp_positions": k.dp_positions,
            "dp_unknown": k.dp_unknown, "dp_mean": _est_json(k.dp_mean),
            "dp_rms": _est_json(k.dp_rms),
            "dp": dict(k.dp), "capture_share": dict(CAPTURE_SHARE)}
