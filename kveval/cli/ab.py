"""`kveval ab`: from two server command lines to a verdict. Option parsing and the gate's
rendering only: the starts and runs are kveval.run.ab's, the decision judge/'s. Heavy modules
are imported inside the command, so `kveval --help` stays fast."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kveval.cli import options
from kveval.cli.plan import KlRise

SERVE_HELP = ("The server command, `{port}` where the port goes, e.g. \"llama-server -m "
              "MODEL --port {port}\" or \"vllm serve MODEL --port {port}\" (split as a shell "
              "would, run without one).")


@click.command()
@click.option("--serve", required=True, metavar="CMD", help=SERVE_HELP)
@click.option("--candidate", multiple=True, metavar="[NAME=]ARGS",
              help="What a candidate adds to CMD, e.g. \"--kv-cache-dtype fp8\"; repeatable "
                   "as NAME=ARGS (q8=\"--cache-type-k q8_0 --cache-type-v q8_0\"), each "
                   "against the one pool of the baseline and its restarts.")
@click.option("--sweep", metavar="FILE.toml",
              help="Candidates from a file: one table each ([q8] with args and env).")
@click.option("--baseline", metavar="ARGS", help="What the baseline adds to CMD.")
@click.option("--baseline-env", multiple=True, metavar="K=V",
              help="An environment variable of the baseline's server (repeatable).")
@click.option("--candidate-env", multiple=True, metavar="[NAME:]K=V",
              help="An environment variable of a candidate's server (repeatable; NAME: "
                   "where there are several).")
@click.option("--record-env", multiple=True, metavar="NAME",
              help="An environment variable recorded in clear though its name looks like a "
                   "secret's (a value shaped like a credential stays masked).")
@click.option("--secret-env", multiple=True, metavar="NAME",
              help="An environment variable whose value is a secret: masked everywhere, "
                   "recorded as a fingerprint (a value is one already where its name says "
                   "KEY, TOKEN, SECRET, PASSWORD, AUTH... or its form is a credential: "
                   "user:password@ in a URL, sk-..., hf_...; any other is recorded in clear).")
@click.option("--parallel", type=click.IntRange(1, 64), default=1, show_default=True,
              metavar="N", help="Servers up at once, each its own slot: {slot} or {gpu} in "
                                "--serve or an env value takes its number.")
@click.option("--noise-runs", type=click.IntRange(0, 20), default=2, show_default=True,
              metavar="N", help="Restarts of the baseline's setup, each run --order shuffle: "
                                "the noise floor.")
@click.option("--suite", required=True, metavar="FILE.toml", help="The suite every run sends.")
@click.option("--data", metavar="DIR", help="GSM8K folder with train.jsonl and test.jsonl.")
@click.option("--model", help="Model id to request. Default: the one model /v1/models lists.")
@click.option("--concurrency", type=click.IntRange(1, 4096),
              help="Requests in flight at once in every run. Default: 32, or the slots each "
                   "server reports where fewer (llama-server's /props total_slots).")
@click.option("--timeout", type=options.Finite(min=0.1), metavar="S",
              help="Seconds for a whole request attempt in every run, a slowly trickled answer "
                   "included. Default: the suite's `timeout`, else 600.")
@click.option("--teacher-force", type=click.Choice(["auto", "on", "off"]), default="auto",
              show_default=True,
              help="Each server, the baseline's own too, also scores the baseline's answers "
                   "while it is up; the gate judges each forced pass against the baseline's "
                   "(auto: where the server offers a method that works).")
@click.option("--speed", is_flag=True,
              help="A short fixed streaming load on each server (the suite's [speed] table).")
@click.option("--ready-timeout", type=options.Finite(min=1), default=600.0, show_default=True,
              metavar="S", help="Seconds a server may take to answer /health or /v1/models.")
@click.option("--stop-grace", type=options.Finite(min=0), default=30.0, show_default=True,
              metavar="S", help="Seconds between SIGTERM and SIGKILL when a server is stopped.")
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False), metavar="DIR",
              help="The experiment's folder: run files, servers/ logs, gate.json, report.html. "
                   "The same command again resumes it.")
@click.option("--detect-kl", type=KlRise(), default="10%", show_default=True,
              metavar="NATS|PCT%",
              help="The forced KL rise the experiment is sized for: --dry-run says how many "
                   "forced restarts show it, and a note says when the forced runs' spread "
                   "needs more than --noise-runs.")
@click.option("--detect", type=options.Finite(min=0, min_open=True), metavar="POINTS",
              help="Size the experiment itself: a pilot, then items and restarts grown until "
                   "an accuracy loss of POINTS would show at 80%, then the candidates.")
@click.option("--pilot", type=click.IntRange(10, 100000), default=100, show_default=True,
              metavar="N", help="With --detect: the pilot's items a task.")
@click.option("--budget", metavar="STARTS|Nh",
              help="With --detect: server starts at most (12), or hours after which no "
                   "growth begins (3h); the verdict says when it ended the growth.")
@click.option("--dry-run", is_flag=True, help="Print the plan (each start, each run) only.")
@options.gate_options
@options.family_options
@options.output_options
def ab(policy: str, margin: float | None, max_error_rate: float, as_json: bool,
       markdown: bool, **given: Any) -> int:
    """Start the baseline's server, run the suite, stop it; restart it N times for noise runs;
    start the candidate's; then gate. Exit 0 pass, 1 regression, 2 cannot judge or a server
    that would not start, 130/143 interrupted (the same command resumes).

    \b
    kveval ab --serve "llama-server -m m.gguf --port {port}" \\
      --candidate "--cache-type-k q8_0 --cache-type-v q8_0" --suite tasks/rollout.toml -o ab/q8
    """
    from kveval.cli.ab_detect import check_budget, sizing_of
    from kveval.run.credentials import api_key

    options.check_output(as_json, markdown)
    family = {k: given.pop(k) for k in ("alpha", "metric", "skip", "max_kl", "min_recovery",
                                         "effective_fraction", "effective_threshold",
                                         "max_ppl_rise")}
    detect_kl = given.pop("detect_kl")
    sizing = sizing_of(given)
    opts = _options(given, sizing)
    check_budget(opts)
    if opts.dry_run:
        return _dry_run(opts, detect_kl, family["alpha"])
    opts, run_code, size = _send(opts, api_key())
    gates = {side.name: _gate_args(opts.output, opts.noise_runs, side.name, policy, margin,
                                   family) for side in opts.candidates}
    if len(gates) > 1:
        from kveval.cli.ab_sweep import gate_sweep

        return gate_sweep(opts.output, gates, max_error_rate, as_json, markdown, run_code,
                          size)
    args = next(iter(gates.values()))
    return _gate(args, max_error_rate, as_json, markdown, run_code, detect_kl, size)


def _options(given: dict[str, Any], sizing: Any) -> Any:
    """The experiment's settings, its secrets registered; a secret too short to mask in a
    server's log named in one line."""
    from dataclasses import replace

    from kveval.run.ab.options import from_cli, short_note

    opts = replace(from_cli(given), sizing=sizing)
    if (note := short_note(opts)) is not None:
        click.echo(note, err=True)
    return opts


def _send(opts: Any, key: str | None) -> tuple[Any, int, Any]:
    """Every run the experiment needs: as planned, or sized by --detect."""
    from kveval.cli.ab_detect import sized
    from kveval.run.ab.experiment import prepare, run_experiment

    if opts.sizing is None:
        return opts, run_experiment(opts, key), None
    ready = prepare(opts, key)
    assert ready is not None  # not a dry run
    return sized(ready, key)


def _sizing(opts: Any, detect_kl: tuple[float, bool], alpha: float) -> list[str]:
    """--dry-run: what the forced restarts can show, at the forced check's share of alpha
    in a family of the suite's tasks (each its usual checks and a forced one)."""
    from kveval.judge.checks import TASK_WEIGHT, WEIGHTS
    from kveval.run.tasks import read_suite
    from kveval.show.forced_plan import before_lines, rise_words

    rise, relative = detect_kl
    if not relative:
        return [f"forced restarts: {rise_words(rise, False)} is sized from the forced runs' "
                "own floor once they exist (a relative --detect-kl, 10%, is sized now)"]
    tasks = max(len(read_suite(opts.suite).specs), 1)
    level = alpha * WEIGHTS["forced"] / (tasks * (TASK_WEIGHT + WEIGHTS["forced"]))
    return before_lines(rise, opts.noise_runs, level)


def _dry_run(opts: Any, detect_kl: tuple[float, bool], alpha: float) -> int:
    """The plan, and what its restarts can show (forced KL, the context task by position)."""
    from kveval.cli.ab_detect import pilot_lines
    from kveval.run.ab.experiment import run_experiment
    from kveval.run.credentials import api_key

    if opts.sizing is not None:
        click.echo("\n".join(pilot_lines(opts.sizing)))
    run_experiment(opts, api_key())
    if opts.teacher_force != "off":
        click.echo("\n".join(_sizing(opts, detect_kl, alpha)))
    click.echo("\n".join(context_sizing(opts.suite, opts.noise_runs, alpha, detect_kl)))
    return 0


def context_sizing(suite: str | None, runs: int, alpha: float,
                   detect_kl: tuple[float, bool]) -> list[str]:
    """--dry-run: what the suite's context tasks can show with these restarts, at the context
    check's share of alpha in a family of the suite's tasks."""
    from kveval.adapters.context import grid
    from kveval.judge.checks import TASK_WEIGHT, WEIGHTS
    from kveval.run.documents import load_documents
    from kveval.run.tasks import read_suite
    from kveval.show.context_plan import context_lines

    specs = read_suite(suite).specs if suite else []
    found = [s for s in specs if s.adapter == "context"]
    total = sum(WEIGHTS["context"] if s.adapter == "context" else TASK_WEIGHT for s in specs)
    rise = detect_kl[0] if detect_kl[1] else 0.1
    lines = []
    for spec in found:
        documents = len(load_documents(spec.data).documents)
        lines += context_lines(spec.name, min(documents, spec.limit or documents), grid(spec),
                               runs, alpha * WEIGHTS["context"] / total, rise)
    return lines


def _gate_args(folder: Path, noise_runs: int, candidate: str, policy: str,
               margin: float | None, family: dict[str, Any]) -> Any:
    """The gate of the runs made: the forced runs beside the free ones where the experiment
    forced (ab.json says whether it did)."""
    from kveval.cli.gating import GateArgs
    from kveval.run.ab.plan import Folder, gate_files
    from kveval.run.ab.state import read_state

    runs = Folder(folder)
    state = read_state(runs.state)
    files = gate_files(runs, noise_runs, candidate, bool(state and state.forcing))
    return GateArgs(str(files.baseline), str(files.candidate), tuple(map(str, files.noise)), (),
                    policy, options.gate_margin(policy, margin), options.family(**family),
                    tuple(map(str, files.forced)))


def _forced_note(inputs: Any, detect_kl: tuple[float, bool]) -> None:
    """A note where the forced runs' own plan needs more restarts than were made."""
    from kveval.judge.plan import Targets, plan
    from kveval.show.forced_plan import after_note

    forced = inputs.forced
    if forced is None or not forced.noises:
        return
    rise, relative = detect_kl
    found = plan(forced.baseline, list(forced.noises), forced.candidate,
                 Targets(detect_kl=rise, kl_relative=relative))
    note = after_note(found, len(forced.noises))
    if note:
        click.echo(note, err=True)


def _gate(args: Any, max_error_rate: float, as_json: bool, markdown: bool,
          run_code: int, detect_kl: tuple[float, bool] = (0.1, True), size: Any = None) -> int:
    """The gate on the runs made: DIR/gate.json, DIR/report.html, the verdict printed."""
    from kveval.cli import gating
    from kveval.cli.ab_sweep import with_sizing, write_json
    from kveval.errors import KvevalError
    from kveval.show import report

    folder = Path(args.baseline).parent
    inputs, error = gating.load_inputs(args)
    try:
        if error is not None:
            raise error
        result, blocks, data = gating.decide_gate(inputs, max_error_rate)
    except KvevalError as exc:
        write_json(folder / "gate.json", report.cannot_judge_json(str(exc)))
        gating.publish(inputs, str(folder / "report.html"), None, None, exc)
        raise
    data = with_sizing(data, size)
    write_json(folder / "gate.json", data)
    _forced_note(inputs, detect_kl)
    gating.publish(inputs, str(folder / "report.html"),
                   report.to_markdown(blocks) if markdown else None, result, None, data)
    options.emit(blocks, data, as_json, markdown)
    if run_code:
        click.echo(f"note: some items failed on a server (see {folder}); the gate judged "
                   "what is on file", err=True)
    return int(result.exit_code)

