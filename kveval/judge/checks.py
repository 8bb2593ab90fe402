"""The gate's checks as one family: every test of every task with its one-sided p-value,
adjusted together at one declared level.

A check's p-value comes from a discrete test (exact McNemar, a permutation within items, a
bootstrap), so each also knows the smallest p-value its data could have given. The family is
Holm's weighted step-down procedure (Holm 1979, Scand. J. Statist. 6, 65-70) over the checks
that can reach the level at all: a check whose smallest attainable p-value is above alpha can
never be significant and does not dilute the others (Tarone 1990, Biometrics 46, 515-522; its
cutoff at alpha is more conservative than Tarone's own, so the family-wise error stays at
most alpha). Such a check keeps an adjusted p of 1. Each task's own verdict check (accuracy,
or drift for a task without ground truth) weighs PRIMARY_WEIGHT, every other check 1: the
question a rollout asks first keeps its power (bench/gate_calibration.py: a 4-point GSM8K loss
at n = 500), and the family-wise error is alpha whatever the weights. `compare`, `score`,
`gate`, `report` and the JSON all print these adjusted p-values, so a sentence cannot
disagree with the verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

ALPHA = 0.05  # the default family-wise level (--alpha)
KINDS = ("accuracy", "drift", "truncated", "empty", "length", "lengths", "recovery",
         "divergence")
PRIMARY = ("accuracy", "drift")
PRIMARY_WEIGHT = 5.0


@dataclass(frozen=True)
class Check:
    """One test of one task. `p_value` is one-sided (small: the candidate is worse)."""

    task: str
    kind: str  # one of KINDS
    p_value: float
    min_p: float  # the smallest p-value the test could have given on these data
    label: str = ""  # which one, where a task has several of a kind ("32k" for a length)
    adjusted_p: float = 1.0  # Holm over the family's testable checks
    alpha: float = ALPHA

    @property
    def weight(self) -> float:
        return PRIMARY_WEIGHT if self.kind in PRIMARY else 1.0

    @property
    def name(self) -> str:
        return f"{self.kind} {self.label}" if self.label else self.kind

    @property
    def testable(self) -> bool:
        """The data could have shown a difference at the family's level."""
        return self.min_p <= self.alpha

    @property
    def alarmed(self) -> bool:
        return self.adjusted_p < self.alpha


def holm(p_values: Sequence[float], weights: Sequence[float] | None = None) -> list[float]:
    """Holm's (weighted) step-down adjusted p-values, in the order given (scipy has no Holm):
    by p / w ascending, the j-th is max over i <= j of p_i W_i / w_i, with W_i the weight of
    the checks not yet rejected."""
    w = list(weights) if weights is not None else [1.0] * len(p_values)
    order = sorted(range(len(p_values)), key=lambda i: p_values[i] / w[i])
    adjusted, running, left = [1.0] * len(p_values), 0.0, sum(w)
    for i in order:
        running = max(running, p_values[i], min(1.0, p_values[i] * left / w[i]))  # rounding
        adjusted[i] = running
        left -= w[i]
    return adjusted


@dataclass(frozen=True)
class Levels:
    """The level one check must reach on its own in the family (Holm's first step): alpha
    times its weight over the weight of the testable checks. A task's verdict check gets
    `primary`, every other check `other`."""

    primary: float
    other: float

    def of(self, kind: str) -> float:
        return self.primary if kind in PRIMARY else self.other


TASK_WEIGHT = PRIMARY_WEIGHT + 2  # a task's usual checks: its verdict, truncated, empty


def first_step_levels(checks: Sequence[Check], alpha: float = ALPHA,
                      least: float = PRIMARY_WEIGHT) -> Levels:
    """The family's first-step levels, its weight counted as at least `least`."""
    total = max(sum(c.weight for c in checks if c.testable), least)
    return Levels(alpha * PRIMARY_WEIGHT / total, alpha / total)


def adjust(checks: Sequence[Check], alpha: float = ALPHA) -> tuple[Check, ...]:
    """The family: each check with its Holm-adjusted p-value among the testable ones."""
    marked = [replace(c, alpha=alpha) for c in checks]
    testable = [i for i, c in enumerate(marked) if c.testable]
    adjusted = holm([marked[i].p_value for i in testable], [marked[i].weight for i in testable])
    found = {i: p for i, p in zip(testable, adjusted, strict=True)}
    return tuple(replace(c, adjusted_p=found.get(i, 1.0)) for i, c in enumerate(marked))


def of_task(checks: Sequence[Check], task: str, *kinds: str) -> list[Check]:
    return [c for c in checks if c.task == task and (not kinds or c.kind in kinds)]


def first(checks: Sequence[Check], task: str, kind: str) -> Check | None:
    return next(iter(of_task(checks, task, kind)), None)
