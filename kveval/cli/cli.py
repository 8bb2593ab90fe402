"""The kveval command line: a thin click group.

Commands live in small modules (cli_run, cli_verdicts, cli_demo) that import heavy
libraries only inside their functions, so `kveval --help` stays fast. Library code
raises KvevalError; `main` alone turns it into one line on stderr and an exit code.

`main` opens the one door out for every command (kveval/sink.py) before anything runs:
the secrets the environment holds are registered, and stdout and stderr pass the Door.
"""

from __future__ import annotations

import os
import sys
import traceback

import click

from kveval import __version__
from kveval.cli.ab import ab
from kveval.cli.check import check
from kveval.cli.demo import demo
from kveval.cli.plan import plan
from kveval.cli.report import report
from kveval.cli.run import run, tasks
from kveval.cli.verdicts import compare, gate, score
from kveval.errors import EXIT_INPUT, Interrupted, KvevalError
from kveval.masking import forget, register_secrets
from kveval.run.interrupt import exit_code, how, signals_as_interrupt
from kveval.safe import one_line
from kveval.secret_sources import from_environment
from kveval.sink import installed


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kveval")
def cli() -> None:
    """Judge a serving change (FP8 KV cache, new attention backend, engine upgrade) against
    the noise the old setup already has.

    \b
    kveval run      --endpoint URL --suite tasks/rollout.toml --label bf16a -o results/bf16a.jsonl
    kveval compare  results/bf16a.jsonl results/fp8.jsonl --noise results/bf16b.jsonl
    kveval score    results/fp8.jsonl --baseline results/bf16a.jsonl
    kveval gate     --baseline A --candidate B --noise N   # 0 pass, 1 regression, 2 cannot judge
    kveval report   --baseline A --candidate B --noise N -o report.html   # the same, as a page
    kveval plan     results/bf16a.jsonl --noise results/bf16b.jsonl --detect 2  # how many items
    kveval check    --endpoint URL   # what a server offers kveval, in a few seconds
    kveval ab       --serve "CMD --port {port}" --candidate "ARGS" --suite S -o DIR  # all of it
    """


for command in (run, tasks, check, plan, compare, score, gate, report, ab, demo):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    register_secrets(from_environment(os.environ))
    try:
        with installed(), signals_as_interrupt(to_exit=True):
            code = _command(argv)
    finally:
        forget()
    sys.exit(code)


def _command(argv: list[str] | None) -> int:
    """The command's exit code; every error one line (messages quote servers and files:
    the Door masks and strips them as all the rest)."""
    try:
        code = cli.main(args=argv, prog_name="kveval", standalone_mode=False)
    except KvevalError as exc:
        kind = "" if isinstance(exc, Interrupted) else "error: "
        click.echo(f"kveval: {kind}{one_line(str(exc))}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo(f"kveval: interrupted ({how()}); nothing half-written was left", err=True)
        return exit_code()
    except click.ClickException as exc:  # a usage error: one line, and where help is
        ctx = getattr(exc, "ctx", None)
        where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        click.echo(f"kveval: error: {one_line(exc.format_message())}{where}", err=True)
        return exc.exit_code if exc.exit_code else EXIT_INPUT
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except Exception:  # a fault of kveval's own: its traceback, through the Door too
        traceback.print_exc()
        return 1
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    main()
