"""Inputs that are what they claim: noise runs that are distinct restarts, and runs whose bad
batches (judge/bursts.py) are set apart before anything is counted.

A noise run that is a copy of the baseline, or of another noise run (the same file given
twice, or a copy of it: the same run header, or for files without a header the same answers
and log-probabilities), is not another restart: counted as one it makes the floor look
quieter than restarts are, or hides the changes it was meant to measure. Such a copy counts
once and the verdict says so. A candidate that is a copy of the baseline is judged (it
passes) and said to be one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from kveval.judge.bursts import Burst, find_bursts, left_out
from kveval.judge.sides import Side


def same_run(a: Side, b: Side) -> bool:
    """Two sides that are one run: one path, one header, or (without headers) the same
    records."""
    if a.path == b.path:
        return True
    if a.header is not None or b.header is not None:
        return a.header == b.header
    return a.items == b.items


@dataclass(frozen=True)
class Inputs:
    """The runs as judged, and what was set apart on the way."""

    baseline: Side
    candidate: Side
    noises: tuple[Side, ...]
    copies: tuple[str, ...] = ()  # sentences: each noise run counted once, and why
    bursts: tuple[Burst, ...] = ()
    candidate_is_baseline: bool = False

    @property
    def warnings(self) -> tuple[str, ...]:
        found = list(self.copies)
        if self.candidate_is_baseline:
            found.append(f"the candidate {self.candidate.path} is the baseline's own run "
                         "(the same run header): it cannot differ from it")
        found += [burst_sentence(b) for b in self.bursts]
        return tuple(found)


def burst_sentence(b: Burst) -> str:
    return (f"a bad batch in {b.label}: {b.flagged} of 32 consecutive answers cut short or "
            f"empty (from its item {b.first + 1}), far beyond its rate elsewhere (p = "
            f"{b.p_value:.1g}); those items are left out of every check of every run")


def distinct_noises(base: Side, noises: Sequence[Side]) -> tuple[list[Side], list[str]]:
    """The noise runs with every copy (of the baseline or of an earlier noise run) dropped,
    and a sentence for each copy."""
    kept: list[Side] = []
    said: list[str] = []
    for noise in noises:
        twin = next((s for s in [base, *kept] if same_run(s, noise)), None)
        if twin is None:
            kept.append(noise)
            continue
        what = "the baseline" if twin is base else f"noise run {twin.path}"
        said.append(f"noise run {noise.path} is a copy of {what} (the same run): counted once")
    return kept, said


def _without(side: Side, keys: frozenset[tuple[str, str]]) -> Side:
    if not keys:
        return side
    return replace(side, items=tuple(i for i in side.items if i.key not in keys))


def prepared(base: Side, cand: Side, noises: Sequence[Side]) -> Inputs:
    """Copies counted once, then every run's bad batch set apart from every run."""
    kept, copies = distinct_noises(base, noises)
    runs = [base, *kept, cand]
    bursts = find_bursts([(s.label, s.items) for s in runs])
    keys = left_out(bursts)
    return Inputs(_without(base, keys), _without(cand, keys),
                  tuple(_without(n, keys) for n in kept), tuple(copies), bursts,
                  cand is not base and same_run(base, cand) and cand.path != base.path)
