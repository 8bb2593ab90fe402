"""The power cases of the gate's hardest uses, through the CLI: run files written to a
temporary folder and judged by `kveval gate` (all calls of a case in one child process),
counting the rollouts that exit 1 (a regression) and, for A/A, the false alarms.

- `quiet`: two saved files alone (no noise run) on a quiet server: GSM8K 500 at 85%, judged
  at the level its accuracy check has in the rollout suite's family (`--alpha 0.0115`),
  each run departing from the setup's answer on 0.5% of the items (1% of answers flip between
  two runs), a departure flipping the answer's score; the candidate loses 15 right answers.
- `quiet-aa`: the same with a candidate that is one more run.
- `drift`: a prompt file without ground truth, 50 prompts, two restarts, judged at the level
  its drift check has in the rollout suite's family (`--alpha 0.0038`): items' fragility
  J-shaped, each run departing with its run effect (log-sd 0.25 between runs) so two runs
  change about 10 prompts, the candidate changing about 18 against the baseline.
- `drift-aa`: the same with a candidate that is one more restart.

    .venv/bin/python bench/power_cases.py [--reps 30] [--only quiet] [--python PY]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.special import expit, logit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate_examples import Record, Tree, batch_codes, gate_args, item, write_run  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LEVEL = 0.0115  # the accuracy check's share of alpha 0.05 in the rollout suite's family
DRIFT_LEVEL = 0.0038  # the drift check's (weight 2 of 26)


def gsm8k_run(usual_wrong: np.ndarray, departs: np.ndarray, lost: np.ndarray,
              tag: str) -> list[Record]:
    """A run's GSM8K items: its departures flip the usual answer's score; `lost` right
    answers turned wrong on top."""
    wrong = usual_wrong ^ departs | lost
    changed = departs | lost
    return [item("gsm8k", i, f"So the answer is {i}." + (f" ({tag})" if changed[i] else ""),
                 not bool(wrong[i])) for i in range(usual_wrong.size)]


def quiet(folder: Path, rng: np.random.Generator, lose: int) -> list[str]:
    n = 500
    usual_wrong = rng.random(n) < 0.15
    base = rng.random(n) < 0.005
    cand = rng.random(n) < 0.005
    right = np.flatnonzero(~(usual_wrong ^ cand))
    lost = np.zeros(n, bool)
    lost[rng.choice(right, lose, replace=False)] = True
    a = write_run(folder / "a.jsonl", gsm8k_run(usual_wrong, base, np.zeros(n, bool), "a"))
    b = write_run(folder / "b.jsonl", gsm8k_run(usual_wrong, cand, lost, "b"), "fp8")
    return gate_args(a, b, (), "--alpha", str(LEVEL))


def prompt_run(changed: np.ndarray, tag: str) -> list[Record]:
    return [item("prompts", i, f"Reply {i}." + (f" ({tag})" if changed[i] else ""))
            for i in range(changed.size)]


def drift(folder: Path, rng: np.random.Generator, extra: float) -> list[str]:
    """Per-run departures on J-shaped fragility with a run effect of log-sd 0.25; the
    candidate departs on `extra` of the other items on top."""
    n, runs = 50, 4
    fragility = np.clip(rng.beta(0.3, 0.3 * 0.9 / 0.1, n), 1e-6, 1 - 1e-6)
    effect = 0.25 * rng.standard_normal(runs)
    departs = rng.random((runs, n)) < expit(logit(fragility)[None, :] + effect[:, None])
    departs[-1] |= rng.random(n) < extra
    paths = [write_run(folder / f"r{r}.jsonl", prompt_run(departs[r], f"r{r}"),
                       "fp8" if r == runs - 1 else "auto") for r in range(runs)]
    return gate_args(paths[0], paths[-1], paths[1:-1], "--alpha", str(DRIFT_LEVEL))


CASES: dict[str, Callable[[Path, np.random.Generator], list[str]]] = {
    "quiet": lambda f, rng: quiet(f, rng, 15),
    "quiet-aa": lambda f, rng: quiet(f, rng, 0),
    "drift": lambda f, rng: drift(f, rng, 0.19),
    "drift-aa": lambda f, rng: drift(f, rng, 0.0),
}


def measure(name: str, reps: int, tree: Tree, seed: int) -> tuple[int, float]:
    """(rollouts exiting 1, the candidate's mean changes against the baseline: drift only)."""
    rng = np.random.default_rng([seed, len(name)])
    with tempfile.TemporaryDirectory() as tmp:
        calls = []
        for r in range(reps):
            folder = Path(tmp) / f"{r}"
            folder.mkdir()
            calls.append(CASES[name](folder, rng))
        codes, _ = batch_codes(tree, calls, Path(tmp))
    return sum(c == 1 for c in codes), 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="cases whose name contains this")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    tree = Tree("this", ROOT, args.python)
    for name in CASES:
        if args.only in name:
            started = time.perf_counter()
            hits, _ = measure(name, args.reps, tree, args.seed)
            print(f"{name}: exit 1 in {hits} of {args.reps} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
