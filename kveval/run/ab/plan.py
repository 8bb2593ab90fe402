"""The plan of an `ab` experiment (pure) and what its folder already holds.

Start 1 is the baseline's setup, then `--noise-runs N` restarts of it, then each
candidate's setup (its name is its label). Each server runs the suite into its own run file
(the baseline in data order; every restart and candidate `--order shuffle`, each with its
own seed, so that under no change a candidate is one more draw of the baseline's setup),
then, where teacher forcing applies, forces the baseline's answers (`LABEL-forced.jsonl`)
while it is up: the baseline's own server too (`baseline-forced.jsonl`, the reference every
forced run is compared with), then the `--speed` load. A run whose file holds every item its
header planned, each answered, is finished and kept; a server whose runs are all finished
(and whose load is measured) is not started again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kveval.run.ab.options import AbOptions
from kveval.run.ab.side import Side

BASELINE = "baseline"


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

    def page_of(self, label: str) -> Path:
        """A candidate's own full verdict page, where the sweep has several."""
        return self.root / f"{label}.html"

    @property
    def state(self) -> Path:
        return self.root / "ab.json"

    @property
    def gate(self) -> Path:
        return self.root / "gate.json"

    @property
    def page(self) -> Path:
        return self.root / "report.html"


def pool_labels(noise_runs: int) -> list[str]:
    """The baseline's setup: the baseline and its restarts."""
    return [BASELINE, *(f"noise{k}" for k in range(1, noise_runs + 1))]


def forced_label(label: str) -> str:
    return f"{label}-forced"


def plan(opts: AbOptions, forcing: bool) -> tuple[Start, ...]:
    """Every start in order; `forcing`: the forced runs are part of it."""
    folder = Folder(opts.output)
    starts = []
    sides = [*((label, opts.baseline) for label in pool_labels(opts.noise_runs)),
             *((side.name, side) for side in opts.candidates)]
    for label, side in sides:
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


def gate_files(folder: Folder, noise_runs: int, candidate: str, forced: bool) -> GateFiles:
    """One candidate's gate: its runs against the pool's."""
    pool = pool_labels(noise_runs)
    both = (pool[0], candidate, *pool[1:])
    return GateFiles(folder.run(pool[0]), folder.run(candidate),
                     tuple(folder.run(label) for label in pool[1:]),
                     tuple(folder.run(forced_label(n)) for n in both) if forced else ())
