"""`kveval demo`: the whole KV-cache story on the embedded engine, in minutes on a laptop CPU.

Baseline (f16 KV cache) twice, restarted and shuffled between, the candidate once, then
compare, score and gate: the same commands a user runs against their own server.
"""

from __future__ import annotations

import textwrap
import time
from dataclasses import dataclass, replace
from pathlib import Path

import click

CANDIDATES = ("q8_0", "q4_0")
BASELINE = "f16"
CTX = 4096
PAGE = "report.html"  # the gate's verdict and its evidence as one HTML page


@dataclass(frozen=True)
class Sizes:
    """The demo suite. Defaults fit 3 runs in under 10 minutes on 2 CPU cores."""

    gsm8k: int = 24  # ~2 s per 8-shot question
    prompts: int = 16  # ~1.5 s per answer (up to 200 tokens)
    # short answers with top-5 log-probabilities: llama-cpp-python ranks the whole
    # vocabulary in Python for each token (~50 ms), so these stay few and short
    short_prompts: int = 8
    short_tokens: int = 32
    needle_lengths: tuple[int, ...] = (1024, 2048)  # q8_0 takes ~40 s per 3k-token prompt
    needle_depths: tuple[int, ...] = (10, 50, 90)
    needle_trials: int = 1
    needle_limit: int | None = None  # None: the whole grid

    @property
    def needle(self) -> int:
        grid = len(self.needle_lengths) * len(self.needle_depths) * self.needle_trials
        return grid if self.needle_limit is None else min(grid, self.needle_limit)

    @property
    def items(self) -> int:
        return self.gsm8k + self.prompts + self.short_prompts + self.needle

    def cut(self, limit: int | None) -> Sizes:
        if limit is None:
            return self
        return replace(self, gsm8k=min(self.gsm8k, limit), prompts=min(self.prompts, limit),
                       short_prompts=min(self.short_prompts, limit), needle_limit=limit)


def suite_toml(sizes: Sizes) -> str:
    needle_limit = "" if sizes.needle_limit is None else f"limit = {sizes.needle}\n"
    return (
        "# The suite `kveval demo` runs: small enough for a laptop CPU, a 4k context.\n"
        "# For a real rollout decision use tasks/rollout.toml (500 GSM8K questions,\n"
        "# long-context probes up to your server's context).\n\n"
        f'[[task]]\nname = "gsm8k"\nlimit = {sizes.gsm8k}\n\n'
        f'[[task]]\nname = "prompts"\nlimit = {sizes.prompts}\n\n'
        "# the same prompts, short answers with top-5 log-probabilities: token divergence\n"
        f'[[task]]\nname = "short-prompts"\nadapter = "prompts"\nlimit = {sizes.short_prompts}\n'
        f"max_tokens = {sizes.short_tokens}\nlogprobs = 5\n\n"
        f'[[task]]\nname = "needle"\n{needle_limit}'
        f"lengths = {list(sizes.needle_lengths)}\n"
        f"depths = {list(sizes.needle_depths)}\n"
        f"trials = {sizes.needle_trials}\n"
    )


@dataclass(frozen=True)
class Step:
    label: str
    kv_cache_type: str
    what: str
    order: str = "data"  # --order: the noise floor's run is shuffled


def steps(candidate: str) -> tuple[Step, ...]:
    return (
        Step(f"{BASELINE}-a", BASELINE, f"baseline: {BASELINE} KV cache"),
        Step(f"{BASELINE}-b", BASELINE,
             f"baseline again after a restart, items shuffled: {BASELINE} KV cache", "shuffle"),
        Step(candidate, candidate, f"candidate: {candidate} KV cache"),
    )


def note(text: str) -> None:
    click.secho(text, err=True, bold=True)


def invoke(command: click.Command, args: list[str]) -> int:
    """Run another kveval command in this process; its callback returns the exit code."""
    code = command.main(args=args, prog_name=f"kveval {command.name}", standalone_mode=False)
    return code if isinstance(code, int) else 0


def check_engine(candidate: str) -> None:
    """Fail in one line, before any work, when the embedded engine cannot start."""
    from kveval.run.engine_setup import EngineConfig, prepare

    for kv in (BASELINE, candidate):
        prepare(EngineConfig(kv_cache_type=kv, ctx=CTX))


def run_step(step: Step, number: int, suite: Path, out: Path, data: str | None) -> int:
    from kveval.cli.run import run

    note(f"\n[{number}/3] {step.what}: start the engine, run the suite, stop the engine")
    args = [
        "--suite", str(suite), "--label", step.label, "-o", str(out / f"{step.label}.jsonl"),
        "--overwrite", "--kv-cache-type", step.kv_cache_type, "--ctx", str(CTX),
        "--concurrency", "1", "--order", step.order,
    ]  # fmt: skip
    return invoke(run, args + (["--data", data] if data else []))


def verdicts(out: Path, runs: tuple[Step, ...]) -> int:
    from kveval.cli.verdicts import compare, gate, score

    a, b, cand = (str(out / f"{step.label}.jsonl") for step in runs)
    note(f"\n$ kveval compare {a} {cand} --noise {b}")
    invoke(compare, [a, cand, "--noise", b])
    note(f"\n$ kveval score {cand} --baseline {a}")
    invoke(score, [cand, "--baseline", a])
    page = str(out / PAGE)
    note(f"\n$ kveval gate --baseline {a} --candidate {cand} --noise {b} --html {page}")
    return invoke(gate, ["--baseline", a, "--candidate", cand, "--noise", b, "--html", page])


GATE_WORDS = {
    0: "PASSED (exit 0): on every task the {c} cache stayed within what this sample and the "
    "restart's noise can tell apart",
    1: "found a REGRESSION (exit 1): on the task(s) marked REGRESSION the {c} cache scored "
    "lower, or (on prompts without ground truth) changed more answers, than the noise allows",
    2: "could NOT JUDGE (exit 2): see its message above",
}


EXPLANATION = """
What you just saw ({minutes:.1f} minutes)
  kveval started a llama.cpp server on a small bundled model (SmolLM2-135M, on the CPU) and
  ran one suite (GSM8K questions, regression prompts, a needle in a haystack) three times:
  with the default f16 KV cache, again with f16 after a restart in another order, then with
  a {candidate} KV cache. Every answer is saved in {out}/*.jsonl.
  - compare: how many answers the {candidate} cache changed, next to how many a mere restart
    changed. That second number is the noise floor: only change beyond it is evidence.
    (llama.cpp on a CPU is deterministic, so here a restart may change nothing; a GPU
    server that batches requests usually changes a few answers.)
    A changed answer is not a wrong one: read them side by side with
    kveval compare {out}/{BASELINE}-a.jsonl {out}/{candidate}.jsonl --show 5
  - token divergence (short-prompts, run with --logprobs 5): how far each next-token
    distribution moved (KL in nats, top-1 agreement), next to the restart's; it sees a
    quantized cache long before answers change.
  - score: accuracy with 95% intervals, and on the same questions the paired difference:
    which loss this sample rules out, and which it cannot (a small sample rules out little).
{gate_line}

Do the same on your own server (vLLM, SGLang, llama.cpp, Ollama):
  kveval run --endpoint http://HOST:8000/v1 --suite {suite} --label bf16a -o results/bf16a.jsonl
  #   restart the server unchanged, then the noise floor (another order: other batches):
  kveval run --endpoint http://HOST:8000/v1 --suite {suite} --order shuffle --label bf16b -o results/bf16b.jsonl
  #   restart it with the change (e.g. vllm serve MODEL --kv-cache-dtype fp8), then:
  kveval run --endpoint http://HOST:8000/v1 --suite {suite} --label fp8 -o results/fp8.jsonl
  kveval gate --baseline results/bf16a.jsonl --candidate results/fp8.jsonl --noise results/bf16b.jsonl
  ({out}/suite.toml is the small suite used here; tasks/rollout.toml, with 500 GSM8K
  questions and long-context probes, is sized for a decision.)

The same verdict as one page, with charts and the changed answers side by side
(kveval report, or gate --html FILE); open it in a browser:
{page}
"""  # noqa: E501


def explain(candidate: str, gate_code: int, out: Path, wall_s: float) -> str:
    verdict = GATE_WORDS.get(gate_code, GATE_WORDS[2]).format(c=candidate)
    rollout = Path("tasks/rollout.toml")
    suite = rollout if rollout.is_file() else out / "suite.toml"
    gate_line = textwrap.fill(f"- gate: one decision for CI. Here it {verdict}.", width=92,
                              initial_indent="  ", subsequent_indent="    ")
    return EXPLANATION.format(minutes=wall_s / 60, candidate=candidate, out=out, suite=suite,
                              BASELINE=BASELINE, gate_line=gate_line, page=out / PAGE)


@click.command()
@click.option("--kv-cache-type", "candidate", type=click.Choice(CANDIDATES), default="q8_0",
              show_default=True, help="The candidate's KV cache type (K and V).")
@click.option("--limit", type=click.IntRange(min=1), metavar="N",
              help="At most N items per task (a quick look; the default runs "
                   f"{Sizes().items} items per run).")
@click.option("--output-dir", type=click.Path(file_okay=False), default="results/demo",
              show_default=True, help="Where the suite and the three run files go.")
@click.option("--data", metavar="DIR", help="GSM8K folder with train.jsonl and test.jsonl. "
              "Default: datasets.load_dataset('openai/gsm8k', 'main').")
def demo(candidate: str, limit: int | None, output_dir: str, data: str | None) -> int:
    """Run the whole A/B/noise-floor/gate story on the embedded llama.cpp engine.

    \b
    Three runs of a small suite on SmolLM2-135M (CPU): f16 KV cache, f16 again after a
    restart, items shuffled (the noise floor), then the candidate KV cache; then compare,
    score and gate, and the HTML page of the verdict (its path is the last line printed).
    About 6 minutes on 2 CPU cores at the default sizes (q4_0: 8); --limit 2: 2.
    Exit 0 when the demo ran (whatever the gate decided), 2 when the gate could not judge.
    """
    started = time.monotonic()
    check_engine(candidate)
    sizes = Sizes().cut(limit)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    suite = out / "suite.toml"
    suite.write_text(suite_toml(sizes), encoding="utf-8")
    note(f"kveval demo: {sizes.items} items per run, 3 runs; suite: {suite}")
    runs = steps(candidate)
    for number, step in enumerate(runs, start=1):
        code = run_step(step, number, suite, out, data)
        if code != 0:
            note(f"run {step.label} exited {code}: some items failed; the gate will say so")
    gate_code = verdicts(out, runs)
    click.echo(explain(candidate, gate_code, out, time.monotonic() - started).rstrip("\n"))
    return 2 if gate_code not in (0, 1) else 0
