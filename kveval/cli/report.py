"""`kveval report`: the gate's verdict and its evidence as one self-contained HTML page.

The same page is what `kveval gate --html FILE` writes beside its decision (cli/gating.py). A
run file that cannot be read or runs that cannot be judged still give a page (CANNOT JUDGE,
with the reason), so a CI job always has an artifact to upload; the exit code is the gate's.
"""

from __future__ import annotations

from typing import Any

import click

from kveval.cli import gating, options


@click.command()
@click.option("--baseline", required=True, metavar="B", help="The run of the old setup.")
@click.option("--candidate", required=True, metavar="C", help="The run of the new setup.")
@options.noise_option("A run of the old setup restarted, best with --order shuffle (repeatable): "
                      "the pool of the baseline's setup that every check is judged against "
                      "(accuracy, drift, truncation, empty answers, divergence); two or three "
                      "measure a restart's spread.")
@options.repeat_option
@options.forced_options
@options.gate_options
@options.family_options
@click.option("-o", "--output", required=True, metavar="FILE", help="Where to write the page.")
def report(baseline: str, candidate: str, noise: tuple[str, ...], repeats: tuple[str, ...],
           baseline_forced: str | None, candidate_forced: str | None,
           noise_forced: tuple[str, ...], policy: str, margin: float | None,
           max_error_rate: float, output: str, **family: Any) -> int:
    """One self-contained HTML page: verdict, setup, accuracy, drift, long context and the
    changed answers side by side. Exit code as gate: 0 pass, 1 regression, 2 cannot judge.

    \b
    The page's verdict is the gate's with the same options (--min-recovery, --max-kl too).
    Inline CSS and SVG, no script, nothing fetched: it opens from disk and works as a CI
    artifact. Charts need matplotlib (pip install 'kveval[plot]'); without it, tables.
    """
    from kveval.errors import KvevalError

    args = gating.GateArgs(baseline, candidate, noise, repeats, policy,
                           options.gate_margin(policy, margin), options.family(**family),
                           options.forced_paths(baseline_forced, candidate_forced,
                                                noise_forced))
    gating.refuse_page_over_input(output, args)
    inputs, error = gating.load_inputs(args)
    result = verdict = None
    if error is None:
        try:
            result, _, verdict = gating.decide_gate(inputs, max_error_rate)
        except KvevalError as exc:
            error = exc
    gating.write_page(output, gating.page_html(inputs, result, error, verdict))
    click.echo(output)
    if error is not None:
        raise error
    assert result is not None
    return result.exit_code
