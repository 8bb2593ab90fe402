"""`kveval demo`: the whole KV-cache story on the embedded engine."""

from __future__ import annotations

import click


@click.command()
def demo() -> None:
    """Baseline twice, candidate once, then compare, score and gate (not yet built)."""
    raise click.UsageError("demo is not built yet")
