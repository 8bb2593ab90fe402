"""Hostile inputs, before and after: each case of issues 19 and 26 reproduced against a kveval code
tree, and judged by the standard every bad input is held to.

It measures, per case, what a user sees: the exit code, whether stderr is one clear line or
a traceback, whether the command hung (killed at its timeout, with the CPU it had used and
where the kernel had it waiting, so a blocked reader is told apart from a slow one), whether
any form of a secret (the raw key, the URL password, `user:password`, its base64 Basic form)
reached stdout, stderr or a written file, and whether anything on file was lost. The
standard: exit 2 and one line for any failure to read or judge, exit 1 only from a gate that
printed REGRESSION, no traceback, no hang, no secret, no loss.

Each case builds its hostile input in a temporary folder (a run file, an lm-eval log, a named
pipe, a server on 127.0.0.1 at a free port: tests/fake_server.py, tests/hostile_server.py
or a small echo server of its own) and runs `python -m kveval.cli ...` with PYTHONPATH set
to the tree under test, under a timeout (20 s unless the case needs more) and, where the case
needs one, a memory or file-size ulimit. A case killed while busy (not blocked) is run once
more with three times its timeout, so a loaded machine is not mistaken for a hang.

    python bench/hostile/inputs.py --before /work/old-kveval --after .
    python bench/hostile/inputs.py --kveval-path DIR [--kveval-path DIR ...]
    python bench/hostile/inputs.py --after . --only T1,H5

Prints a Markdown table, one row per case and one column per tree (✓ meets the standard,
✗ does not), then how many cases each tree holds and the total run time.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import echoes as e
import files as f
import forcing as tf
import lmeval as lm
import outputs as o
import runs as r
from kit import TIMEOUT_SCALE, Outcome

Run = Callable[[Path, Path], Outcome]


@dataclass(frozen=True)
class Case:
    key: str
    title: str
    run: Run | None
    why_not: str = ""  # a case that cannot be reproduced on this machine, and why


def secrets() -> list[Case]:
    return [
        Case("S1", "URL password: a 400 quoting the `Basic` header (stderr)",
             r.secret_run("echo_key", (2,))),
        Case("S2", "URL password: 5xx quoting the `Basic` header (error items on file)",
             r.secret_run("echo_key_5xx", (1,))),
        Case("S3", "URL password: 5xx quoting the decoded `user:password` (on file)",
             r.secret_run("echo_decoded", (1,))),
        Case("S4", "a server listing the API key as its model id",
             r.secret_run("record", (0,), key=True, models=[r.KEY])),
        Case("S5", "lm-eval `model_args.api_key`: setup diff, `--json`, the page",
             lm.lmeval_secret),
    ]


def tracebacks() -> list[Case]:
    return [
        Case("T1", "run file: 1,000 nested arrays in `meta` (compare, score, gate)",
             f.deep_meta),
        Case("T2", "run file: `request` 200,000 deep (score)", f.deep_request),
        Case("T3", "answer array: 100,000-deep JSON array (compare)", f.deep_answer_array),
        Case("T4", "`run --resume` on a run file with 1,000-deep `meta`", r.resume_deep),
        Case("T5", 'lm-eval results: `"configs": [1, 2]` (gate)',
             lm.lmeval_results(lambda d: d.update(configs=[1, 2]))),
        Case("T6", 'lm-eval results: `"config": [1]` (gate)',
             lm.lmeval_results(lambda d: d.update(config=[1]))),
        Case("T7", "lm-eval results: `filter_list: 5` (gate)",
             lm.lmeval_results(lambda d: d["configs"]["gsm8k"].update(filter_list=5))),
        Case("T8", "lm-eval results: 100,000-deep nesting (gate)", lm.deep_lmeval),
        Case("T9", 'needle `meta.depth` "deep" (score, report)',
             f.needle_score({"depth": "deep"})),
        Case("T10", "needle `meta.depth` [1] (score, report)", f.needle_score({"depth": [1]})),
        Case("T11", "needle `target_tokens` null (score, report)",
             f.needle_score({"target_tokens": None})),
        Case("T12", 'needle `target_tokens` "abc" (score, report)',
             f.needle_score({"target_tokens": "abc"})),
        Case("T13", 'needle `meta.depth` "deep": `gate --html`', f.needle_gate_html),
        Case("T14", "`gate --candidate /dev/zero` under `ulimit -v 3000000`", f.dev_zero),
    ]


def hangs() -> list[Case]:
    return [
        Case("H1", "a named pipe as the run file of `score`", f.fifo_score),
        Case("H2", "a named pipe as `gate --candidate`", f.fifo_gate),
        Case("H3", "`run --prompts FIFO`", r.fifo_prompts),
        Case("H4", "`run -o FIFO --resume`", r.fifo_resume),
        Case("H5", "`compare --show 1` on a 100 MB answer (45 s allowed)", f.long_answer),
        Case("H5+", "variant of H5: 100 MB of short words, under `ulimit -v 4000000`",
             f.long_answer_of_words),
    ]


def verdicts() -> list[Case]:
    lp = f.LP
    return [
        Case("W1", "a teacher-forced copy gated against its own baseline",
             r.teacher_forced_gate),
        Case("W2", "a baseline cut to 1 of its header's 30 items", f.cut_baseline),
        Case("W3", "`--min-recovery 0.9`, needle `target_tokens` not a number",
             f.min_recovery),
        Case("W4", "every log-probability 5.0 (`gate --max-kl`)",
             f.bad_logprobs({"logprobs": [5.0] * 3, "top_logprobs": [[5.0] * 5] * 3})),
        Case("W5", "a top-K whose probabilities sum past 1",
             f.bad_logprobs({"top_logprobs": [[-0.1, -0.2, -0.3, -0.4, -0.5]] * 3})),
        Case("W6", "one token five times in a row's top-K",
             f.bad_logprobs({"top_tokens": [[t] * 5 for t in lp["tokens"]]})),
        Case("W7", "a `top_logprobs` row shorter than its `top_tokens` row",
             f.bad_logprobs({"top_logprobs": [lp["top_logprobs"][0],
                                              lp["top_logprobs"][0][:4],
                                              lp["top_logprobs"][0]]})),
        Case("W8", "lm-eval samples without `resps` (gate)", lm.lmeval_samples(lm.drop_resps)),
        Case("W8+", "variant of W8: `resps` of `[]`, `[[]]` or `[[null]]` (gate)",
             lm.empty_resps),
        Case("W9", "lm-eval: a second line for a doc with another response (gate)",
             lm.lmeval_samples(lm.answer_again)),
    ]


def files_and_signals() -> list[Case]:
    return [
        Case("F1", "two writers: `run -o X`, then `run -o X --resume` while it writes",
             r.two_writers),
        Case("F2", "`run --teacher-force EL.jsonl -o EL.jsonl --overwrite`",
             r.teacher_force_onto_itself),
        Case("F3", "`run --prompts p.txt -o p.txt --overwrite`", r.prompts_onto_itself),
        Case("F3+", "variant of F2/F3: `report -o BASELINE`, `gate --html CANDIDATE`",
             r.page_onto_input),
        Case("F4", "`gate --html page.html` under `ulimit -f 10`", f.page_past_ulimit),
        Case("F5", "Ctrl-C (SIGINT) during `run`", r.interrupted(signal.SIGINT)),
        Case("F6", "SIGTERM during `run`", r.interrupted(signal.SIGTERM)),
    ]


def small_ones() -> list[Case]:
    return [
        Case("M1", "a baseline log-probability of -1e308 (`compare --json`)", f.huge_logprob),
        Case("M2", "the page's first-difference marker on `\\x1b[31mRED`", f.split_marker),
        Case("M3", "`--extra-body '{\"a\": NaN}'`", r.extra_body('{"a": NaN}')),
        Case("M4", "`--extra-body '{\"a\": 1e999}'`", r.extra_body('{"a": 1e999}')),
    ]


def check_secrets() -> list[Case]:
    return [
        Case("K1", "`check`: the API key served as the model id", e.key_as_model),
        Case("K2", "`check`: the key in `/version`", e.key_in_version),
        Case("K3", "`check`: the key URL-encoded and every byte percent-encoded in model ids",
             e.key_url_encoded),
        Case("K4", "`check`: the key split across the chunks of a chunked model list",
             e.key_split_in_chunks),
        Case("K5", "`check`: the `Basic` header of the URL's credentials echoed in `/props`",
             e.basic_in_props),
        Case("K6", "`check`: a `/metrics` label holding the decoded `user:password`",
             e.pair_in_metrics),
        Case("K7", "`KVEVAL_API_KEY` ending in CR LF (`check`, `run`)",
             e.unsendable_key("sk-crlf-secret-4455\r\n")),
        Case("K8", "`KVEVAL_API_KEY` holding a non-ASCII character (`check`, `run`)",
             e.unsendable_key("sk-caf\u00e9-secret-4455")),
        Case("K9", "`http_proxy` set: the proxy receives the key (`check` says so)",
             e.proxy_told),
        Case("K10", "`check` on a 300 MB `/metrics`", e.huge_metrics),
    ]


def encodings() -> list[Case]:
    return [
        Case("E1", "URL password `p@ss w/rd:X9!` echoed form-encoded (run file, compare)",
             e.echoed_encoded(e.form_encoded)),
        Case("E2", "the password echoed percent-encoded in lower-case hex",
             e.echoed_encoded(e.lower_percent)),
        Case("E3", "the password echoed with every byte percent-encoded",
             e.echoed_encoded(e.every_byte)),
        Case("E4", "base64 of the whole `Bearer sk-...` header echoed (run file, compare)",
             e.bearer_base64),
        Case("E5", "lm-eval `model_args.headers.Authorization` (gate, Markdown, page)",
             lm.lmeval_named("Bearer sk-lmeval-hdr-7777",
                             headers={"Authorization": "Bearer sk-lmeval-hdr-7777"})),
        Case("E6", "lm-eval `model_args.key`", lm.lmeval_named("sk-lmeval-key-8888",
                                                               key="sk-lmeval-key-8888")),
        Case("E7", "lm-eval `model_args.passphrase`",
             lm.lmeval_named("horse-battery-9931", passphrase="horse-battery-9931")),
    ]


def teacher_forcing() -> list[Case]:
    return [Case(key, title, run) for key, title, run in tf.CASES]


def outputs() -> list[Case]:
    import stat

    return [
        Case("O1", "`report -o` a character device (a `/dev/full` node)",
             o.onto(o.char_device, stat.S_ISCHR, o.report_to)),
        Case("O2", "`gate --html` a character device", o.onto(o.char_device, stat.S_ISCHR,
                                                             o.gate_html)),
        Case("O3", "`run -o` a character device `--overwrite`",
             o.onto(o.char_device, stat.S_ISCHR, o.run_to)),
        Case("O4", "`report -o` a symlink to a character device",
             o.onto(o.link_to_device, stat.S_ISCHR, o.report_to)),
        Case("O5", "`report -o` a named pipe", o.onto(o.fifo_node, stat.S_ISFIFO, o.report_to)),
        Case("O6", "`gate --html` a socket", o.onto_socket),
        Case("O7", "`run -o` a socket `--overwrite`", o.onto(o.bound_socket, stat.S_ISSOCK,
                                                            o.run_to)),
        Case("L1", "`flock` failing with ENOLCK (`run -o`)", o.failing_lock("ENOLCK")),
        Case("L2", "`flock` failing with EOPNOTSUPP (`run -o`)", o.failing_lock("EOPNOTSUPP")),
    ]


def numbers() -> list[Case]:
    return [
        Case("N1", "`plan` with `--detect`, `--alpha`, `--power`, `--detect-drift`, "
             "`--detect-kl` of nan", o.each_nan(o.PLAN_NANS)),
        Case("N2", "NaN and infinity in gate, compare, score and run options",
             o.each_nan(o.OTHER_NANS)),
        Case("N3", "a pilot whose header names a data folder holding a FIFO `test.jsonl`",
             o.pilot_naming(o.fifo_data)),
        Case("N4", "a pilot whose header names `/dev/zero` as its prompt file",
             o.pilot_naming(lambda folder: "/dev/zero", "prompts", "-v 3000000")),
    ]


def terminals() -> list[Case]:
    return [
        Case("C1", "U+009B (CSI) in labels and answers: `gate`, `gate --json`",
             o.c1_on_stdout(lambda a, b, n: ["gate", "--baseline", a, "--candidate", b,
                                             "--noise", n],
                            lambda a, b, n: ["gate", "--baseline", a, "--candidate", b,
                                             "--noise", n, "--json"])),
        Case("C2", "U+009B in labels and answers: `compare --show 3`, `compare --json`",
             o.c1_on_stdout(lambda a, b, n: ["compare", a, b, "--noise", n, "--show", "3"],
                            lambda a, b, n: ["compare", a, b, "--noise", n, "--json"])),
        Case("C3", "U+009B in labels and answers: `score --json`",
             o.c1_on_stdout(lambda a, b, n: ["score", b, "--baseline", a, "--json"])),
        Case("C4", "a resumed run whose label holds OSC and CSI: the progress bar",
             o.resumed_label),
        Case("C5", "`gate --html` a path with escape sequences: the \"wrote the page\" line",
             o.page_path_escapes),
    ]


def also_seen() -> list[Case]:
    return [
        Case("A1", "`plan P --noise Pb` on a prompts-only pilot", o.prompts_pilot),
        Case("A2", "`plan`'s printed commands for a pilot named `my pilot $(touch owned)`",
             o.quoted_commands),
        Case("A3", "SIGTERM during `report`", o.report_terminated),
        Case("A4", "SIGHUP during `run`", r.interrupted(signal.SIGHUP)),
    ]


GROUPS = {"Secrets": secrets, "Tracebacks": tracebacks, "Hangs": hangs,
          "Wrong verdicts": verdicts, "Files and signals": files_and_signals,
          "Small ones": small_ones, "check's secrets": check_secrets,
          "Encodings": encodings, "Teacher forcing": teacher_forcing, "Outputs": outputs,
          "Numbers": numbers, "Terminals": terminals, "Also seen": also_seen}


def attempt(case: Case, tree: Path) -> Outcome:
    assert case.run is not None
    with tempfile.TemporaryDirectory(prefix=f"hostile-{case.key}-") as tmp:
        try:
            outcome = case.run(tree, Path(tmp))
        except Exception as exc:  # a fault of this script, reported in its cell
            return Outcome(False, f"the case could not run: {exc!r}"[:120])
    return replace(outcome, text=outcome.text.replace(tmp + "/", ""))


def run_case(case: Case, tree: Path) -> Outcome:
    """The case's outcome; a case killed while busy once more with 3x its timeouts."""
    if case.run is None:
        return Outcome(False, f"not reproduced here: {case.why_not}")
    outcome = attempt(case, tree)
    if not outcome.busy_timeout:
        return outcome
    TIMEOUT_SCALE[0] = 3.0
    try:
        again = attempt(case, tree)
    finally:
        TIMEOUT_SCALE[0] = 1.0
    return Outcome(again.ok, f"{again.text} (run again at 3x the timeout)")


def cell(outcome: Outcome) -> str:
    text = ("✓ " if outcome.ok else "✗ ") + outcome.text
    return text.replace("|", "\\|").replace("\n", " ")


def table(rows: list[tuple[str, Case, list[Outcome]]], trees: Sequence[str]) -> str:
    head = ["| # | group | case | " + " | ".join(trees) + " |",
            "| --- | --- | --- | " + " | ".join("---" for _ in trees) + " |"]
    body = [f"| {c.key} | {g} | {c.title.replace('|', chr(92) + '|')} | "
            + " | ".join(cell(o) for o in outs) + " |" for g, c, outs in rows]
    return "\n".join(head + body)


def selected(only: str | None) -> list[tuple[str, Case]]:
    keys = set(only.split(",")) if only else None
    return [(group, case) for group, make in GROUPS.items() for case in make()
            if keys is None or case.key in keys]


def arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="the code tree before the fixes")
    parser.add_argument("--after", type=Path, help="the code tree after the fixes")
    parser.add_argument("--kveval-path", type=Path, action="append", default=[],
                        help="a code tree to run (repeatable), each its own column")
    parser.add_argument("--only", help="case keys, e.g. T1,H5")
    args = parser.parse_args(argv)
    named = [("before", args.before), ("after", args.after),
             *(("tree", t) for t in args.kveval_path)]
    args.trees = [(f"{name} ({tree})", tree.resolve()) for name, tree in named if tree]
    if not args.trees:
        parser.error("give --before and --after, or --kveval-path DIR")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = arguments(argv)
    labels, trees = [name for name, _ in args.trees], [tree for _, tree in args.trees]
    started, spent = time.monotonic(), [0.0] * len(trees)
    rows = []
    for group, case in selected(args.only):
        outcomes = []
        for i, tree in enumerate(trees):
            t0 = time.monotonic()
            outcomes.append(run_case(case, tree))
            spent[i] += time.monotonic() - t0
        print(f"{case.key}: " + " / ".join("ok" if o.ok else "FAILS" for o in outcomes),
              file=sys.stderr, flush=True)
        rows.append((group, case, outcomes))
    print(table(rows, labels))
    held = [sum(outs[i].ok for _, _, outs in rows) for i in range(len(trees))]
    print("\n" + "; ".join(f"{n}: {h} of {len(rows)} cases meet the standard"
                           for n, h in zip(labels, held, strict=True)))
    print(f"total run time {time.monotonic() - started:.0f} s ("
          + ", ".join(f"{n}: {s:.0f} s" for n, s in zip(labels, spent, strict=True)) + ")")


if __name__ == "__main__":
    main()
