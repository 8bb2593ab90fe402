"""Verdicts from files alone: comparison, grids, statistics, the gate."""
