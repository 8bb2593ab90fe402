"""The HTML page: one self-contained file (inline CSS and SVG, no script, nothing fetched).

`render(data)` turns the page dict of show/page.py into HTML through the jinja2 template
`templates/report.html.j2`. Auto-escaping is on for everything; control characters are
stripped from every string on its way out. Only the SVG charts, which matplotlib writes
with their text escaped, are inserted as markup.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kveval import __version__
from kveval.safe import terminal
from kveval.show import charts
from kveval.show.trade_view import trade_section
from kveval.show.view import accuracy_section, drift_section, setup_section, verdict_section
from kveval.show.view_context import context_section
from kveval.show.view_detail import changed_section, extras_section
from kveval.show.view_long import long_context_section

TEMPLATE = "report.html.j2"
PLOT_HINT = "pip install 'kveval[plot]'"


def _finalize(value: Any) -> Any:
    from markupsafe import Markup

    if isinstance(value, str) and not isinstance(value, Markup):
        return terminal(value)
    return "" if value is None else value


def _environment() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("kveval.show", "templates"),
        autoescape=True, finalize=_finalize, trim_blocks=True, lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )


def _svg(markup: str | None) -> Any:
    from markupsafe import Markup

    return None if markup is None else Markup(markup)  # matplotlib wrote it, text escaped


def _with_svg(section: Any) -> Any:
    """Mark the SVG strings of a section (keys `chart`, `charts`, `svg`, `*_svg`) as markup."""
    if isinstance(section, list):
        return [_with_svg(s) for s in section]
    if not isinstance(section, dict):
        return section
    out = {}
    for key, value in section.items():
        if key in ("chart", "svg", "kl_svg"):
            out[key] = _svg(value)
        elif key == "charts":
            out[key] = [_svg(v) for v in value]
        else:
            out[key] = _with_svg(value)
    return out


def run_labels(data: Mapping[str, Any]) -> list[str]:
    """Baseline, candidate, then each noise run."""
    runs = data.get("runs") or []
    role = {r["role"]: r["label"] for r in runs}
    return [role.get("baseline", "baseline"), role.get("candidate", "candidate"),
            *(r["label"] for r in runs if r["role"] == "noise")]


def context(data: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the template shows, section by section."""
    base, cand = run_labels(data)[:2]
    sections = {
        "verdict": verdict_section(data),
        "trade": trade_section((data.get("gate") or {}).get("trade")),
        "setup": setup_section(data),
        "accuracy": accuracy_section(data),
        "drift": drift_section(data),
        "long_context": long_context_section(data, (base, cand)),
        "by_position": context_section(data),
        "extras": extras_section(data, run_labels(data)),
        "changed": changed_section(data),
    }
    return {**_with_svg(sections), "baseline": base, "candidate": cand,
            "skipped": list(data.get("skipped") or []), "version": __version__,
            "charts_available": charts.available(), "plot_hint": PLOT_HINT}


def render(data: Mapping[str, Any]) -> str:
    return str(_environment().get_template(TEMPLATE).render(**context(data)))
