"""The plan of an `ab` experiment (pure) and what its folder already holds.

Start 1 is the baseline's setup, then `--noise-runs N` restarts of it, then the candidate's
setup. Each server runs the suite into its own run file (the baseline in data order; every
restart and the candidate `--order shuffle`, each with its own seed, so that under no change
the candidate is one more draw of the baseline's setup), then, where teacher forcing applies,
forces the baseline's answers (`LABEL-forced.jsonl`) while it is up: the baseline's own
server too (`baseline-forced.jsonl`, the reference every forced run is compared with), then
the `--speed` load. A run whose file holds every item its header planned, each answered, is
finished and kept; a server whose runs are all finished (and whose load is measured) is not
started again.
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


def forced_label(label: str) -> str:
    return f"{label}-forced"


def plan(opts: AbOptions, forcing: bool) -> tuple[Start, ...]:
    """Every start in order; `forcing`: the forced runs are part of it."""
    folder = Folder(opts.output)
    starts = []
    for label in labels(opts.noise_runs):
        side = opts.candidate if label == CANDIDATE else opts.baseline
        runs = [RunStep(label, folder.run(label), "data" if label == BASELINE else "shuffle")]
        if forcing:
            forced = forced_label(label)
            runs.append(RunStep(forced, folder.run(forced), "data", forced=True))
        starts.append(Start(label, side, tuple(runs), opts.speed))
    return tuple(starts)


@dataclass(frozen=True)
class GateFiles:
    """The gate's inputs: the free runs, and the forced ones where the experiment forced."""

    baseline: Path
    candidate: Path
    noise: tuple[Path, ...]
    forced: tuple[Path, ...] = ()  # the baseline's own forced pass, the candidate's, restarts'


def gate_files(folder: Folder, noise_runs: int, forced: bool) -> GateFiles:
    names = labels(noise_runs)
    runs = tuple(folder.run(label) for label in names)
    both = (names[0], names[-1], *names[1:-1])
    return GateFiles(runs[0], runs[-1], runs[1:-1],
                     tuple(folder.run(forced_label(n)) for n in both) if forced else ())
