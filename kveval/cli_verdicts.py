"""`kveval compare`, `kveval score`, `kveval gate`: verdicts from saved run files."""

from __future__ import annotations

import click


@click.command()
def compare() -> None:
    """Compare two runs' answers against the noise floor (not yet built)."""
    raise click.UsageError("compare is not built yet")


@click.command()
def score() -> None:
    """Accuracy with Wilson intervals (not yet built)."""
    raise click.UsageError("score is not built yet")


@click.command()
def gate() -> None:
    """Pass or fail a candidate run (not yet built)."""
    raise click.UsageError("gate is not built yet")
