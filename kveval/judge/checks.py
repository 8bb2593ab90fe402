"""The gate's checks as one family: every test of every task with its one-sided p-value,
adjusted together at one declared level.

The family is fixed by the suite and the options, never by the runs given: each task has its
checks (a verdict check, accuracy or drift, then answers cut short, empty answers, its
lengths, and recovery and divergence where asked), each with a declared weight (WEIGHTS: a
table of importance and power, printed with the family). A check that cannot be run on these
inputs (drift without a noise run, divergence where a run lacks log-probabilities) says so
and keeps its share: it stays in the family with p = 1, so adding a noise run never changes
another check's level.

A check's p-value comes from a discrete test (exact McNemar, a permutation within items, a
bootstrap), so each also knows the smallest p-value its data could have given. The family is
Holm's weighted step-down procedure (Holm 1979, Scand. J. Statist. 6, 65-70) over the checks
that can reach their level: Tarone's reduction (Tarone 1990, Biometrics 46, 515-522),
iterated, drops a check whose smallest attainable p-value is above alpha times its weight
over the weight of the checks still in, until none is; such a check keeps an adjusted p of 1
and does not dilute the others. The family-wise error is at most alpha whatever the weights.
Each check also carries the level it was tested at (its share of alpha at its step of the
procedure), so an interval printed beside it at that level agrees with its verdict.
`compare`, `score`, `gate`, `report` and the JSON all print these adjusted p-values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

ALPHA = 0.05  # the default family-wise level (--alpha)
KINDS = ("accuracy", "drift", "truncated", "empty", "length", "lengths", "recovery",
         "divergence", "forced", "context", "context-ppl")
KL_KINDS = ("divergence", "forced", "context")  # they fail a task only with --max-kl
PRIMARY = ("accuracy", "drift")
# The declared weights: a task's accuracy first (what a rollout asks), answers cut short half
# as much (each is an answer lost; its test reads few flagged items against a restart's
# spread, and needs the level: bench/gate_calibration.py), a length's paired test and drift
# on few prompts weigh less (they have little power at the sizes a suite runs), the longest
# length of a long-context task counts as its own question; the free-running and the forced
# divergence weigh as drift (on a server whose answers hardly move they are the only signal).
WEIGHTS = {"accuracy": 6.0, "drift": 2.0, "truncated": 3.0, "empty": 1.0, "length": 0.25,
           "longest": 2.5, "lengths": 1.0, "recovery": 1.0, "divergence": 2.0,
           "forced": 2.0, "context": 2.0, "context-ppl": 2.0}
PRIMARY_WEIGHT = WEIGHTS["accuracy"]


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
    weight: float = 1.0  # from WEIGHTS (`weigh`)
    run: bool = True  # False: these inputs cannot run it (it keeps its share, p = 1)
    why_not: str = ""  # why it was not run
    testable: bool = True  # set by `adjust`: not dropped by Tarone's reduction
    level: float = ALPHA  # set by `adjust`: the level it was tested at (its share of alpha)

    @property
    def name(self) -> str:
        return f"{self.kind} {self.label}" if self.label else self.kind

    @property
    def alarmed(self) -> bool:
        return self.adjusted_p < self.alpha


def weigh(task: str, kind: str, p_value: float, min_p: float, label: str = "",
          longest: bool = False) -> Check:
    """A check with its declared weight."""
    weight = WEIGHTS["longest" if longest else kind]
    return Check(task, kind, p_value, min_p, label, weight=weight)


def not_run(task: str, kind: str, why: str, label: str = "") -> Check:
    """A check of the family these inputs cannot run: it keeps its share of alpha."""
    return Check(task, kind, 1.0, 1.0, label, weight=WEIGHTS[kind], run=False, why_not=why,
                 testable=False)


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
    times its weight over the family's weight."""

    alpha: float
    total: float  # the family's weight

    def of(self, kind: str) -> float:
        return self.alpha * WEIGHTS.get(kind, 1.0) / self.total

    @property
    def primary(self) -> float:
        """An accuracy check's."""
        return self.of("accuracy")


TASK_WEIGHT = WEIGHTS["accuracy"] + WEIGHTS["truncated"] + WEIGHTS["empty"]  # a task's usual


def family_weight(checks: Sequence[Check]) -> float:
    """The weight alpha is shared over (set by `adjust`: Tarone's K, at least the weight of
    the checks it keeps and of those that could not be run)."""
    return max((c.alpha * c.weight / c.level for c in checks if c.level > 0), default=0.0)


def first_step_levels(checks: Sequence[Check], alpha: float = ALPHA,
                      least: float = PRIMARY_WEIGHT) -> Levels:
    """The family's first-step levels, its weight counted as at least `least`."""
    return Levels(alpha, max(family_weight(checks), least))


def _reach(c: Check, alpha: float) -> float:
    """The largest family weight at which this check could still reach its level."""
    if not c.run:
        return math.inf
    return alpha * c.weight / c.min_p if c.min_p > 0 else math.inf


def tarone_weight(checks: Sequence[Check], alpha: float) -> float:
    """Tarone's K, weighted: the smallest weight W such that the checks that could reach
    alpha w / W at all (with those that could not be run, which keep their share) weigh at
    most W. Every other check can never be significant and leaves the family."""
    def inside(w: float) -> float:
        return sum(c.weight for c in checks if _reach(c, alpha) >= w)

    reaches = sorted({_reach(c, alpha) for c in checks if math.isfinite(_reach(c, alpha))})
    candidates = sorted({inside(0.0), *(r * (1 + 1e-12) for r in reaches),
                         *(inside(r * (1 + 1e-12)) for r in reaches)})
    least = max((c.weight for c in checks), default=1.0)  # no check's level above alpha
    found = next((w for w in candidates if w > 0 and inside(w) <= w), inside(0.0))
    return max(found, least)


def _levels(checks: Sequence[Check], adjusted: Sequence[float], alpha: float,
            total: float) -> list[float]:
    """Each check's level at its step of Holm's procedure: alpha w / W with W the weight not
    yet rejected when it was tested; a check not rejected gets the step the procedure
    stopped at. Checks outside the reduction get the first step."""
    order = sorted((i for i, c in enumerate(checks) if c.testable),
                   key=lambda i: checks[i].p_value / checks[i].weight)
    levels = [alpha * c.weight / total for c in checks]
    left = total
    for n, i in enumerate(order):
        if adjusted[i] >= alpha:
            for j in order[n:]:
                levels[j] = alpha * checks[j].weight / left
            break
        levels[i] = alpha * checks[i].weight / left
        left -= checks[i].weight
    return levels


def adjust(checks: Sequence[Check], alpha: float = ALPHA) -> tuple[Check, ...]:
    """The family: each check with its Holm-adjusted p-value among those Tarone's reduction
    keeps (the weight it leaves unspent, and the checks that could not be run, sit in the
    family with p = 1), and the level it was tested at."""
    marked = [replace(c, alpha=alpha) for c in checks]
    total = tarone_weight(marked, alpha)
    marked = [replace(c, testable=c.run and _reach(c, alpha) >= total) for c in marked]
    inside = [i for i, c in enumerate(marked) if c.testable]
    spare = total - sum(marked[i].weight for i in inside)
    adjusted = holm([marked[i].p_value for i in inside] + [1.0],
                    [marked[i].weight for i in inside] + [max(spare, 1e-12)])[:-1]
    found = dict(zip(inside, adjusted, strict=True))
    result = [replace(c, adjusted_p=found.get(i, 1.0)) for i, c in enumerate(marked)]
    levels = _levels(result, [c.adjusted_p for c in result], alpha, total)
    return tuple(replace(c, level=lv) for c, lv in zip(result, levels, strict=True))


def of_task(checks: Sequence[Check], task: str, *kinds: str) -> list[Check]:
    return [c for c in checks if c.task == task and (not kinds or c.kind in kinds)]


def first(checks: Sequence[Check], task: str, kind: str) -> Check | None:
    return next(iter(of_task(checks, task, kind)), None)
