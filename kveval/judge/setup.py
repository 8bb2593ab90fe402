"""Can two runs be judged against each other, and what differs between their setups: sampling
parameters (different ones make runs incomparable), the server fingerprints, concurrency, and
whether the noise run is really the baseline's setup restarted."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kveval.errors import IncomparableError
from kveval.formats import records
from kveval.formats.records import RunHeader
from kveval.judge.compare import Side

SAMPLING_FIELDS = ("api", "max_tokens", "stop", "temperature")
VOLATILE_KEYS = records.VOLATILE_KEYS  # fields that change at every server start

# a run labelled as a restart of the baseline's setup (`kveval ab`'s noise1, noise2-forced;
# `kveval plan`'s LABEL-noise3): the same fingerprint is what it should have
RESTART_LABEL = re.compile(r"(?:^|[-_.])noise\d*(?:-forced)?$")


@dataclass(frozen=True)
class Difference:
    key: str  # a dotted fingerprint key, or "model"
    base: str | None  # None: absent on that side
    other: str | None


@dataclass(frozen=True)
class Setup:
    """What differs between the baseline's and the candidate's setups, and what looks wrong."""

    labels: tuple[str, ...]  # baseline, candidate[, noise]
    models: tuple[str, ...]
    concurrency: tuple[int, ...]
    differences: tuple[Difference, ...]  # baseline -> candidate: model, then fingerprint
    warnings: tuple[str, ...]


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts (and lists of dicts) to dotted keys: {"engine": {"a": 1}} -> {"engine.a": 1}."""
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, inner in value.items():
            if key not in VOLATILE_KEYS:
                flat.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        flat = {}
        for index, inner in enumerate(value):
            flat.update(flatten(inner, f"{prefix}[{index}]"))
        return flat
    return {prefix: value}


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def stated(header: RunHeader) -> dict[str, Any]:
    """The fingerprint with the setup the user stated (--setup K=V) as `setup.K`."""
    return {"setup": header.setup, **header.fingerprint}


def fingerprint_differences(base: dict[str, Any], other: dict[str, Any]) -> tuple[Difference, ...]:
    a, b = flatten(base), flatten(other)
    keys = list(a) + [k for k in b if k not in a]
    return tuple(
        Difference(key, _show(a[key]) if key in a else None, _show(b[key]) if key in b else None)
        for key in keys
        if a.get(key, ...) != b.get(key, ...)
    )


def check_sampling(base: Side, other: Side) -> None:
    """Runs with different sampling parameters cannot be judged against each other."""
    if base.header is None or other.header is None:
        return
    where = f"({base.path} vs {other.path})"
    for key in dict.fromkeys([*base.header.sampling, *other.header.sampling]):
        a, b = base.header.sampling.get(key), other.header.sampling.get(key)
        if a != b:
            raise IncomparableError(f"different sampling parameters: {key} {_show(a)} vs "
                                    f"{_show(b)} {where}")
    for spec in base.header.tasks:
        theirs = other.header.task(str(spec.get("name")))
        if theirs is None:
            continue
        for key in SAMPLING_FIELDS:
            a, b = spec.get(key), theirs.get(key)
            if a != b:
                raise IncomparableError(f"different sampling parameters: task {spec.get('name')} "
                                        f"{key} {_show(a)} vs {_show(b)} {where}")


def _fingerprint_warnings(labels: Sequence[str], headers: Sequence[RunHeader],
                          diffs: Sequence[Difference]) -> list[str]:
    base, cand = headers[0], headers[1]
    if not base.fingerprint and not cand.fingerprint:
        return [f"{labels[0]} and {labels[1]} carry no server fingerprint: kveval cannot show "
                "what changed"]
    if not diffs and not RESTART_LABEL.search(labels[1]):
        return [f"nothing in the server fingerprints differs between {labels[0]} and "
                f"{labels[1]}: a restart of the same setup, or a change the server does not "
                "tell (state it with --setup KEY=VALUE)"]
    return []


def _concurrency_warnings(labels: Sequence[str], headers: Sequence[RunHeader]) -> list[str]:
    base = headers[0].concurrency
    return [f"{labels[0]} ran at concurrency {base}, {label} at {h.concurrency}: batching "
            "changes temperature-0 answers too"
            for label, h in zip(labels[1:], headers[1:], strict=True) if h.concurrency != base]


def _noise_warnings(labels: Sequence[str], headers: Sequence[RunHeader]) -> list[str]:
    """The noise run should be the baseline's setup restarted, nothing else."""
    if len(headers) < 3:
        return []
    base, noise = headers[0], headers[2]
    changed = fingerprint_differences(stated(base), stated(noise))
    if not changed and noise.model == base.model:
        return []
    keys = ", ".join(d.key for d in changed[:3]) or "model"
    return [f"the noise run {labels[2]} differs from the baseline's setup ({keys}): it is not "
            "a restart of the same setup"]


def _rerun_warnings(reference: Side, reruns: Sequence[Side], role: str) -> list[str]:
    """More noise runs (or candidate repeats) should be the reference's setup again."""
    found = [f"{s.path}: the last line was cut short (a crash mid-write) and skipped"
             for s in reruns if s.truncated_tail]
    for other in reruns:
        if reference.header is None or other.header is None:
            continue
        changed = fingerprint_differences(reference.header.fingerprint, other.header.fingerprint)
        if changed or other.header.model != reference.header.model:
            keys = ", ".join(d.key for d in changed[:3]) or "model"
            found.append(f"the {role} {other.label} differs from {reference.label}'s setup "
                         f"({keys}): it is not a rerun of the same setup")
    return found


def inspect_setup(base: Side, candidate: Side, noise: Side | None = None,
                  more_noise: Sequence[Side] = (), repeats: Sequence[Side] = ()) -> Setup:
    """Raise when the runs cannot be judged; else say what differs and what looks wrong.
    `more_noise`: noise runs after the first; `repeats`: more runs of the candidate's setup."""
    sides = [base, candidate] + ([noise] if noise else [])
    for other in [*sides[1:], *more_noise, *repeats]:
        check_sampling(base, other)
    labels = tuple(s.label for s in sides)
    headers = [s.header for s in sides if s.header is not None]
    if len(headers) < len(sides):  # arrays of answers: nothing to inspect
        return Setup(labels, (), (), (), ())
    diffs = fingerprint_differences(stated(headers[0]), stated(headers[1]))
    if headers[0].model != headers[1].model:
        diffs = (Difference("model", headers[0].model, headers[1].model), *diffs)
    warnings = [f"{s.path}: the last line was cut short (a crash mid-write) and skipped"
                for s in sides if s.truncated_tail]
    warnings += _fingerprint_warnings(labels, headers, diffs)
    warnings += _concurrency_warnings(labels, headers)
    warnings += _noise_warnings(labels, headers)
    warnings += _rerun_warnings(base, more_noise, "noise run")
    warnings += _rerun_warnings(candidate, repeats, "candidate repeat")
    return Setup(labels, tuple(h.model for h in headers), tuple(h.concurrency for h in headers),
                 diffs, tuple(warnings))
