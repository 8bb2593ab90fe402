"""Whether the runs can be judged at all: a --skip the baseline knows, error and missing items
within --max-error-rate (the baseline held to its header's plan, a teacher-forced run owing the
baseline's answered items only); and, for a task the gate could not judge, what would judge it
(`Need`, planned by judge/needs.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kveval.errors import IncomparableError, UsageError
from kveval.formats.records import ItemRecord
from kveval.judge.compare import Side


@dataclass(frozen=True)
class Need:
    """What would let one check of a task the gate could not judge see a change: the plan of
    these runs as a pilot (judge/plan.py)."""

    task: str
    kind: str  # accuracy, drift, or forced/divergence
    target: float  # the change planned for: points, % of items, or a share of the KL floor
    items: int | None  # None: no size reaches it
    noise_runs: int | None
    have_items: int
    have_noise_runs: int


def check_skip(base: Side, skip: Sequence[str]) -> None:
    known = {item.task for item in base.items}
    for task in skip:
        if task not in known:
            raise UsageError(f"--skip {task}: the baseline has no such task "
                             f"(it has {', '.join(sorted(known))})")


def planned(side: Side, task: str) -> int | None:
    """The items the run's header says it asked for in this task (None: not recorded)."""
    spec = side.header.task(task) if side.header else None
    items = spec.get("items") if spec else None
    return items if isinstance(items, int) and not isinstance(items, bool) else None


def check_error_rate(base: Side, others: Sequence[Side], max_rate: float,
                     skip: Sequence[str] = ()) -> None:
    """Error items, and in the other runs the baseline's items they lack, against the limit;
    the baseline itself is held to the items its header planned."""
    wanted = [item for item in base.items if item.task not in skip]
    tasks = dict.fromkeys(item.task for item in wanted)
    lacking = sum(max(0, (planned(base, t) or 0) - sum(i.task == t for i in wanted))
                  for t in tasks)
    for side in [base, *others]:
        mine = {item.key: item for item in side.items}
        owed = [i for i in wanted if forceable(i)] if forced(side) else wanted
        errors = sum(not mine[i.key].ok for i in owed if i.key in mine)
        missing = sum(i.key not in mine for i in owed) + lacking
        total = len(owed) + lacking
        rate = (errors + missing) / total if total else 0.0
        if rate > max_rate:
            also = f" and {missing} missing" if missing else ""
            plan = " (against its header's plan)" if side is base and lacking else ""
            raise IncomparableError(f"{side.path}: {errors} of {total} items are errors"
                                    f"{also}{plan} ({rate:.1%}), above --max-error-rate "
                                    f"{max_rate:g}")


def forced(side: Side) -> bool:
    """A teacher-forced run: it scores the baseline's answered items only."""
    return bool(side.header and side.header.teacher_force)


def forceable(item: ItemRecord) -> bool:
    """A baseline item a teacher-forced run owes: answered, with tokens to score."""
    from kveval.formats.unforced import unforceable

    return unforceable(item) is None


def check_max_kl(family: Any, base: Side, noises: Sequence[Side],
                 divergences: Sequence[Any], forced: Any = None,
                 context: Sequence[Any] = ()) -> None:
    """--max-kl and --max-ppl-rise need what they judge: log-probabilities, noise runs
    (forced restarts for the forced KL, a context task's restarts for its curve)."""
    from kveval.judge import positions

    positions.check_ppl_rise(family.max_ppl_rise, context)
    if family.max_kl is None or any(c.test for c in context):
        return
    if forced is not None:
        if not forced.noises:
            raise UsageError("--max-kl judges the forced KL against forced restarts: give "
                             "--noise-forced N")
        return
    if not any(item.logprobs is not None for item in base.items):
        raise UsageError("--max-kl: the baseline has no log-probabilities (run the baseline, "
                         "the candidate and the noise runs with --logprobs K)")
    if not noises:
        raise UsageError("--max-kl judges the KL against the noise floor: give --noise N")
    if not any(d.test for d in divergences):
        raise UsageError("--max-kl: no task has log-probabilities in the baseline, candidate "
                         "and noise runs (run them with --logprobs K)")
