"""Charts for the HTML page, drawn with matplotlib (the `plot` extra) as inline SVG.

Each function takes plain numbers and labels and returns one `<svg>` element as text.
matplotlib is imported only when a chart is drawn; `available()` says whether it can be.
Text stays text in the SVG (escaped by matplotlib's writer) and math parsing is off, so a
label read from a file is drawn as it is, `$` signs included.
"""

from __future__ import annotations

import importlib.util
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

BASELINE, CANDIDATE, NOISE = "#4c72b0", "#dd8452", "#8c8c8c"
COLOURS = (BASELINE, CANDIDATE, NOISE, "#55a868", "#8172b3", "#937860")
LINES = tuple(c for c in COLOURS[1:] if c != NOISE) + (BASELINE,)  # candidates, never grey
WIDTH = 10.0  # inches: 960 px at 96 dpi, about the page's content width
HEATMAP_WIDTH = 4.8  # three side by side on a wide screen, one under another on a narrow one
RC: Any = {  # matplotlib rcParams
      "svg.fonttype": "none", "text.parse_math": False, "svg.hashsalt": "kveval",
      "font.size": 9, "axes.spines.top": False, "axes.spines.right": False,
      "font.family": "sans-serif"}
_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.S)


def available() -> bool:
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules
        return False


def _figure(height: float, columns: int = 1, width: float = WIDTH) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.subplots(1, columns, squeeze=False)[0]


def _svg(fig: Any) -> str:
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    return _PROLOGUE.sub("", buf.getvalue(), count=1)


def _draw(height: float, columns: int, paint: Any, width: float = WIDTH) -> str:
    """Create a figure under the page's style, let `paint(fig, axes)` draw, return its SVG."""
    import matplotlib

    with matplotlib.rc_context(RC):
        fig, axes = _figure(height, columns, width)
        paint(fig, axes)
        return _svg(fig)


# ---------------------------------------------------------------- accuracy


@dataclass(frozen=True)
class Point:
    label: str
    value: float  # a fraction
    low: float
    high: float


@dataclass(frozen=True)
class AccuracyRow:
    name: str  # task (and metric)
    runs: tuple[Point, ...]  # baseline, candidate, noise...
    difference: Point | None  # paired candidate - baseline, as a fraction


def accuracy_chart(rows: Sequence[AccuracyRow], margin: float | None) -> str:
    """Left: each run's accuracy with its 95% interval; right: the paired difference in
    points with its interval, zero and the tolerated loss marked."""

    def paint(fig: Any, axes: Any) -> None:
        left, right = axes
        ys = range(len(rows))
        for y, row in zip(ys, rows, strict=True):
            _interval_points(left, y, row.runs, labelled=y == 0)
            if row.difference is not None:
                d = row.difference
                right.errorbar([100 * d.value], [y], xerr=[[100 * (d.value - d.low)],
                               [100 * (d.high - d.value)]], fmt="o", color=CANDIDATE, capsize=3)
        for ax in axes:
            ax.set_yticks(list(ys), [r.name for r in rows])
            ax.set_ylim(len(rows) - 0.5, -0.5)
        left.set_xlabel("accuracy % (95% interval)")
        right.set_xlabel("paired difference, points")
        right.axvline(0, color="#444", lw=0.8)
        if margin is not None:
            right.axvline(-margin, color="#c44e52", ls="--", lw=1, label=f"-{margin:g} margin")
            right.legend(loc="lower left", fontsize=8, frameon=False)
        right.tick_params(labelleft=False)
        handles, names = left.get_legend_handles_labels()
        fig.legend(handles, names, loc="outside upper center", ncols=max(1, len(names)),
                   frameon=False)

    return _draw(1.0 + 0.5 * len(rows), 2, paint)


def _interval_points(ax: Any, y: int, runs: Sequence[Point], labelled: bool) -> None:
    step = 0.5 / max(1, len(runs))
    for i, p in enumerate(runs):
        offset = (i - (len(runs) - 1) / 2) * step
        ax.errorbar([100 * p.value], [y + offset],
                    xerr=[[100 * (p.value - p.low)], [100 * (p.high - p.value)]],
                    fmt="o", ms=4, capsize=3, color=COLOURS[i % len(COLOURS)],
                    label=p.label if labelled else None)


# ---------------------------------------------------------------- bars


@dataclass(frozen=True)
class Bars:
    """One panel of grouped horizontal bars: one group per task, one bar per run."""

    xlabel: str
    series: tuple[tuple[str, tuple[float | None, ...]], ...]  # (run label, value per group)
    percent: bool = True  # values are fractions shown as %; else as they are, on 0 to 1
    full: bool = True  # the axis runs to 100% (or 1); else to a little past the largest bar


def bar_chart(groups: Sequence[str], panels: Sequence[Bars], colours: Sequence[str]) -> str:
    """Panels side by side sharing the groups (None: no bar)."""

    def paint(fig: Any, axes: Any) -> None:
        for ax, panel in zip(axes, panels, strict=True):
            _bars(ax, groups, panel, colours)
        axes[0].set_yticks(range(len(groups)), list(groups))
        for ax in axes[1:]:
            ax.set_yticks(range(len(groups)), [""] * len(groups))
        handles, names = axes[0].get_legend_handles_labels()
        fig.legend(handles, names, loc="outside upper center", ncols=len(names), frameon=False)

    rows = len(groups) * max(1, len(panels[0].series) if panels else 1)
    return _draw(0.9 + 0.28 * rows, len(panels), paint)


def _bars(ax: Any, groups: Sequence[str], panel: Bars, colours: Sequence[str]) -> None:
    height = 0.8 / max(1, len(panel.series))
    for i, (label, values) in enumerate(panel.series):
        ys = [g + (i - (len(panel.series) - 1) / 2) * height for g in range(len(groups))]
        xs = [0.0 if v is None else (100 * v if panel.percent else v) for v in values]
        bars = ax.barh(ys, xs, height=height * 0.9, label=label, color=colours[i % len(colours)])
        ax.bar_label(bars, labels=[_num(v, panel.percent) for v in values], fontsize=7, padding=2)
    ax.set_ylim(len(groups) - 0.5, -0.5)
    ax.set_xlabel(panel.xlabel)
    top = 100.0 if panel.percent else 1.0
    if not panel.full:
        top = max([x for _, values in panel.series for x in values if x is not None] + [0.01])
        top *= 100 if panel.percent else 1
    ax.set_xlim(0, top * 1.12)


def _num(value: float | None, percent: bool) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.1f}%" if percent else f"{value:.3g}"


# ---------------------------------------------------------------- heatmap


def heatmap(lengths: Sequence[str], depths: Sequence[str],
            values: Sequence[Sequence[float | None]], change: bool, title: str) -> str:
    """A length x depth grid: accuracy (0-100, red to green) or change in points (diverging,
    red for a loss, blue for a gain, white at zero). Empty cells stay grey."""
    import numpy as np

    grid = np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)

    def paint(fig: Any, axes: Any) -> None:
        ax = axes[0]
        if change:
            bound = max(10.0, float(np.nanmax(np.abs(grid))) if np.isfinite(grid).any() else 10.0)
            image = ax.imshow(grid, cmap=_cmap("RdBu"), vmin=-bound, vmax=bound, aspect="auto")
        else:
            image = ax.imshow(grid, cmap=_cmap("RdYlGn"), vmin=0, vmax=100, aspect="auto")
        for (r, c), v in np.ndenumerate(grid):
            if np.isfinite(v):
                ax.text(c, r, f"{v:+.0f}" if change else f"{v:.0f}", ha="center", va="center",
                        fontsize=8, color=_ink(image.cmap(image.norm(v))))
        ax.set_xticks(range(len(depths)), list(depths))
        ax.set_yticks(range(len(lengths)), list(lengths))
        ax.set_xlabel("needle depth")
        ax.set_ylabel("context length")
        ax.set_title(title, fontsize=9)
        fig.colorbar(image, ax=ax, shrink=0.8, label="points" if change else "accuracy %")

    return _draw(1.0 + 0.3 * len(lengths), 1, paint, width=HEATMAP_WIDTH)


def _cmap(name: str) -> Any:
    """A colour map whose empty (NaN) cells are grey."""
    import matplotlib

    return matplotlib.colormaps[name].with_extremes(bad="#dddddd")


def _ink(rgba: Sequence[float]) -> str:
    """Black on light cells, white on dark ones (relative luminance)."""
    r, g, b = rgba[:3]
    return "#111" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.45 else "#fff"


# ---------------------------------------------------------------- lines


def line_chart(xs: Sequence[float], series: Sequence[tuple[str, Sequence[float | None]]],
               xlabel: str, ylabel: str, ticks: Sequence[str] | None = None) -> str:
    """One line per series over shared x values (None: a gap); with `ticks`, x is on a log
    scale with one labelled tick per value."""

    def paint(fig: Any, axes: Any) -> None:
        ax = axes[0]
        for i, (label, ys) in enumerate(series):
            values = [float("nan") if y is None else y for y in ys]
            ax.plot(list(xs), values, marker="o", ms=3, lw=1.2, label=label,
                    color=COLOURS[i % len(COLOURS)])
        if ticks is not None:
            ax.set_xscale("log", base=2)
            ax.set_xticks(list(xs), list(ticks))
            ax.minorticks_off()
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if len(series) > 1:
            ax.legend(fontsize=8, frameon=False)

    return _draw(2.4, 1, paint)


# ---------------------------------------------------------------- a sweep's cost and gain


VERDICT_COLOURS = {"pass": "#1e7b34", "regression": "#b3261e"}  # else cannot judge's
CANNOT = "#8a5a00"


def scatter_chart(points: Sequence[tuple[str, str, float, float]],
                  cloud: Sequence[tuple[float, float]], x_label: str, y_label: str) -> str:
    """Each candidate a labelled point (what it bought, what it cost) in its verdict's
    colour; the restarts' own points as grey rings, the reference cloud."""
    def paint(fig: Any, axes: Any) -> None:
        ax = axes[0]
        if cloud:
            ax.scatter([x for x, _ in cloud], [y for _, y in cloud], s=90, facecolors="none",
                       edgecolors=NOISE, label="restarts of the baseline's setup")
        for name, verdict, x, y in points:
            ax.scatter([x], [y], color=VERDICT_COLOURS.get(verdict, CANNOT), s=36)
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(6, 4))
        ax.axhline(0, color=NOISE, lw=0.8, ls=":")
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        if cloud:
            ax.legend(loc="upper left", frameon=False)

    return _draw(3.2, 1, paint)


# ---------------------------------------------------------------- the context task by position


@dataclass(frozen=True)
class PositionPanel:
    title: str  # the y axis: "mean KL (nats)", "perplexity change (%)"
    lines: Sequence[tuple[str, Sequence[float | None]]]  # each candidate's, by bucket
    band: Sequence[tuple[float, float]] | None  # the restarts' lowest and highest, by bucket


def position_chart(buckets: Sequence[str], panels: Sequence[PositionPanel]) -> str:
    """Side by side, a value by position bucket: each candidate a line, the restarts a grey
    band (a line where they agree)."""
    def paint(fig: Any, axes: Any) -> None:
        xs = list(range(len(buckets)))
        for ax, panel in zip(axes, panels, strict=False):
            if panel.band:
                ax.fill_between(xs, [lo for lo, _ in panel.band], [hi for _, hi in panel.band],
                                color=NOISE, alpha=0.35, lw=1, label="restarts (floor)")
            for i, (label, ys) in enumerate(panel.lines):
                ax.plot(xs, [float("nan") if y is None else y for y in ys], marker="o",
                        ms=3, lw=1.4, label=label, color=LINES[i % len(LINES)])
            ax.set_xticks(xs, list(buckets))
            ax.set_xlabel("position (tokens)")
            ax.set_ylabel(panel.title)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=8, frameon=False)

    return _draw(2.6, len(panels), paint)
