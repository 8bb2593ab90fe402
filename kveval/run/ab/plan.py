"""The plan of an `ab` experiment (pure) and what its folder already holds.

Start 1 is the baseline's setup, then `--noise-runs N` restarts of it, then the candidate's
setup. Each server runs the suite into its own run file (the restarts `--order shuffle`,
each with its own seed), then, where teacher forcing applies, each server after the
baseline's forces the baseline's answers (`LABEL-forced.jsonl`) while it is up, then the
`--speed` load. A run whose file holds every
item its header planned, each answered, is finished and kept; a server whose runs are all
finished (and whose load is measured) is not started again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kveval.run.ab.options import AbOptions, Side

BASELINE, CANDIDATE = "baseline", "candidate"


@dataclass(frozen=True)
class RunStep:
    label: str  # the run's label and file name: baseline, noise1, candidate, noise1-forced
    path: Path
    order: str  # data or shuffle
    forced: bool = False  # teacher-forces the baseline's answers


@dataclass(frozen=True)
class Start:
    """One server start: its label (log and figures), setup, runs and load."""

    label: str
    side: Side
    runs: tuple[RunStep, ...]
    speed: bool

    @property
    def free(self) -> RunStep:
        return self.runs[0]


@dataclass(frozen=True)
class Folder:
    root: Path

    def run(self, label: str) -> Path:
        return self.root / f"{label}.jsonl"

    def log(self, label: str) -> Path:
        return self.root / "servers" / f"{label}.log"

    def figures(self, label: str) -> Path:
        return self.root / "servers" / f"{label}.json"

    @property
    def state(self) -> Path:
        return self.root / "ab.json"

    @property
    def gate(self) -> Path:
        return self.root / "gate.json"

    @property
    def page(self) -> Path:
        return self.root / "report.html"


def labels(noise_runs: int) -> list[str]:
    return [BASELINE, *(f"noise{k}" for k in range(1, noise_runs + 1)), CANDIDATE]


def plan(opts: AbOptions, forcing: bool) -> tuple[Start, ...]:
    """Every start in order; `forcing`: the forced runs are part of it."""
    folder = Folder(opts.output)
    starts = []
    for label in labels(opts.noise_runs):
        side = opts.candidate if label == CANDIDATE else opts.baseline
        order = "shuffle" if label.startswith("noise") else "data"
        runs = [RunStep(label, folder.run(label), order)]
        if forcing and label != BASELINE:  # the baseline's own answers need no forcing
            forced = f"{label}-forced"
            runs.append(RunStep(forced, folder.run(forced), "data", forced=True))
        starts.append(Start(label, side, tuple(runs), opts.speed))
    return tuple(starts)


def roles(starts: tuple[Start, ...], forced: bool = False) -> dict[str, Path | list[Path]]:
    """The gate's inputs: the baseline, the candidate and the noise runs (free or forced)."""
    pick = [s.runs[-1] if forced else s.free for s in starts]
    return {"baseline": pick[0].path, "candidate": pick[-1].path,
            "noise": [step.path for step in pick[1:-1]]}
