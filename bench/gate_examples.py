"""Issue 17's examples of the gate going wrong, rebuilt from hand-made run files and judged by
the old code and the new code side by side.

Each example writes its run files (plain JSONL in the format of DESIGN.md, which both readers
accept) into a temporary folder, runs `kveval gate` (or `compare`, where the example is about
it) in a child process with one source tree first on PYTHONPATH, and prints one Markdown row:
the example | before: verdict, exit code, the telling line | after: the same. Examples that
need many random draws (A/A runs of a setup whose answers or distributions vary) print the
share of draws ending in each exit code instead. Everything random is seeded; the table is the
same at every run. The examples that need a real server are listed as such, with why.

    python bench/gate_examples.py --before /work/old-kveval --after /work/wt-examples
        [--python .venv/bin/python] [--draws 100] [--only WORD] [--verbose]

--python is the interpreter of the child processes (Python 3.11 or later, with kveval's
dependencies; they run `python -P` in the temporary folder, so only PYTHONPATH decides which
kveval is imported); --verbose prints every command's whole output under the table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Record = dict[str, Any]
TASKS = ("gsm8k", "prompts", "needle", "evidence", "copy", "mrcr")
NEEDLE_LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768)
DEPTHS = (0, 10, 25, 50, 75, 90, 100)


# ---------------------------------------------------------------- run files


def task_spec(name: str) -> Record:
    return {"name": name, "adapter": name, "api": "completions", "max_tokens": 256,
            "stop": [], "temperature": 0.0, "limit": None, "params": {}}


def header(label: str, dtype: str) -> Record:
    """A run header of model `m` on a vLLM-like server whose KV cache dtype is `dtype`."""
    return {"type": "run", "schema_version": 1, "label": label,
            "endpoint": "http://127.0.0.1:8000/v1", "model": "m",
            "tasks": [task_spec(name) for name in TASKS],
            "sampling": {"temperature": 0.0, "seed": 0, "extra_body": None}, "concurrency": 8,
            "fingerprint": {"models": [{"id": "m"}],
                            "metrics": {"cache_config_info": {"cache_dtype": dtype}}},
            "created": "2026-01-01T00:00:00Z", "kveval_version": "0.1.0"}


def item(task: str, i: int, text: str, correct: bool | None = None, cut: bool = False,
         meta: Record | None = None, logprobs: Record | None = None) -> Record:
    return {"type": "item", "task": task, "item_id": f"{task}/{i:04d}",
            "prompt_sha256": f"{task}-{i}", "request": {}, "status": "ok", "output": text,
            "finish_reason": "length" if cut else "stop", "correct": correct,
            "meta": meta or {}, "logprobs": logprobs}


def write_run(path: Path, items: Iterable[Record], dtype: str = "auto") -> str:
    """The run file at `path`, labelled by its stem; `dtype` other than auto: a candidate."""
    lines = [header(path.stem, dtype), *items]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return str(path)


def gsm8k(n: int, wrong: Iterable[int] = (), changed: Iterable[int] = (),
          cut: Iterable[int] = (), empty: Iterable[int] = (), tag: str = "") -> list[Record]:
    """GSM8K items: `changed` answers carry `tag`, `cut` ones stopped at max_tokens."""
    wrong, changed, cut, empty = set(wrong), set(changed), set(cut), set(empty)
    return [item("gsm8k", i, "" if i in empty else f"So the answer is {i}."
                 + (f" ({tag})" if i in changed else ""), i not in wrong, i in cut)
            for i in range(n)]


def prompts(n: int, changed: Iterable[int] = (), tag: str = "") -> list[Record]:
    changed = set(changed)
    return [item("prompts", i, f"Reply {i}: the capital of France is Paris."
                 + (f" ({tag})" if i in changed else "")) for i in range(n)]


def long_items(task: str, per_length: int, wrong: Iterable[int],
               lengths: Sequence[int] = NEEDLE_LENGTHS) -> list[Record]:
    """Long-context items, `per_length` at each length; item i sits at length
    i // per_length and is wrong when i is in `wrong`."""
    wrong = set(wrong)
    return [item(task, i, "4172" if i not in wrong else "I do not know.", i not in wrong,
                 meta={"target_tokens": lengths[i // per_length],
                       "depth": DEPTHS[i % len(DEPTHS)], "trial": i % per_length})
            for i in range(per_length * len(lengths))]


# ---------------------------------------------------------------- running kveval


@dataclass(frozen=True)
class Tree:
    """One source tree of kveval and the interpreter that runs it."""

    name: str
    path: Path
    python: str

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
        return {**env, "PYTHONPATH": str(self.path), "NO_COLOR": "1", "COLUMNS": "200"}

    def python_run(self, argv: Sequence[str], folder: Path, stdin: str = "",
                   timeout: int = 1800) -> subprocess.CompletedProcess[str]:
        """`python -P ...` in `folder`: neither the folder nor this one shadows the tree."""
        return subprocess.run([self.python, "-P", *argv], cwd=folder, env=self.env(),
                              input=stdin, capture_output=True, text=True, timeout=timeout)


@dataclass(frozen=True)
class Outcome:
    code: int
    text: str  # stdout then stderr


def kveval(tree: Tree, args: Sequence[str], folder: Path) -> Outcome:
    done = tree.python_run(["-m", "kveval.cli", *args], folder)
    return Outcome(done.returncode, done.stdout + done.stderr)


BATCH = """
import contextlib, io, json, sys
from kveval.cli.cli import main
codes, first = [], None
for args in json.load(sys.stdin):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        except Exception:
            code = -1
    codes.append(code)
    first = out.getvalue() if first is None else first
print(json.dumps({"codes": codes, "first": first}))
"""


def batch_codes(tree: Tree, calls: Sequence[Sequence[str]],
                folder: Path) -> tuple[list[int], str]:
    """The exit code of each call, all run in one child process (-1: a traceback), and the
    first call's output."""
    done = tree.python_run(["-c", BATCH], folder, json.dumps([list(c) for c in calls]))
    if done.returncode != 0:
        raise RuntimeError(f"{tree.name}: the batch failed: {done.stderr[-2000:]}")
    found = json.loads(done.stdout)
    return list(found["codes"]), str(found["first"])


def stored_logprobs(tree: Tree, bodies: Sequence[Record], k: int, folder: Path) -> list[Record]:
    """The server's log-probability bodies as this tree's `kveval run` stores them."""
    code = ("import json, sys; from kveval.run.logprobs import compact; "
            f"print(json.dumps([compact(b, {k}) for b in json.load(sys.stdin)]))")
    done = tree.python_run(["-c", code], folder, json.dumps(list(bodies)))
    if done.returncode != 0:
        raise RuntimeError(f"{tree.name}: storing log-probabilities failed: {done.stderr}")
    return list(json.loads(done.stdout))


# ---------------------------------------------------------------- reading an outcome


def verdict(outcome: Outcome) -> str:
    """The gate's verdict word, `usage error` for click's, else the command or exit code."""
    found = re.search(r"kveval (gate: [A-Z][A-Z ]+[A-Z]|compare|score)", outcome.text)
    if found:
        return found[1].removeprefix("gate: ")
    if re.search(r"^(Usage|Error): ", outcome.text, re.M):
        return "usage error"
    return {0: "exit 0", 1: "exit 1", 2: "cannot judge"}.get(outcome.code, "crash")


def telling(outcome: Outcome, patterns: Sequence[str]) -> str:
    """For each pattern that matches a line, the clause around its first match (or around
    its first group; a group named `quote`: that group), joined by ' / '."""
    lines = outcome.text.splitlines()
    if "Traceback (most recent call last)" in outcome.text:
        return "traceback: " + lines[-1]
    found = []
    for pattern in patterns:
        match = next(((line, m) for line in lines if (m := re.search(pattern, line))), None)
        if match:
            line, m = match
            quoted = m.groupdict().get("quote")
            found.append(quoted or clause(line, m.start(m.lastindex or 0)))
    return " / ".join(dict.fromkeys(found)) or "(no line says so)"


def clause(line: str, at: int) -> str:
    """The part of `line` around position `at` between '; ' separators outside brackets."""
    depth, cuts = 0, []
    for i, char in enumerate(line):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and line.startswith("; ", i):
            cuts.append(i)
    start = max((c + 2 for c in cuts if c < at), default=0)
    end = min((c for c in cuts if c >= at), default=len(line))
    return re.sub(r"\s{2,}", "  ", line[start:end].strip())


def md(text: str) -> str:
    """Text for a Markdown table cell: no column break, no code span broken."""
    return text.replace("|", "\\|").replace("`", "'")


def cell(outcome: Outcome, patterns: Sequence[str]) -> str:
    return f"{verdict(outcome)}, exit {outcome.code}: `{md(telling(outcome, patterns))}`"


def rate_cell(codes: Sequence[int]) -> str:
    counts = Counter(codes)
    shares = ", ".join(f"exit {code}: {100 * counts[code] / len(codes):.0f}%"
                       for code in sorted(counts))
    return f"{shares} (of {len(codes)})"


# ---------------------------------------------------------------- the examples


@dataclass(frozen=True)
class Example:
    """One row: `build` writes the run files into a folder (with the tree whose `kveval run`
    would have written them) and returns the command line; `telling` finds the line."""

    name: str
    build: Callable[[Path, Tree], list[str]]
    telling: tuple[str, ...]


def gate_args(base: str, cand: str, noise: Sequence[str] = (), *extra: str) -> list[str]:
    args = ["gate", "--baseline", base, "--candidate", cand]
    for path in noise:
        args += ["--noise", path]
    return [*args, *extra]


def lost_10_files(folder: Path) -> tuple[str, str]:
    base = write_run(folder / "a.jsonl", gsm8k(50, wrong=range(45, 50)))
    cand = write_run(folder / "b.jsonl", gsm8k(50, wrong=range(35, 50), changed=range(35, 45),
                                               tag="b"), "fp8")
    return base, cand


def lost_10_of_50(folder: Path, _: Tree) -> list[str]:
    return gate_args(*lost_10_files(folder))


def score_lost_10_of_50(folder: Path, _: Tree) -> list[str]:
    base, cand = lost_10_files(folder)
    return ["score", cand, "--baseline", base]


def lost_3_points_of_1319(folder: Path, _: Tree) -> list[str]:
    lost = set(range(300)) | set(range(1000, 1040))
    base = write_run(folder / "a.jsonl", gsm8k(1319, wrong=range(300)))
    cand = write_run(folder / "b.jsonl", gsm8k(1319, wrong=lost, changed=range(1000, 1040),
                                               tag="b"), "fp8")
    return gate_args(base, cand)


def copy_with_truncations(folder: Path, _: Tree) -> list[str]:
    base = write_run(folder / "a.jsonl", gsm8k(500, wrong=range(0, 500, 3), cut=range(12)))
    noise = write_run(folder / "n.jsonl", gsm8k(500, wrong=range(0, 500, 3), cut=(100, 200)))
    shutil.copyfile(base, folder / "copy.jsonl")
    return gate_args(base, str(folder / "copy.jsonl"), [noise])


def drift_and_cuts(noise_runs: int) -> Callable[[Path, Tree], list[str]]:
    """25 of 50 prompt answers changed and 28 of 500 GSM8K answers cut, where the baseline
    and every noise run change and cut nothing."""
    def build(folder: Path, _: Tree) -> list[str]:
        def run(label: str, cand: bool = False) -> str:
            items = (gsm8k(500, wrong=range(0, 500, 3), cut=range(28) if cand else ())
                     + prompts(50, changed=range(25) if cand else (), tag=label))
            return write_run(folder / f"{label}.jsonl", items, "fp8" if cand else "auto")
        noise = [run(f"n{k}") for k in range(noise_runs)]
        return gate_args(run("a"), run("c", True), noise)
    return build


def holm_runs(folder: Path) -> tuple[str, str, list[str]]:
    """Prompts: the baseline and two noise runs change 5 of 80 answers each, the candidate 30
    (each run its own items); GSM8K: every run changes 5 of 100 of its own."""
    def run(k: int, label: str, mine: int, dtype: str = "auto") -> str:
        own = range(5 * k, 5 * k + mine)
        items = (gsm8k(100, wrong=range(0, 100, 4), changed=range(5 * k, 5 * k + 5), tag=label)
                 + prompts(80, changed=own, tag=label))
        return write_run(folder / f"{label}.jsonl", items, dtype)
    return run(0, "a", 5), run(3, "c", 30, "fp8"), [run(1, "n1", 5), run(2, "n2", 5)]


def holm_compare(folder: Path, _: Tree) -> list[str]:
    base, cand, noise = holm_runs(folder)
    return ["compare", base, cand, "--noise", noise[0], "--noise", noise[1]]


def holm_gate(folder: Path, _: Tree) -> list[str]:
    base, cand, noise = holm_runs(folder)
    return gate_args(base, cand, noise)


def needle_at_32k(folder: Path, _: Tree) -> list[str]:
    """21 needles a length over 1k to 32k, 19 found at each length up to 16k by both runs;
    at 32k the baseline finds 17 (0.81), the candidate 5 (0.24)."""
    missed, at_32k = {21 * k + j for k in range(5) for j in (0, 1)}, 5 * 21
    base = write_run(folder / "a.jsonl",
                     long_items("needle", 21, missed | set(range(at_32k, at_32k + 4))))
    cand = write_run(folder / "b.jsonl",
                     long_items("needle", 21, missed | set(range(at_32k, at_32k + 16))), "fp8")
    return gate_args(base, cand, (), "--min-recovery", "0.95")


def one_needle_a_length(folder: Path, _: Tree) -> list[str]:
    """One needle at 1k and one at 32k; the candidate misses the one at 32k."""
    lengths = (1024, 32768)
    base = write_run(folder / "a.jsonl", long_items("needle", 1, (), lengths))
    cand = write_run(folder / "b.jsonl", long_items("needle", 1, (1,), lengths), "fp8")
    return gate_args(base, cand, (), "--min-recovery", "0.95")


def recovery_above_one(folder: Path, _: Tree) -> list[str]:
    base = write_run(folder / "a.jsonl", long_items("needle", 5, range(0, 30, 7)))
    shutil.copyfile(base, folder / "copy.jsonl")
    return gate_args(base, str(folder / "copy.jsonl"), (), "--min-recovery", "1.01")


def empty_apart_from_cut(folder: Path, _: Tree) -> list[str]:
    """fp8 answers 8 of 100 with nothing against 1, 1 and 1; every run cuts 9 answers."""
    def run(label: str, empty: int, offset: int, dtype: str = "auto") -> str:
        cut = [(offset + 40 + i) % 100 for i in range(9)]
        items = gsm8k(100, wrong=range(50), cut=cut,
                      empty=[(offset + i) % 100 for i in range(empty)])
        return write_run(folder / f"{label}.jsonl", items, dtype)
    noise = [run("b", 1, 10), run("c", 1, 20), run("d", 1, 30)]
    return gate_args(run("a", 1, 0), run("fp8", 8, 50, "fp8"), noise)


# ---------------------------------------------------------------- log-probabilities


VOCAB = tuple(f"t{j}" for j in range(8))


def softmax_top(logits: Sequence[float], k: int) -> list[tuple[str, float]]:
    """The top k (token, log-probability) pairs of a softmax over VOCAB, best first."""
    top = max(logits)
    log_total = top + math.log(sum(math.exp(x - top) for x in logits))
    ranked = sorted(zip(VOCAB, logits, strict=True), key=lambda tl: -tl[1])[:k]
    return [(token, x - log_total) for token, x in ranked]


def compact(positions: Sequence[Sequence[tuple[str, float]]], k: int) -> Record:
    """The run file's log-probability record of positions whose chosen token is t0."""
    return {"k": k, "tokens": ["t0"] * len(positions),
            "logprobs": [dict(top).get("t0", -9999.0) for top in positions],
            "top_tokens": [[t for t, _ in top] for top in positions],
            "top_logprobs": [[lp for _, lp in top] for top in positions]}


@dataclass(frozen=True)
class Setup:
    """The true next-token logits of every item and position, and each item's own spread
    of them from run to run (lognormal around `spread`)."""

    logits: dict[tuple[str, int], list[list[float]]]
    scale: dict[tuple[str, int], float]


def make_setup(rng: random.Random, tasks: Sequence[str], items: int, positions: int = 4,
               spread: float = 0.05) -> Setup:
    keys = [(task, i) for task in tasks for i in range(items)]
    logits = {key: [[4.0] + [rng.gauss(0, 1) for _ in VOCAB[1:]] for _ in range(positions)]
              for key in keys}
    return Setup(logits, {key: spread * math.exp(0.5 * rng.gauss(0, 1)) for key in keys})


def kl_run(setup: Setup, rng: random.Random, times: float = 1.0, k: int = 5) -> list[Record]:
    """One run of the setup: every logit moved by its item's spread times `times`; the
    answers (t0 at every position) are the same in every run."""
    records = []
    for (task, i), rows in setup.logits.items():
        noisy = [[x + times * setup.scale[task, i] * rng.gauss(0, 1) for x in row]
                 for row in rows]
        lp = compact([softmax_top(row, k) for row in noisy], k)
        records.append(item(task, i, "t0" * len(rows), None if task == "prompts" else True,
                            logprobs=lp))
    return records


def kl_files(folder: Path, seed: int, tasks: Sequence[str], items: int,
             times: float = 1.0) -> tuple[str, str, str]:
    """Baseline, candidate (its spread `times` the setup's) and one noise run."""
    rng = random.Random(seed)
    setup = make_setup(rng, tasks, items)
    base = write_run(folder / f"a{seed}.jsonl", kl_run(setup, rng))
    noise = write_run(folder / f"n{seed}.jsonl", kl_run(setup, rng))
    cand = write_run(folder / f"b{seed}.jsonl", kl_run(setup, rng, times), "fp8")
    return base, cand, noise


def free_running_divergence(folder: Path, _: Tree) -> list[str]:
    """GSM8K and prompts, 50 items each: the candidate's next-token distributions spread 3
    times as far as a restart's; every answer the same."""
    base, cand, noise = kl_files(folder, 7, ("gsm8k", "prompts"), 50, times=3.0)
    return gate_args(base, cand, [noise])


def kl_six_tasks(folder: Path, draws: int) -> list[list[str]]:
    """A/A: six tasks of 40 items, the candidate one more run of the baseline's setup."""
    calls = []
    for seed in range(draws):
        base, cand, noise = kl_files(folder, 1000 + seed, TASKS, 40)
        calls.append(gate_args(base, cand, [noise], "--max-kl", "0"))
    return calls


SERVER_BODIES = (  # (baseline, candidate): a top-1 of -0.00004 against one of -0.00006
    {"content": [{"token": "4", "logprob": -0.00004, "top_logprobs": [
        {"token": "4", "logprob": -0.00004}, {"token": "5", "logprob": -10.5}]}]},
    {"content": [{"token": "4", "logprob": -0.00006, "top_logprobs": [
        {"token": "4", "logprob": -0.00006}, {"token": "5", "logprob": -10.2}]}]},
)


def true_kl() -> float:
    """KL(baseline || candidate) of SERVER_BODIES over {4, 5, any other}, at full precision."""
    def masses(body: Record) -> list[float]:
        top = [math.exp(t["logprob"]) for t in body["content"][0]["top_logprobs"]]
        return [*top, 1 - sum(top)]
    p, q = (masses(body) for body in SERVER_BODIES)
    return sum(a * math.log(a / b) for a, b in zip(p, q, strict=True))


def rounded_logprobs(folder: Path, tree: Tree) -> list[str]:
    """20 prompts whose log-probabilities this tree's `kveval run` stored from the server's
    bodies; the noise run is the baseline again."""
    base_lp, cand_lp = stored_logprobs(tree, SERVER_BODIES, 2, folder)
    def run(label: str, lp: Record, dtype: str = "auto") -> str:
        return write_run(folder / f"{label}.jsonl",
                         [item("prompts", i, "4", logprobs=lp) for i in range(20)], dtype)
    return ["compare", run("a", base_lp), run("b", cand_lp, "fp8"), "--noise", run("n", base_lp)]


# ---------------------------------------------------------------- examples of many draws


def evidence_pair(folder: Path, seed: int) -> list[str]:
    """Evidence, 126 items over 6 lengths: a run of A and another run of A, 6% of the
    answers flipping, as many each way."""
    rng = random.Random(seed)
    base_wrong, cand_wrong = set(), set()
    for i in range(126):
        u = rng.random()
        if u < 0.03:
            cand_wrong.add(i)  # lost
        elif u < 0.06:
            base_wrong.add(i)  # gained
        elif rng.random() < 0.3:
            base_wrong.add(i)
            cand_wrong.add(i)
    base = write_run(folder / f"a{seed}.jsonl", long_items("evidence", 21, base_wrong))
    cand = write_run(folder / f"b{seed}.jsonl", long_items("evidence", 21, cand_wrong))
    return gate_args(base, cand, (), "--policy", "paired", "--margin", "3")


def paired_margin_aa(folder: Path, draws: int) -> list[list[str]]:
    return [evidence_pair(folder, seed) for seed in range(draws)]


def quiet_setup(own: int) -> Callable[[Path, int], list[list[str]]]:
    """50 prompts; the baseline and two noise runs each depart on `own` prompts of their own;
    the candidate departs on 1, 2, ..., 40 of its own (one call each, whatever `draws`)."""
    def build(folder: Path, draws: int) -> list[list[str]]:
        runs = [write_run(folder / f"r{r}.jsonl", prompts(50, range(own * r, own * r + own),
                                                          f"r{r}")) for r in range(3)]
        return [gate_args(runs[0], write_run(folder / f"c{k}.jsonl",
                                             prompts(50, range(10, 10 + k), "c"), "fp8"),
                          runs[1:]) for k in range(1, 41)]
    return build


def smallest_flagged(codes: Sequence[int]) -> str:
    """The fewest departures (of 1..40) that exit 1, and whether every larger one does."""
    first = next((k for k, code in enumerate(codes, start=1) if code == 1), None)
    if first is None:
        return f"none of 1..40 flagged ({rate_cell(codes)})"
    later = [k for k, code in enumerate(codes, start=1) if k > first and code != 1]
    return (f"fewest flagged: {first}; " + (f"not flagged again at {later}" if later
                                            else "every larger one flagged"))


@dataclass(frozen=True)
class Many:
    """One row of many calls: `build` writes the files of `draws` draws and returns one
    command line per call; `summary` reads the exit codes."""

    name: str
    build: Callable[[Path, int], list[list[str]]]
    summary: Callable[[Sequence[int]], str] = rate_cell


GATE = r"^gate: "
DRIFT = r"^prompts: .*(prediction limit|more drift)"
EXAMPLES: tuple[Example | Many, ...] = (
    Example("GSM8K 50: baseline 45 right, candidate 35 (10 lost, 0 gained)", lost_10_of_50,
            (r"show a loss", GATE)),
    Example("score on the files of the row above", score_lost_10_of_50,
            (r"(?P<quote>intervals overlap.*)$", r"a loss shown|show a loss")),
    Example("GSM8K 1319: a 3.0-point loss (40 lost, 0 gained)", lost_3_points_of_1319,
            (r"show a loss", GATE)),
    Example("byte-identical copy; baseline cut 12 of 500 GSM8K answers, the noise run 2",
            copy_with_truncations, (r"collapse: |truncated: ", GATE)),
    *(Example(f"25 of 50 prompts changed + 28 of 500 GSM8K cut, {k} noise run(s) that change "
              "and cut nothing", drift_and_cuts(k), (DRIFT, GATE)) for k in (1, 2, 3)),
    Example("compare: each run departs on its own prompts, the baseline and two noise runs on 5 "
            "of 80, the candidate on 30; GSM8K: every run on 5 of 100", holm_compare, (DRIFT,)),
    Example("gate on the same files as the row above", holm_gate, (DRIFT, GATE)),
    Example("needle, 21 a length, 1k-32k; at 32k 0.81 -> 0.24; --min-recovery 0.95",
            needle_at_32k, (r"AUC recovery \d", r"upper end|below 95.0%", GATE)),
    Example("needle, one item at 1k and one at 32k, the 32k one lost; --min-recovery 0.95",
            one_needle_a_length, (r"cannot judge: ", r"AUC recovery \d+\.\d%", GATE)),
    Example("byte-identical copy of a needle run, --min-recovery 1.01", recovery_above_one,
            (r"^Error: ", r"upper end", GATE)),
    Example("fp8 answers 8 of 100 GSM8K with nothing vs 1, 1, 1; every run cuts 9",
            empty_apart_from_cut, (r"gsm8k (collapse|empty): ", GATE)),
    Example(f"log-probabilities as stored: top-1 -0.00004 vs -0.00006 (top-K KL at full "
            f"precision {true_kl():.2g} nats); compare", rounded_logprobs,
            (r"raised the mean per-token KL",)),
    Example("default gate, one noise run: next-token distributions spread 3x a restart's, "
            "answers the same", free_running_divergence,
            (GATE, r"distributions moved", r"^gsm8k divergence: .*(above|beyond) the noise")),
    Many("--policy paired --margin 3: evidence (126 items), A vs another run of A with 6% "
         "flipping either way", paired_margin_aa),
    Many("--max-kl 0 over six tasks of 40 items, A/A, one noise run", kl_six_tasks),
    Many("stable setup: the baseline and two noise runs depart on 0 of 50 prompts; the "
         "candidate on 1..40", quiet_setup(0), smallest_flagged),
    Many("the baseline and two noise runs depart on 1 of 50 prompts each, their own; the "
         "candidate on 1..40 of its own (k + 1 changed against the baseline)", quiet_setup(1),
         smallest_flagged),
)
NOT_FROM_FILES = (
    ("vLLM 0.32 fp8 KV cache, a second noise run at concurrency 1 hiding the change",
     "needs a real vLLM server (its answers; the counts alone are the 25-of-50 rows)"),
    ("llama-server q4_0 on a GPU: divergence above the floor, default PASS silent",
     "needs a real llama-server on a GPU; the same situation from files is the "
     "'spread 3x' row"),
    ("simulated power (overlap rule 6% for a 4-point loss) and whole-gate A/A rates",
     "simulations of thousands of runs: bench/gate_calibration.py measures them"),
)


# ---------------------------------------------------------------- the table


def one_row(example: Example, trees: Sequence[Tree], folder: Path) -> tuple[list[str], str]:
    """The row's cells (before, after) and every command's whole output."""
    cells, log = [], ""
    for tree in trees:
        where = folder / tree.name
        where.mkdir(parents=True)
        args = example.build(where, tree)
        outcome = kveval(tree, args, where)
        cells.append(cell(outcome, example.telling))
        log += f"\n$ kveval {' '.join(args)}  # {tree.name}, exit {outcome.code}\n{outcome.text}"
    return cells, log


def many_row(example: Many, trees: Sequence[Tree], folder: Path,
             draws: int) -> tuple[list[str], str]:
    calls = example.build(folder, draws)
    done = [batch_codes(tree, calls, folder) for tree in trees]
    log = "".join(f"\n{tree.name}: exit codes {codes}; the first call's output:\n{first}"
                  for tree, (codes, first) in zip(trees, done, strict=True))
    return [example.summary(codes) for codes, _ in done], log


def rows(trees: Sequence[Tree], folder: Path, draws: int, only: str) -> Iterable[tuple[str, ...]]:
    for number, example in enumerate(EXAMPLES):
        if only.lower() not in example.name.lower():
            continue
        print(f"running: {example.name}", file=sys.stderr, flush=True)
        where = folder / f"{number:02d}"
        where.mkdir()
        if isinstance(example, Many):
            cells, log = many_row(example, trees, where, draws)
        else:
            cells, log = one_row(example, trees, where)
        yield (md(example.name), *cells, log)


def table(found: Iterable[tuple[str, ...]], verbose: bool) -> str:
    lines = ["| example | before (old code) | after (new code) |", "|---|---|---|"]
    logs = []
    for name, before, after, log in found:
        lines.append(f"| {name} | {before} | {after} |")
        logs.append(log)
    lines += [f"| {md(name)} | not built from files: {md(why)} | - |"
              for name, why in NOT_FROM_FILES]
    return "\n".join(lines) + ("\n" + "\n".join(logs) if verbose else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the old source tree")
    parser.add_argument("--after", type=Path, required=True, help="the new source tree")
    parser.add_argument("--python", default=sys.executable, help="the children's interpreter")
    parser.add_argument("--draws", type=int, default=100, help="draws of a many-draw example")
    parser.add_argument("--only", default="", help="only the examples whose name has this")
    parser.add_argument("--verbose", action="store_true", help="every command's output too")
    args = parser.parse_args()
    trees = [Tree("before", args.before.resolve(), args.python),
             Tree("after", args.after.resolve(), args.python)]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gate-examples-") as folder:
        print(table(rows(trees, Path(folder), args.draws, args.only), args.verbose))
    print(f"\nrun time: {time.perf_counter() - start:.0f} s (--draws {args.draws})")


if __name__ == "__main__":
    main()
