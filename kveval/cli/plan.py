"""`kveval plan`: how many items and noise runs a rollout check needs, from a pilot."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kveval.cli import options, reading
from kveval.safe import shell_line

if TYPE_CHECKING:
    from kveval.judge.compare import Side
    from kveval.judge.plan import Plan, Targets

GSM8K_SPLITS = {"test": 1319, "train": 7473}


MAX_NATS = 1000.0  # a rise past this (nats per token) no forced run can mean
MAX_SHARE = 1e5  # percent of the floor's mean KL


class KlRise(click.ParamType):
    """A KL rise: nats per token ("0.001"), or a share of the floor's mean KL ("6%")."""

    name = "rise"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[float, bool]:
        if isinstance(value, tuple):
            return value
        text = str(value).strip()
        relative = text.endswith("%")
        try:
            number = float(text[:-1] if relative else text)
        except ValueError:
            self.fail(f"{text!r} is neither nats (0.001) nor a share of the floor (6%)", param,
                      ctx)
        if not math.isfinite(number) or number <= 0 or number > (MAX_SHARE if relative
                                                                 else MAX_NATS):
            self.fail(f"{text!r}: a rise must be above 0 and at most {MAX_NATS:g} nats or "
                      f"{MAX_SHARE:g}% of the floor", param, ctx)
        return (number / 100, True) if relative else (number, False)


def _lines(path: Path, pilot: str) -> int | None:
    """The non-blank lines of a data file the pilot's header names: read as every path is
    (a regular file within the cap, formats/limits.py); None when it is not there."""
    from kveval.errors import DataError, KvevalError
    from kveval.formats import limits

    try:
        data = limits.read_whole(path, error=DataError)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except KvevalError as exc:
        raise DataError(f"{pilot}: the data its header names: {exc}") from None
    except OSError:
        return None
    return sum(bool(line.strip()) for line in data.splitlines())


def available(base: Side) -> dict[str, int | None]:
    """The most items each task's data can supply: GSM8K's split, a prompt file's lines;
    long-context grids grow with --trials and have no limit."""
    found: dict[str, int | None] = {}
    for spec in base.header.tasks if base.header else []:
        name, data = spec.get("name"), spec.get("data")
        split = (spec.get("params") or {}).get("split", "test")
        if spec.get("adapter") == "gsm8k":
            own = _lines(Path(data) / f"{split}.jsonl", base.path) if data else None
            found[str(name)] = own or GSM8K_SPLITS.get(split)
        elif spec.get("adapter") == "prompts" and data:
            found[str(name)] = _lines(Path(data), base.path)
        else:
            found[str(name)] = None
    return found


def grow_commands(result: Plan, base: Side, noises: list[Side], cand: Side | None) -> list[str]:
    """`kveval run` lines that extend every pilot run to the items the plan needs, then add
    the noise runs it needs. Runs `kveval ab` made (their endpoint holds its `{port}`) are
    grown by the same `ab` command with --detect, which resumes them."""
    sizes = [min(p.items_needed, p.available or p.items_needed) for p in result.tasks
             if p.kind == "accuracy" and p.items_needed]
    pilot = max((p.items for p in result.tasks if p.kind == "accuracy"), default=0)
    size = max(sizes, default=0)
    wanted = max((p.noise_runs_needed or 0 for p in result.tasks), default=0)
    runs = [base, *noises, *([cand] if cand else [])]
    if size <= pilot and wanted <= len(noises):
        return []
    made = [r.header.endpoint for r in runs if r.header and "{port}" in r.header.endpoint]
    if made:
        return [f"these runs were made by kveval ab ({made[0]}): the same kveval ab command "
                f"with --detect {result.targets.detect:g} grows them and adds the restarts "
                "the plan needs; kveval run cannot reach a server ab started"]
    limit = ["--limit", str(size)] if size > pilot else []
    found = [shell_line(["kveval", "run", "--resume", "-o", r.path, *limit])
             for r in runs] if limit else []
    for k in range(len(noises) + 1, wanted + 1):
        label = f"{re.sub(r'[^A-Za-z0-9._-]+', '_', base.label) or 'pilot'}-noise{k}"
        out = Path(base.path).with_name(f"{label}.jsonl")
        found.append(_forced_noise(base, out, k) if base.header and base.header.teacher_force
                     else shell_line(["kveval", "run", "--like", base.path, "--order",
                                      "shuffle", "--label", label, "-o", str(out), *limit]))
    return found


def _forced_noise(base: Side, out: Path, k: int) -> str:
    """One more forced restart of a forced pilot: the same baseline forced again, on the
    same endpoint (restarted first: a restart is what the noise run measures)."""
    assert base.header is not None and base.header.teacher_force is not None
    label = str(base.header.teacher_force.get("baseline") or "BASELINE")
    beside = Path(base.path).with_name(f"{label}.jsonl")
    source = beside if beside.is_file() else Path("BASELINE.jsonl")
    endpoint = base.header.endpoint
    where = [] if endpoint == "embedded" else ["--endpoint", endpoint]
    return shell_line(["kveval", "run", *where, "--teacher-force", str(source), "--label",
                       out.stem, "-o", str(out)])


def pilot_plan(baseline: str, noise: Sequence[str], candidate: str | None,
               targets: Targets) -> tuple[Plan, list[str]]:
    """The plan from the pilot's run files, and the commands that grow its runs."""
    result, commands, _ = _pilot_plan(baseline, noise, candidate, targets)
    return result, commands


def _pilot_plan(baseline: str, noise: Sequence[str], candidate: str | None,
                targets: Targets) -> tuple[Plan, list[str], list[str]]:
    """The plan, the commands that grow its runs, and what its context tasks can show: the
    pilot's files read once."""
    from kveval.judge.plan import plan as make_plan

    base, *rest = reading.load_all((baseline, *noise, *([candidate] if candidate else [])),
                                   reading.load_run)
    noises, cand = rest[:len(noise)], (rest[-1] if candidate else None)
    result = make_plan(base, noises, cand, targets, available(base))
    return (result, grow_commands(result, base, noises, cand),
            context_plan(base, len(noises), targets))


def context_plan(base: Side, runs: int, targets: Targets) -> list[str]:
    """What the pilot's context tasks can show with `runs` restarts (show/context_plan.py)."""
    from kveval.judge.checks import TASK_WEIGHT, WEIGHTS
    from kveval.judge.positions import context_tasks, edges
    from kveval.show.context_plan import context_lines

    tasks = base.header.tasks if base.header else []
    found = context_tasks(tasks)
    total = sum(WEIGHTS["context"] if t.get("name") in found else TASK_WEIGHT for t in tasks)
    lines = []
    for task in sorted(found):
        items = [i for i in base.items if i.task == task and i.ok]
        cuts = edges(items[0].meta) if items else []
        if cuts:
            rise = targets.detect_kl if targets.kl_relative and targets.detect_kl else 0.1
            lines += context_lines(task, len(items), cuts[1:], max(runs, 1),
                                   targets.alpha * WEIGHTS["context"] / total, rise)
    return lines


@click.command()
@click.argument("baseline", metavar="PILOT")
@options.noise_option("A run of the pilot's setup restarted (repeatable): the flip rate and "
                      "the noise floor's spread.")
@click.option("--candidate", metavar="C", help="A pilot run of the new setup: its flips.")
@click.option("--detect", type=options.Finite(min=0, min_open=True), default=2.0,
              show_default=True, metavar="POINTS", help="The accuracy loss to catch.")
@click.option("--detect-drift", type=options.Finite(min=0, min_open=True), default=10.0,
              show_default=True, metavar="POINTS",
              help="Extra changed answers to catch, in points of a task's items.")
@click.option("--detect-kl", type=KlRise(), metavar="NATS|PCT%",
              help="A rise of the mean KL per token over the noise floor to catch: in nats "
                   "(absolute, 0.001) or as a share of the floor's mean KL (relative, 6%).")
@click.option("--power", type=options.Finite(0.5, 1, max_open=True), default=0.8,
              show_default=True, help="How often the change must be caught.")
@click.option("--alpha", type=options.Finite(0, 1, min_open=True, max_open=True),
              default=0.05, show_default=True, help="The gate's family-wise level.")
@options.output_options
def plan(baseline: str, noise: tuple[str, ...], candidate: str | None, detect: float,
         detect_drift: float, detect_kl: tuple[float, bool] | None, power: float, alpha: float,
         as_json: bool, markdown: bool) -> int:
    """The items and noise runs each task needs to catch a change, from a pilot run.

    \b
    kveval plan results/bf16a.jsonl --noise results/bf16b.jsonl --detect 2
    Per task: the flip rate the pilot shows, the change it catches at its size, the items
    (and noise runs) needed for --detect, --detect-drift and --detect-kl at --power, and
    what the data can supply; then the `kveval run` lines that grow the runs to that size.
    """
    from kveval.judge.plan import Targets
    from kveval.show import report
    from kveval.show.plan_view import plan_blocks, plan_json
    from kveval.sink import echo_json

    options.check_output(as_json, markdown)
    rise, relative = detect_kl if detect_kl is not None else (None, False)
    targets = Targets(detect, detect_drift, rise, power, alpha, kl_relative=relative)
    result, commands, context = _pilot_plan(baseline, noise, candidate, targets)
    data: dict[str, Any] = plan_json(result, commands)
    blocks = plan_blocks(result, commands)
    data["context"] = context
    blocks += context
    if as_json:
        echo_json(report.dumps(data))
    else:
        click.echo((report.to_markdown if markdown else report.to_text)(blocks), nl=False)
    return 0
