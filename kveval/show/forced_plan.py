"""How many forced restarts a forced KL rise needs, in words: before an experiment (`ab
--dry-run`: what k restarts can show at all) and after its forced runs (the plan of those runs
as a pilot, judge/plan.py), with the note `ab` prints when it has fewer restarts than that."""

from __future__ import annotations

from kveval.judge.kl_power import restarts_for
from kveval.judge.kl_test import ASSUMED_KL_SPREAD
from kveval.judge.plan import Plan

LARGEST_SHOWN = 6  # restarts whose reach the dry run prints


def rise_words(rise: float, relative: bool) -> str:
    return (f"a forced KL rise of {100 * rise:g}% over the floor" if relative
            else f"a forced KL rise of {rise:g} nats per token")


def before_lines(rise: float, runs: int, level: float) -> list[str]:
    """What 1 to LARGEST_SHOWN forced restarts can show of a relative rise, at this level."""
    few = [restarts_for(rise, k, level) for k in (1, 2)]
    reach = [restarts_for(rise, k, level) for k in range(3, LARGEST_SHOWN + 1)]
    within = ", ".join(f"{r.runs} within {r.widest_spread:.3f}" for r in reach
                       if r.widest_spread is not None) or "no number up to 6 can"
    lines = [f"forced restarts: to show {rise_words(rise, True)} (--detect-kl) 80% of the time "
             f"at level {level:.2g} (the forced check's share of alpha), the restarts' mean KL "
             f"must agree to a log-sd of: {within}; 1 or 2 restarts cannot measure their "
             f"spread (assumed {ASSUMED_KL_SPREAD:g}) and show only a rise of "
             + " / ".join(f"{100 * (r.assumed_rise or 0):.0f}%" for r in few)]
    if runs < 3:
        lines.append(f"note: --noise-runs {runs}: fewer than the 3 forced restarts that "
                     "measure their own spread; a KV cache type's forced KL rise is often a "
                     "few percent of the floor")
    return lines


def after_note(found: Plan, runs: int) -> str | None:
    """The note when the forced runs' own plan needs more restarts than the experiment has."""
    needs = [p for p in found.tasks if p.kind == "divergence"]
    short = [p for p in needs if p.noise_runs_needed is None or p.noise_runs_needed > runs]
    if not short:
        return None
    t = found.targets
    what = rise_words(t.detect_kl or 0.0, t.kl_relative)
    counts = ", ".join(f"{p.task} " + (f"{p.noise_runs_needed}" if p.noise_runs_needed
                                       else "more than 8") for p in short)
    return (f"note: {what} needs more forced restarts than this experiment's {runs} at the "
            f"spread its forced runs show ({counts}); the same command with --noise-runs N "
            "adds only the restarts")
