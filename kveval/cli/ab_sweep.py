"""`kveval ab` with several candidates: each candidate's own gate against the one pool (its
full page DIR/NAME.html), then the sweep's verdict (judge/sweep.py), printed and written as
DIR/gate.json and the sweep's page DIR/report.html."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kveval.cli import options


def write_json(path: Path, data: dict[str, Any]) -> None:
    """The gate's JSON as json_text wrote it (its strings masked): never masked again as text,
    which would turn a secret's characters inside a number or a key into `***`."""
    from kveval.atomic import write_bytes
    from kveval.errors import RunFileError
    from kveval.show import report

    try:
        write_bytes(path, (report.dumps(data) + "\n").encode("utf-8"))
    except OSError as exc:
        raise RunFileError(f"{path}: cannot write ({exc.strerror or exc})") from None


def with_sizing(data: dict[str, Any], size: Any) -> dict[str, Any]:
    """The gate's JSON with the size --detect reached and why its growth ended, said on
    stderr too."""
    if size is None:
        return data
    from kveval.cli.ab_detect import words

    click.echo(f"kveval ab: --detect: judged at {words(size)} (growth ended: "
               f"{size.stopped})", err=True)
    return {**data, "sizing": size.to_json()}


def one_gate(args: Any, max_error_rate: float, page: Path) -> dict[str, Any]:
    """One candidate's gate JSON, its page written; what cannot be judged is its verdict."""
    from kveval.cli import gating
    from kveval.errors import KvevalError
    from kveval.show import report

    inputs, error = gating.load_inputs(args)
    try:
        if error is not None:
            raise error
        result, _, data = gating.decide_gate(inputs, max_error_rate)
    except KvevalError as exc:
        gating.publish(inputs, str(page), None, None, exc)
        return report.cannot_judge_json(str(exc))
    gating.publish(inputs, str(page), None, result, None, data)
    return data


def gate_sweep(folder: Path, gates: dict[str, Any], max_error_rate: float, as_json: bool,
               markdown: bool, run_code: int, size: Any = None) -> int:
    """Every candidate's gate, then the sweep's: exit 1 where any shows a regression, else 2
    where any cannot be judged, else 0."""
    from kveval.cli import gating
    from kveval.judge.sweep import row, sweep_exit
    from kveval.show import report, sweep_view

    found = {name: one_gate(args, max_error_rate, folder / f"{name}.html")
             for name, args in gates.items()}
    rows = [row(name, gate) for name, gate in found.items()]
    code, verdict = sweep_exit(rows)
    pages = {name: f"{name}.html" for name in found}
    data = with_sizing(sweep_view.sweep_json(rows, found, code, verdict, pages), size)
    write_json(folder / "gate.json", data)
    blocks = sweep_view.blocks(rows, verdict, {n: str(folder / p) for n, p in pages.items()})
    gating.write_page(str(folder / "report.html"), sweep_view.page(rows, found, verdict, pages))
    if markdown:
        gating.append_step_summary(report.to_markdown(blocks))
    options.emit(blocks, data, as_json, markdown)
    if run_code:
        click.echo(f"note: some items failed on a server (see {folder}); the gates judged "
                   "what is on file", err=True)
    return code
