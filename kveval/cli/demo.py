"""`kveval demo`: the whole KV-cache story on the embedded engine, in minutes on a laptop CPU.

Baseline (f16 KV cache) twice, restarted and shuffled between, the candidate once, then
compare, score and gate: the same commands a user runs against their own server. Offline:
its GSM8K questions and shots are the slice kveval ships (kveval/data/gsm8k).

Sized by where the time goes on the embedded engine (bench/demo_timing.py): a cold prefill
costs about 10 CPU ms a prompt token, and the shuffled noise run loses llama.cpp's cached
prompt prefix at nearly every item, so it pays each GSM8K prompt in full (8 shots: 1,384
tokens; 2 shots: 282); an answer token with top-5 log-probabilities costs about 0.09 CPU s
against 0.02 without (llama-cpp-python ranks the whole vocabulary in Python), so they are
asked on one small task only. The engine starts in about a second: each run starts its own,
and the noise run is a real restart.
"""

from __future__ import annotations

import textwrap
import time
from dataclasses import dataclass, replace
from pathlib import Path

import click

CANDIDATES = ("q8_0", "q4_0")
BASELINE = "f16"
# nats per token the candidate's next-token distributions may move beyond a restart's: the
# divergence check then judges (an 8-prompt restart repeats on a CPU, so answers alone see
# little at this size); q8_0 moves them by about 0.002, q4_0 by about 0.04
MAX_KL = "0.01"
CTX = 4096
PAGE = "report.html"  # the gate's verdict and its evidence as one HTML page


@dataclass(frozen=True)
class Sizes:
    """The demo suite: sized for 3 runs in under 3 minutes on 2 quiet CPU cores."""

    gsm8k: int = 8  # SmolLM2-135M scores 0-4%: more questions would show nothing more
    shots: int = 2  # 8 shots are 1,384 prompt tokens; 2 are 282
    gsm8k_tokens: int = 128
    prompts: int = 8
    prompt_tokens: int = 96
    # the same prompts, short answers with top-5 log-probabilities: the divergence line
    short_prompts: int = 8
    short_tokens: int = 16  # each costs ~0.1 CPU s: the vocabulary ranked in Python
    # one bundled document forced from its first token, judged by position (0-256, 256-512,
    # 512-1k): one echo a run, about 10 CPU s (a prefill and the vocabulary ranked in Python
    # at every position); 2k tokens cost 30-50 s a run
    context_tokens: int = 1024

    @property
    def items(self) -> int:
        return self.gsm8k + self.prompts + self.short_prompts + 1  # the document

    def cut(self, limit: int | None) -> Sizes:
        if limit is None:
            return self
        return replace(self, gsm8k=min(self.gsm8k, limit), prompts=min(self.prompts, limit),
                       short_prompts=min(self.short_prompts, limit))


def suite_toml(sizes: Sizes, gsm8k_data: str) -> str:
    return (
        "# The suite `kveval demo` runs: small enough for a laptop CPU.\n"
        "# For a real rollout decision use tasks/rollout.toml (500 GSM8K questions at 8 shots,\n"
        "# long-context probes up to your server's context).\n\n"
        f'[[task]]\nname = "gsm8k"\nlimit = {sizes.gsm8k}\nshots = {sizes.shots}\n'
        f"max_tokens = {sizes.gsm8k_tokens}\ndata = {_toml_string(gsm8k_data)}\n\n"
        f'[[task]]\nname = "prompts"\nlimit = {sizes.prompts}\n'
        f"max_tokens = {sizes.prompt_tokens}\n\n"
        "# the same prompts, short answers with top-5 log-probabilities: token divergence\n"
        f'[[task]]\nname = "short-prompts"\nadapter = "prompts"\nlimit = {sizes.short_prompts}\n'
        f"max_tokens = {sizes.short_tokens}\nlogprobs = 5\n\n"
        "# one long document forced from its first token: KL and perplexity by position\n"
        f'[[task]]\nname = "context"\nlimit = 1\n'
        f"lengths = [{sizes.context_tokens // 4}, {sizes.context_tokens // 2}, "
        f"{sizes.context_tokens}]\n"
    )


def _toml_string(text: str) -> str:
    """A TOML literal string (no escapes), or a basic one where the text holds a quote."""
    if "'" not in text and "\n" not in text:
        return f"'{text}'"
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


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


def run_step(step: Step, number: int, suite: Path, out: Path) -> int:
    from kveval.cli.run import run

    note(f"\n[{number}/3] {step.what}: start the engine, run the suite, stop the engine")
    args = [
        "--suite", str(suite), "--label", step.label, "-o", str(out / f"{step.label}.jsonl"),
        "--overwrite", "--kv-cache-type", step.kv_cache_type, "--ctx", str(CTX),
        "--concurrency", "1", "--order", step.order,
    ]  # fmt: skip
    return invoke(run, args)


def verdicts(out: Path, runs: tuple[Step, ...],
             family: tuple[str, ...] = ("--max-kl", MAX_KL)) -> int:
    """compare, score and gate as a user types them; gate's own output and exit code.
    `family`: the options that shape the gate's family, given to compare and gate alike."""
    from kveval.cli.verdicts import compare, gate, score

    a, b, cand = (str(out / f"{step.label}.jsonl") for step in runs)
    said = " ".join(family)
    note(f"\n$ kveval compare {a} {cand} --noise {b} {said}".rstrip())
    invoke(compare, [a, cand, "--noise", b, *family])
    note(f"\n$ kveval score {cand} --baseline {a}")
    invoke(score, [cand, "--baseline", a])
    page = str(out / PAGE)
    note(f"\n$ kveval gate --baseline {a} --candidate {cand} --noise {b} {said} --html {page}")
    code = invoke(gate, ["--baseline", a, "--candidate", cand, "--noise", b, *family,
                         "--html", page])
    click.echo(f"exit code of kveval gate: {code}")
    plan_line(a, b, cand)
    return code


def plan_line(a: str, b: str, cand: str) -> None:
    """One line of `kveval plan`: the GSM8K items a decision on a 5-point loss needs."""
    from kveval.cli.plan import pilot_plan
    from kveval.judge.plan import Targets
    from kveval.show.plan_view import sentence

    note(f"\n$ kveval plan {a} --noise {b} --candidate {cand} --detect 5   # how many items?")
    found, _ = pilot_plan(a, (b,), cand, Targets(detect=5.0))
    first = next((p for p in found.tasks if p.kind == "accuracy"), None)
    if first is not None:
        click.echo(f"{first.task} {first.kind}: {sentence(first, found)}")


EXIT_MEANING = {0: "0: pass", 1: "1: a regression beyond the noise", 2: "2: could not judge"}

EXPLANATION = """
What you just saw ({minutes:.1f} minutes)
  kveval started a llama.cpp server on a small bundled model (SmolLM2-135M, on the CPU) and
  ran one suite (GSM8K questions, regression prompts, the same prompts with log-probabilities)
  three times: with the default f16 KV cache, again with f16 after a restart in another
  order, then with a {candidate} KV cache. Every answer is saved in {out}/*.jsonl.
  - compare: how many answers the {candidate} cache changed, next to how many a mere restart
    changed. That second number is the noise floor: only change beyond it is evidence.
    (llama.cpp on a CPU is nearly deterministic, so here a restart changes little; a GPU
    server that batches requests usually changes a few answers.)
    A changed answer is not a wrong one: read them side by side with
    kveval compare {out}/{BASELINE}-a.jsonl {out}/{candidate}.jsonl --show 5
  - token divergence (short-prompts, run with --logprobs 5): how far each next-token
    distribution moved (KL in nats, top-1 agreement), next to the restart's; it sees a
    quantized cache long before answers change. With --max-kl {max_kl} the gate fails a
    task whose distributions move more than {max_kl} nats per token beyond a restart's
    (q8_0 moves them by about 0.002, q4_0 by about 0.04: try --kv-cache-type q4_0).
  - score: accuracy with 95% intervals, and on the same questions the paired difference:
    which loss this sample rules out, and which it cannot (a few questions rule out
    little).
{gate_line}
  - plan (one line of it here): with these runs as a pilot, the items a check needs to
    catch a loss with 80% power at the flip rate they show, and what the pilot could catch.

Do the same on your own server (vLLM, SGLang, llama.cpp, Ollama):
  kveval check --endpoint http://HOST:8000/v1     # what it supports: log-probabilities, ...
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
    meanings = "; ".join(EXIT_MEANING.values())
    rollout = Path("tasks/rollout.toml")
    suite = rollout if rollout.is_file() else out / "suite.toml"
    gate_line = textwrap.fill(
        f"- gate: one decision for CI, its verdict the line starting `gate:` above, its exit "
        f"code the status a CI job reads ({meanings}). Here it exited {gate_code}.",
        width=92, initial_indent="  ", subsequent_indent="    ")
    return EXPLANATION.format(minutes=wall_s / 60, candidate=candidate, out=out, suite=suite,
                              BASELINE=BASELINE, gate_line=gate_line, page=out / PAGE,
                              max_kl=MAX_KL)


@click.command()
@click.option("--kv-cache-type", "candidate", type=click.Choice(CANDIDATES), default="q8_0",
              show_default=True, help="The candidate's KV cache type (K and V).")
@click.option("--limit", type=click.IntRange(min=1), metavar="N",
              help="At most N items per task (a quick look; the default runs "
                   f"{Sizes().items} items per run).")
@click.option("--output-dir", type=click.Path(file_okay=False), default="results/demo",
              show_default=True, help="Where the suite and the three run files go.")
@click.option("--data", metavar="DIR", help="GSM8K folder with train.jsonl and test.jsonl. "
              "Default: the slice kveval ships (the demo's questions and shots; no network).")
def demo(candidate: str, limit: int | None, output_dir: str, data: str | None) -> int:
    """Run the whole A/B/noise-floor/gate story on the embedded llama.cpp engine.

    \b
    Three runs of a small suite on SmolLM2-135M (CPU): f16 KV cache, f16 again after a
    restart, items shuffled (the noise floor), then the candidate KV cache; then compare,
    score and gate, and the HTML page of the verdict (its path is the last line printed).
    Under 3 minutes on 2 quiet CPU cores; no network (GSM8K: the slice kveval ships).
    Exit 0 when the demo ran (whatever the gate decided), 2 when the gate could not judge.
    """
    from kveval.run.data import bundled_gsm8k

    started = time.monotonic()
    check_engine(candidate)
    sizes = Sizes().cut(limit)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    suite = out / "suite.toml"
    gsm8k_data = str(Path(data).expanduser().resolve()) if data else bundled_gsm8k()
    suite.write_text(suite_toml(sizes, gsm8k_data), encoding="utf-8")
    note(f"kveval demo: {sizes.items} items per run, 3 runs; suite: {suite}")
    runs = steps(candidate)
    for number, step in enumerate(runs, start=1):
        code = run_step(step, number, suite, out)
        if code != 0:
            note(f"run {step.label} exited {code}: some items failed; the gate will say so")
    gate_code = verdicts(out, runs)
    click.echo(explain(candidate, gate_code, out, time.monotonic() - started).rstrip("\n"))
    return 2 if gate_code not in (0, 1) else 0
