"""The gate as one calibrated decision: each example of a shown loss fails, a copy of the
baseline never fails under any policy and option, more noise runs never blind it, and the
baseline is held to its own header."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kveval.formats.records import ItemRecord
from kveval.judge.compare import Side
from kveval.judge.verdict import Family, gate
from tests.clirun import kveval
from tests.test_cli_verdicts import fingerprint, header, write


def answers(task: str, n: int, *, wrong: set[int] = frozenset(), changed: set[int] = frozenset(),
            cut: set[int] = frozenset(), empty: set[int] = frozenset(), tag: str = "",
            lengths: tuple[int, ...] = ()) -> list[ItemRecord]:
    items = []
    for i in range(n):
        text = "" if i in empty else f"{task} answer {i}" + (f" {tag}" if i in changed else "")
        meta: dict[str, Any] = {}
        if lengths:
            meta = {"target_tokens": lengths[i % len(lengths)], "depth": 50}
        items.append(ItemRecord(
            task=task, item_id=f"{task}/{i}", prompt_sha256=f"{task}{i}", request={},
            status="ok", output=text, finish_reason="length" if i in cut else "stop",
            correct=None if task == "prompts" else i not in wrong, meta=meta))
    return items


def side(label: str, items: list[ItemRecord], candidate: bool = False) -> Side:
    extra = {"fingerprint": fingerprint("fp8")} if candidate else {}
    return Side(label, f"{label}.jsonl", tuple(items), header(label, **extra))


# ---------------------------------------------------------------- shown losses fail


def test_a_three_point_loss_on_1319_questions_fails():
    base = side("a", answers("gsm8k", 1319, wrong=set(range(300))))
    lost = set(range(300)) | set(range(1000, 1040))  # 40 more wrong, none gained: 3.0 points
    report = gate(base, side("b", answers("gsm8k", 1319, wrong=lost), True))
    comp = report.accuracy[0]
    assert comp.overlap and report.verdict == "regression"
    assert -0.045 < comp.difference.low < comp.difference.high < -0.02


def test_the_printed_adjustment_names_the_verdict_checks_weight(tmp_path, capsys):
    """45 of 50 right against 35 with 10 cut short: accuracy weighs 6, truncated 3."""
    base = write(tmp_path / "a.jsonl", header("a"), answers("gsm8k", 50, wrong=set(range(5))))
    cand = write(tmp_path / "b.jsonl", header("b", fingerprint=fingerprint("fp8")),
                 answers("gsm8k", 50, wrong=set(range(15)), cut=set(range(40, 50))))
    code, out, _ = kveval(capsys, "gate", "--baseline", base, "--candidate", cand)
    assert code == 1 and "gate: REGRESSION in gsm8k (accuracy, truncated)" in out
    assert "Holm-adjusted over 2 checks, weight 6, p = " in out  # accuracy's line
    assert "Holm-adjusted over 2 checks, weight 3, p = " in out  # truncated's


@pytest.mark.parametrize("noise_runs", [1, 2, 3])
def test_more_noise_runs_never_blind_the_gate(noise_runs):
    """25 of 50 prompt answers changed and 28 of 500 GSM8K answers truncated, where the
    baseline and every noise run change and truncate nothing (spread through the run: no
    bad batch)."""
    def run(label: str, cand: bool = False) -> Side:
        return side(label, answers("gsm8k", 500, wrong=set(range(0, 500, 3)),
                                   cut=set(range(0, 500, 18)) if cand else set())
                    + answers("prompts", 50, changed=set(range(25)) if cand else set(),
                              tag=label), cand)

    report = gate(run("a"), run("c", True), [run(f"n{k}") for k in range(noise_runs)])
    shown = {(c.task, c.kind) for c in report.checks if c.alarmed}
    assert {("prompts", "drift"), ("gsm8k", "truncated")} <= shown
    assert report.verdict == "regression"


def test_empty_answers_are_counted_apart_from_truncated_ones():
    """fp8 answered 20 of 100 questions with nothing against 1, 1 and 1 (spread through the
    run); each run also had 9 answers truncated: counted together nothing would show."""
    def run(label: str, empty: int, offset: int, cand: bool = False) -> Side:
        cut = {(offset + 40 + i) % 100 for i in range(9)}
        return side(label, answers("gsm8k", 100, wrong=set(range(50)), cut=cut,
                                   empty={(offset + 5 * i) % 100 for i in range(empty)}), cand)

    report = gate(run("a", 1, 0), run("fp8", 20, 50, True),
                  [run("b", 1, 10), run("c", 1, 20), run("d", 1, 30)])
    shown = {c.kind for c in report.checks if c.alarmed}
    assert "empty" in shown and "truncated" not in shown


def test_a_needle_lost_at_the_longest_length_fails_the_default_gate():
    lengths = (1024, 4096, 16384, 32768)
    base = answers("needle", 84, lengths=lengths, wrong={i for i in range(84) if i % 4 == 3
                                                         and i < 16})
    lost = {i for i in range(84) if i % 4 == 3 and i < 70}  # 32k: 0.81 -> 0.24
    report = gate(side("a", base), side("b", answers("needle", 84, lengths=lengths, wrong=lost),
                                        True), family=Family(min_recovery=0.8))
    assert report.verdict == "regression"
    failed = report.decisions[0].failed
    assert "length 32k" in failed


# ---------------------------------------------------------------- a copy never fails


@st.composite
def suites(draw: Any) -> tuple[list[ItemRecord], list[list[ItemRecord]]]:
    """A baseline of GSM8K, prompt and needle items and up to three noise runs, each with
    its own wrong, changed, truncated and empty answers."""
    n = draw(st.integers(5, 60))
    runs = []
    for r in range(draw(st.integers(1, 4))):
        picks = [set(draw(st.lists(st.integers(0, n - 1), max_size=n))) for _ in range(4)]
        runs.append(answers("gsm8k", n, wrong=picks[0], cut=picks[1], empty=picks[2])
                    + answers("prompts", n, changed=picks[3], tag=f"r{r}")
                    + answers("needle", n, wrong=picks[0], lengths=(1024, 8192)))
    return runs[0], runs[1:]


@given(suites(), st.sampled_from(["overlap", "paired"]), st.sampled_from([0.01, 0.05, 0.2]),
       st.sampled_from([None, 0.5, 1.0]), st.sampled_from(["flexible", "strict"]))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_copy_of_the_baseline_never_fails_under_any_policy_or_option(
        runs, policy, alpha, min_recovery, metric):
    base, noises = runs
    family = Family(metric=metric, alpha=alpha, min_recovery=min_recovery)
    report = gate(side("a", base), side("copy", base, True),
                  [side(f"n{i}", n) for i, n in enumerate(noises)], policy=policy,
                  family=family)
    assert report.verdict != "regression", [d for d in report.decisions if d.failed]
    assert not any(c.alarmed for c in report.checks)


def test_a_copy_with_truncated_answers_never_fails_against_a_calmer_noise_run(tmp_path, capsys):
    """The baseline truncated 12 of 500 answers, the noise run 2; the candidate is the
    baseline byte for byte: it is one of the pool, never tested against one noise run."""
    a = write(tmp_path / "a.jsonl", header("a"), answers("gsm8k", 500, cut=set(range(12))))
    n = write(tmp_path / "n.jsonl", header("n"), answers("gsm8k", 500, cut={100, 200}))
    copy = tmp_path / "copy.jsonl"
    shutil.copyfile(a, copy)
    code, out, _ = kveval(capsys, "gate", "--baseline", a, "--candidate", str(copy), "--noise", n)
    assert code == 0 and "gate: PASS" in out, out


# ---------------------------------------------------------------- the baseline's own header


def test_a_baseline_cut_short_of_its_header_cannot_judge(tmp_path, capsys):
    def plan(label: str, items: int, **extra: Any) -> Any:
        head = header(label, **extra)
        for task in head.tasks:
            task["items"] = {"gsm8k": items, "prompts": 0}.get(task["name"], 0)
        return head

    cut = write(tmp_path / "a.jsonl", plan("a", 30), answers("gsm8k", 1))
    cand = write(tmp_path / "b.jsonl", plan("b", 30, fingerprint=fingerprint("fp8")),
                 answers("gsm8k", 30, wrong=set(range(20))))
    code, _, err = kveval(capsys, "gate", "--baseline", cut, "--candidate", cand)
    assert code == 2
    assert "0 of 30 items are errors and 29 missing (against its header's plan)" in err


def test_a_teacher_forced_run_owes_only_the_answers_it_could_score(tmp_path, capsys):
    """A baseline's empty answers have no tokens to force: a teacher-forced run without them
    is complete; a plain run without them, or a forced run lacking an answered item, is not."""
    forced = {"baseline": "a", "method": "forced_decoding", "unserved": None}
    base = write(tmp_path / "a.jsonl", header("a"), answers("gsm8k", 20, empty={3, 7}))
    kept = [i for i in answers("gsm8k", 20) if i.item_id not in ("gsm8k/3", "gsm8k/7")]
    tf = write(tmp_path / "tf.jsonl", header("tf", teacher_force=forced), kept)
    plain = write(tmp_path / "plain.jsonl", header("plain"), kept)
    short = write(tmp_path / "short.jsonl", header("short", teacher_force=forced), kept[1:])
    assert kveval(capsys, "gate", "--baseline", base, "--candidate", tf)[0] == 0
    for run, missing in ((plain, 2), (short, 1)):
        code, _, err = kveval(capsys, "gate", "--baseline", base, "--candidate", run)
        assert code == 2 and f"and {missing} missing" in err, err


# ---------------------------------------------------------------- JSON stays JSON


def test_an_infinite_figure_is_written_as_null_not_infinity(tmp_path, capsys):
    lp = {"k": 2, "tokens": ["a"], "logprobs": [-1e308], "top_tokens": [["a", "b"]],
          "top_logprobs": [[-1e308, -1e308]]}
    base = [ItemRecord(task="prompts", item_id=f"p{i}", prompt_sha256=f"p{i}", request={},
                       status="ok", output="a", logprobs=lp) for i in range(3)]
    a = write(tmp_path / "a.jsonl", header("a"), base)
    code, out, err = kveval(capsys, "compare", a, a, "--noise", a, "--json")
    assert code in (0, 2) and "Infinity" not in out and "RuntimeWarning" not in err
    if code == 0:
        json.loads(out)


def test_a_suite_task_carries_its_own_margin(tmp_path: Path, capsys):
    def planned(label: str, margin: float | None, **extra: Any) -> Any:
        head = header(label, **extra)
        for task in head.tasks:
            if task["name"] == "gsm8k" and margin is not None:
                task["params"] = {**task.get("params", {}), "margin": margin}
        return head

    base = answers("gsm8k", 500, wrong=set(range(40)))
    cand = answers("gsm8k", 500, wrong=set(range(6, 52)))
    a = write(tmp_path / "a.jsonl", planned("a", 1.0), base)
    b = write(tmp_path / "b.jsonl", planned("b", 1.0, fingerprint=fingerprint("fp8")), cand)
    code, out, _ = kveval(capsys, "gate", "--baseline", a, "--candidate", b, "--policy", "paired",
                          "--margin", "5", "--json")
    task = json.loads(out)["tasks"][0]
    assert task["margin_points"] == 1.0 and code == 2  # the suite's 1 point wins over 5
