"""`kveval run` and `kveval tasks`: option parsing only; the work is in kveval.run.session."""

from __future__ import annotations

import click

from kveval.cli import options

ENV_ENDPOINT = "KVEVAL_ENDPOINT"


@click.command()
@click.option("--endpoint", envvar=ENV_ENDPOINT, metavar="URL", type=options.Endpoint(),
              help="OpenAI-compatible base URL incl. /v1 (env KVEVAL_ENDPOINT). "
                   "Unset: start the embedded llama.cpp engine.")
@click.option("--model", help="Model id to request. Default: the one model /v1/models lists.")
@click.option("--task", "task_names", multiple=True, metavar="NAME",
              help="A task to run (repeatable): gsm8k, prompts, needle, ... See `kveval tasks`.")
@click.option("--suite", metavar="FILE.toml", help="A suite of tasks, e.g. tasks/rollout.toml.")
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N items of each task.")
@click.option("--label", help="A name for this run ([A-Za-z0-9._-]+), e.g. bf16a. Default: the "
              "output file's name.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Run file to write "
              "(JSONL). Default: results/LABEL.jsonl.")
@click.option("--concurrency", type=click.IntRange(min=1, max=4096),
              help="Requests in flight at once. Default: 32, or the slots the server reports "
                   "where fewer (llama-server's /props total_slots).")
@click.option("--api", type=click.Choice(["completions", "chat"]),
              help="API mode for every task. Default: each task's own.")
@click.option("--max-tokens", type=click.IntRange(min=1), help="Answer budget for every task.")
@click.option("--seed", type=options.SEED, default=1234, show_default=True,
              help="The server's sampling seed: sent as `seed` in every request and recorded. "
                   "It seeds nothing in kveval (exemplars: --fewshot-seed or a suite's shot_seed; "
                   "--order shuffle: a seed of its own).")
@click.option("--order", type=click.Choice(["data", "shuffle"]), default="data",
              show_default=True,
              help="Send items in the data's order, or shuffled (seed drawn and recorded in "
                   "the header as order_seed) so other requests share a batch: the noise "
                   "floor's run. --resume keeps the file's order.")
@click.option("--extra-body", metavar="JSON", help="JSON object merged into every request, e.g. "
              "'{\"chat_template_kwargs\": {\"enable_thinking\": false}}'. Keys kveval sets "
              "(model, prompt, temperature, max_tokens, stop, seed, ...) are refused.")
@click.option("--setup", multiple=True, metavar="KEY=VALUE", help="State what the server does "
              "not tell, e.g. --setup kv_cache=q8_0 (repeatable): recorded in the header and "
              "shown in every setup diff.")
@click.option("--timeout", type=options.Finite(min=0.1),
              help="Seconds for a whole request attempt, a slowly trickled answer included. "
                   "Default: the suite's `timeout`, else 600.")
@click.option("--retries", type=click.IntRange(min=0), default=3, show_default=True,
              help="Retries per request: 5xx, 408/409/429 (after Retry-After), refused or dropped "
                   "connections, timeouts.")
@click.option("--resume", is_flag=True, help="Continue an existing run file: send only missing "
              "or failed items. Refused when it would drop items on file or mix setups.")
@click.option("--overwrite", is_flag=True, help="Replace an existing run file.")
@click.option("--like", metavar="RUN.jsonl", type=click.Path(dir_okay=False),
              help="A new run with that run's settings (endpoint, model, tasks, sampling, "
                   "setup): one more noise run, say; give its own --label, -o and --order. "
                   "With --resume and no task, the run on file continues as it was made.")
@click.option("--data", metavar="DIR", help="GSM8K folder with train.jsonl and test.jsonl. "
              "Default: datasets.load_dataset('openai/gsm8k', 'main').")
@click.option("--prompts", "prompts_file", metavar="FILE",
              help="Prompt file for the prompts task (text lines or JSONL).")
@click.option("--fewshot", type=click.Choice(["first", "lm-eval"]),
              help="GSM8K exemplars: first = the first N train items for every question "
                   "(default); lm-eval = drawn as lm-eval's default sampler does, so prompts "
                   "match lm-eval's byte for byte.")
@click.option("--shots", type=click.IntRange(min=0), help="GSM8K exemplars per question "
              "(default 8; lm-eval's gsm8k uses 5).")
@click.option("--fewshot-seed", type=options.SEED, help="With --fewshot lm-eval: the sampler's "
              "seed (lm-eval's --fewshot_seed, default 1234).")
@click.option("--lengths", metavar="LIST", help="Long-context lengths in tokens, e.g. 4k,16k,64k.")
@click.option("--depths", metavar="LIST", help="Needle depths in percent, e.g. 0,25,50,75,100.")
@click.option("--trials", type=click.IntRange(min=1), help="Trials per length and depth.")
@click.option("--logprobs", type=click.IntRange(min=0, max=100), metavar="K",
              help="Record each answer token's log-probability and the top K alternatives "
                   "(suite key `logprobs`; 0: off). `compare` then measures divergence.")
@click.option("--teacher-force", metavar="BASELINE.jsonl", type=click.Path(dir_okay=False),
              help="Score BASELINE's own answers under this server: log-probabilities of "
                   "every answer token (completions echo). Implies --logprobs 5 unless given.")
@click.option("--copy-lengths", metavar="LIST", help="copy task: passage lengths in tokens, "
              "e.g. 64,512.")
@click.option("--model-path", type=click.Path(dir_okay=False), help="Embedded engine: a GGUF "
              "model file. Default: the bundled SmolLM2-135M-Instruct.")
@click.option("--kv-cache-type", type=click.Choice(["f16", "q8_0", "q4_0"]),
              help="Embedded engine: KV cache type for K and V (flash attention on). Default f16.")
@click.option("--ctx", type=click.IntRange(min=256), help="Embedded engine: context size in "
              "tokens. Default 4096.")
def run(**options: object) -> int:
    """Run tasks against an endpoint and save every answer to a run file.

    \b
    kveval run --endpoint http://127.0.0.1:8000/v1 --task gsm8k --limit 500 --label bf16a
    kveval run --endpoint URL --task prompts --prompts prompts/regression.txt --label fp8
    kveval run --endpoint URL --suite tasks/rollout.toml --label fp8 -o results/fp8.jsonl
    kveval run --task gsm8k --limit 20 --kv-cache-type q8_0 --label q8   # embedded engine

    Exit codes: 0 every item answered; 1 some items failed (--resume retries them);
    2 bad input or an endpoint that cannot serve the run.
    """
    from kveval.run.options import RunOptions
    from kveval.run.session import run_session

    return run_session(RunOptions.from_cli(options))


@click.command()
def tasks() -> int:
    """List the task adapters and what each measures."""
    from kveval.adapters import ADAPTERS
    from kveval.run.tasks import builtin_names, builtin_spec

    for name in builtin_names():
        spec = builtin_spec(name)
        adapter = ADAPTERS.get(spec.adapter)
        description = adapter.description if adapter else "(adapter not available)"
        click.echo(f"{name:<16} {description}")
        click.echo(f"{'':<16} api={spec.api} max_tokens={spec.max_tokens}"
                   + (f" data={spec.data}" if spec.data else ""))
    return 0
