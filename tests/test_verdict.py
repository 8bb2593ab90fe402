"""Comparability checks, accuracy per task, and the gate decision, on in-memory runs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kveval.errors import IncomparableError
from kveval.formats.records import ItemRecord, RunHeader
from kveval.judge.compare import Side, pair_sides
from kveval.judge.verdict import (
    DEFAULT_MARGIN,
    Family,
    check_error_rate,
    check_sampling,
    compare_accuracy,
    fingerprint_differences,
    flatten,
    gate,
    inspect_setup,
    score_report,
    score_side,
)

TASKS = [
    {"name": "gsm8k", "adapter": "gsm8k", "api": "completions", "max_tokens": 256, "stop": [],
     "temperature": 0.0, "limit": None, "params": {"shots": 8}},
    {"name": "prompts", "adapter": "prompts", "api": "chat", "max_tokens": 128, "stop": [],
     "temperature": 0.0, "limit": None, "params": {}},
]
FINGERPRINT = {
    "models": [{"id": "qwen3-8b", "created": 1, "max_model_len": 32768}],
    "metrics": {"cache_config_info": {"cache_dtype": "auto", "block_size": "16"}},
}


def header(label: str, **changes: Any) -> RunHeader:
    fields: dict[str, Any] = dict(
        label=label, endpoint="http://127.0.0.1:8000/v1", model="qwen3-8b",
        tasks=copy.deepcopy(TASKS), sampling={"temperature": 0.0, "seed": 0, "extra_body": None},
        concurrency=8, fingerprint=copy.deepcopy(FINGERPRINT), created="2025-06-01T00:00:00Z",
        kveval_version="0.1.0",
    )
    fields.update(changes)
    return RunHeader(**fields)


def fp8_fingerprint() -> dict[str, Any]:
    fingerprint = copy.deepcopy(FINGERPRINT)
    fingerprint["metrics"]["cache_config_info"]["cache_dtype"] = "fp8"
    fingerprint["models"][0]["created"] = 2
    return fingerprint


def gsm8k(i: int, correct: bool, output: str | None = None, status: str = "ok",
          strict: bool | None = None) -> ItemRecord:
    return ItemRecord(
        task="gsm8k", item_id=f"gsm8k/test/{i:04d}", prompt_sha256=f"sha{i}", request={},
        status=status, output=output if output is not None else f"answer {i}",
        correct=correct if status == "ok" else None,
        correct_strict=(correct if strict is None else strict) if status == "ok" else None,
    )


def prompt(i: int, output: str) -> ItemRecord:
    return ItemRecord(task="prompts", item_id=f"p{i}", prompt_sha256=f"p{i}", request={},
                      status="ok", output=output)


def run(label: str, items: list[ItemRecord], **changes: Any) -> Side:
    return Side(label=label, path=f"{label}.jsonl", items=tuple(items),
                header=header(label, **changes))


def accuracy_items(n: int, wrong: set[int], changed: set[int] = frozenset()) -> list[ItemRecord]:
    return [gsm8k(i, i not in wrong, f"answer {i}" + ("'" if i in changed else ""))
            for i in range(n)]


# ---------------------------------------------------------------- setup


def test_flatten_nested_dicts_and_lists_of_dicts_dropping_volatile_keys():
    flat = flatten({"engine": {"kv_cache_type": "q8_0", "n_ctx": 4096},
                    "models": [{"id": "m", "created": 5, "permission": [{"id": "x"}]}],
                    "stop": ["\n\n"]})
    assert flat == {"engine.kv_cache_type": "q8_0", "engine.n_ctx": 4096, "models[0].id": "m",
                    "stop": ["\n\n"]}


def test_fingerprint_differences_show_both_sides():
    diffs = fingerprint_differences({"engine": {"kv_cache_type": "f16", "a": 1}},
                                    {"engine": {"kv_cache_type": "q8_0", "b": [1, 2]}})
    found = {d.key: (d.base, d.other) for d in diffs}
    assert found == {"engine.kv_cache_type": ("f16", "q8_0"), "engine.a": ("1", None),
                     "engine.b": (None, "[1, 2]")}


def test_setup_shows_what_changed():
    setup = inspect_setup(run("bf16a", []), run("fp8", [], fingerprint=fp8_fingerprint()))
    assert [(d.key, d.base, d.other) for d in setup.differences] == [
        ("metrics.cache_config_info.cache_dtype", "auto", "fp8")]
    assert setup.warnings == ()


def test_setup_shows_a_different_model_first():
    setup = inspect_setup(run("a", []), run("b", [], model="other-model"))
    assert setup.differences[0].key == "model"
    assert (setup.differences[0].base, setup.differences[0].other) == ("qwen3-8b", "other-model")


def test_setup_warns_when_nothing_differs():
    setup = inspect_setup(run("a", []), run("b", []))
    assert any("nothing in the server fingerprints differs" in w for w in setup.warnings)


def test_setup_warns_without_fingerprints():
    setup = inspect_setup(run("a", [], fingerprint={}), run("b", [], fingerprint={}))
    assert any("no server fingerprint" in w for w in setup.warnings)


def test_setup_warns_about_different_concurrency():
    setup = inspect_setup(run("a", []), run("b", [], fingerprint=fp8_fingerprint(),
                                             concurrency=64))
    assert any("concurrency 8" in w and "64" in w for w in setup.warnings)


def test_setup_warns_when_the_noise_run_is_not_the_baseline_setup():
    setup = inspect_setup(run("a", []), run("b", [], fingerprint=fp8_fingerprint()),
                          run("n", [], fingerprint=fp8_fingerprint()))
    assert any("noise run n differs" in w for w in setup.warnings)


def test_setup_warns_about_a_truncated_run_file():
    base = run("a", [])
    cut = Side("b", "b.jsonl", (), header("b", fingerprint=fp8_fingerprint()),
               truncated_tail=True)
    assert any("cut short" in w for w in inspect_setup(base, cut).warnings)


@pytest.mark.parametrize(
    "changes",
    [
        {"sampling": {"temperature": 0.7, "seed": 0, "extra_body": None}},
        {"sampling": {"temperature": 0.0, "seed": 1, "extra_body": None}},
        {"tasks": [dict(TASKS[0], max_tokens=512), TASKS[1]]},
        {"tasks": [dict(TASKS[0], stop=["\n\n"]), TASKS[1]]},
        {"tasks": [dict(TASKS[0], api="chat"), TASKS[1]]},
        {"tasks": [TASKS[0], dict(TASKS[1], temperature=0.2)]},
    ],
)
def test_different_sampling_parameters_cannot_be_judged(changes):
    with pytest.raises(IncomparableError, match="different sampling parameters"):
        check_sampling(run("a", []), run("b", [], **changes))


def test_item_set_settings_do_not_matter():
    changed = [dict(TASKS[0], limit=100, params={"shots": 5}), TASKS[1]]
    check_sampling(run("a", []), run("b", [], tasks=changed))
    check_sampling(run("a", []), run("b", [], tasks=[TASKS[0]]))


def test_error_rate_above_the_limit_cannot_be_judged():
    items = [gsm8k(0, True), gsm8k(1, True, status="error")]
    with pytest.raises(IncomparableError, match=r"1 of 2 items are errors \(50.0%\)"):
        check_error_rate(run("a", items), [], 0.0)
    check_error_rate(run("a", items), [], 0.5)


def test_missing_items_count_with_errors_against_the_limit():
    base = run("a", accuracy_items(100, set()))
    cut_short = run("b", accuracy_items(20, set()))
    with pytest.raises(IncomparableError,
                       match=r"b.jsonl: 0 of 100 items are errors and 80 missing \(80.0%\)"):
        gate(base, cut_short, max_error_rate=0.02)
    one_error = run("c", accuracy_items(99, set()) + [gsm8k(99, True, status="error")])
    with pytest.raises(IncomparableError, match=r"1 of 100 items are errors and 1 missing"):
        check_error_rate(base, [run("c", list(one_error.items)[:98] + [one_error.items[-1]])],
                         0.01)
    check_error_rate(base, [one_error], 0.01)


# ---------------------------------------------------------------- accuracy


def test_score_counts_errors_apart_and_both_gsm8k_matches():
    items = [gsm8k(0, True), gsm8k(1, True, strict=False), gsm8k(2, False),
             gsm8k(3, True, status="error"), prompt(0, "hi")]
    scores = {s.task: s for s in score_side(run("a", items))}
    g = scores["gsm8k"]
    assert (g.items, g.errors, g.unscored) == (4, 1, 0)
    assert g.flexible is not None and (g.flexible.correct, g.flexible.n) == (2, 3)
    assert g.strict is not None and (g.strict.correct, g.strict.n) == (1, 3)
    p = scores["prompts"]
    assert (p.flexible, p.strict, p.unscored) == (None, None, 1)


def test_score_interval_is_wilson():
    scores = score_side(run("a", accuracy_items(500, set(range(41)))))
    acc = scores[0].flexible
    assert acc is not None and (acc.correct, acc.n) == (459, 500)
    assert round(100 * acc.interval.low, 1) == 89.1 and round(100 * acc.interval.high, 1) == 93.9


def test_paired_comparison_counts_discordant_pairs():
    base = run("a", accuracy_items(500, set(range(41))))
    cand = run("b", accuracy_items(500, set(range(6, 53))), fingerprint=fp8_fingerprint())
    comps = compare_accuracy(pair_sides(base, cand))
    assert [c.metric for c in comps] == ["flexible", "strict"]
    c = comps[0]
    assert (c.table.lost, c.table.gained) == (12, 6)
    assert (c.baseline.correct, c.candidate.correct) == (459, 453)
    assert c.overlap
    assert c.difference.low < -0.012 < c.difference.high
    assert c.largest_loss == pytest.approx(-c.difference.low)
    assert 0.2 < c.p_value < 0.3


def test_score_report_with_a_baseline_needs_paired_items():
    base = run("a", [gsm8k(0, True)])
    other = run("b", [prompt(0, "x")], fingerprint=fp8_fingerprint())
    with pytest.raises(IncomparableError, match="no paired items"):
        score_report(other, base)


# ---------------------------------------------------------------- policies and the gate


def test_overlap_policy_also_fails_a_loss_the_paired_test_shows():
    """45 of 50 right against 35 (10 lost, 0 gained): the Wilson intervals overlap, the
    accuracy check against the baseline's setup shows the loss, so the gate cannot print
    PASS."""
    base = run("a", accuracy_items(50, set(range(45, 50))))
    cand = run("b", accuracy_items(50, set(range(35, 50))), fingerprint=fp8_fingerprint())
    report = gate(base, cand)
    comp = report.accuracy[0]
    assert comp.overlap and report.verdict == "regression" and report.exit_code == 1
    assert report.decisions[0].failed == ("accuracy",)
    check = report.checks[0]
    assert (check.kind, check.alarmed) == ("accuracy", True)
    # without a noise run the declared prior stands in for a restart's spread: the exact
    # McNemar part alone would say 0.5 ** 10
    assert check.p_value >= 0.5 ** 10 and check.p_value < check.level


def test_paired_policy_words_a_shown_loss_apart_from_a_margin_not_ruled_out():
    base = run("a", accuracy_items(1319, set(range(150))))
    shown = run("b", accuracy_items(1319, set(range(190))), fingerprint=fp8_fingerprint())
    decision = gate(base, shown, policy="paired").decisions[0]
    assert (decision.status, decision.outcome) == ("regression", "loss_shown")
    lost = set(range(150)) | set(range(1000, 1030)) - set(range(1000, 1003))
    near = run("c", accuracy_items(1319, lost - set(range(0, 40, 2)) | set(range(1100, 1120))),
               fingerprint=fp8_fingerprint())
    decision = gate(base, near, policy="paired", margin=1).decisions[0]
    assert decision.status in ("regression", "cannot judge")


def test_gate_passes_a_small_difference_under_overlap():
    base = run("a", accuracy_items(500, set(range(41))))
    cand = run("b", accuracy_items(500, set(range(6, 53))), fingerprint=fp8_fingerprint())
    report = gate(base, cand)
    assert report.verdict == "pass" and report.exit_code == 0
    assert [(d.task, d.rule, d.passed) for d in report.decisions] == [("gsm8k", "overlap", True)]


def test_gate_fails_a_large_loss_under_overlap():
    base = run("a", accuracy_items(500, set(range(41))))
    cand = run("b", accuracy_items(500, set(range(90))), fingerprint=fp8_fingerprint())
    report = gate(base, cand)
    assert report.verdict == "regression" and report.exit_code == 1


def test_gate_paired_policy_uses_the_margin():
    """12 lost and 6 gained of 500: 3.6% of the answers flip, so 1 point needs about 2,826
    items at that rate (cannot judge, exit 2); 5 points pass."""
    base = run("a", accuracy_items(500, set(range(41))))
    cand = run("b", accuracy_items(500, set(range(6, 53))), fingerprint=fp8_fingerprint())
    assert gate(base, cand, policy="paired", margin=5).verdict == "pass"
    tight = gate(base, cand, policy="paired", margin=1)
    assert tight.verdict == "cannot judge" and tight.exit_code == 2
    assert "needs about 2,826 at that rate" in (tight.decisions[0].cannot_judge or "")
    assert gate(base, cand, policy="paired").margin == DEFAULT_MARGIN


def test_gate_strict_metric_judges_correct_strict():
    base_items = [gsm8k(i, True) for i in range(200)]
    cand_items = [gsm8k(i, True, strict=i >= 60) for i in range(200)]
    base, cand = run("a", base_items), run("b", cand_items, fingerprint=fp8_fingerprint())
    assert gate(base, cand).verdict == "pass"
    strict = gate(base, cand, family=Family(metric="strict"))
    assert strict.verdict == "regression"
    assert strict.accuracy[0].metric == "strict"


def test_gate_strict_falls_back_for_tasks_with_one_match():
    items = [ItemRecord(task="needle", item_id=str(i), prompt_sha256=str(i), request={},
                        status="ok", output="x", correct=True) for i in range(50)]
    report = gate(run("a", items), run("b", items, fingerprint=fp8_fingerprint()),
                  family=Family(metric="strict"))
    assert report.verdict == "pass" and report.accuracy[0].metric == "flexible"


def drift_runs(cand_changed: int, noise_changed: int) -> tuple[Side, Side, Side]:
    n = 200
    base = [prompt(i, f"text {i}") for i in range(n)]
    cand = [prompt(i, f"text {i}" + ("!" if i < cand_changed else "")) for i in range(n)]
    noise = [prompt(i, f"text {i}" + ("?" if i >= n - noise_changed else ""))
             for i in range(n)]
    return run("a", base), run("b", cand, fingerprint=fp8_fingerprint()), run("n", noise)


def test_gate_drift_beyond_the_noise_floor_fails_tasks_without_ground_truth():
    base, cand, noise = drift_runs(30, 3)
    report = gate(base, cand, [noise])
    assert [(d.task, d.rule, d.passed) for d in report.decisions] == [("prompts", "drift", False)]
    assert report.exit_code == 1


def test_gate_drift_within_the_noise_floor_passes():
    base, cand, noise = drift_runs(6, 5)
    assert gate(base, cand, [noise]).verdict == "pass"


def test_gate_cannot_judge_when_the_noise_run_lacks_a_task():
    base, cand, _ = drift_runs(30, 0)
    noise = run("n", accuracy_items(10, set()) + [prompt(0, "text 0")])
    noise_without_prompts = run("n", accuracy_items(10, set()))
    assert gate(base, cand, [noise], max_error_rate=1.0).decisions[0].rule == "drift"
    base_both = run("a", list(base.items) + accuracy_items(10, set()))
    cand_both = run("b", list(cand.items) + accuracy_items(10, set()),
                    fingerprint=fp8_fingerprint())
    missing = "cannot judge: noise run n has no prompts; the baseline has 200 items"
    with pytest.raises(IncomparableError, match=missing):
        gate(base_both, cand_both, [noise_without_prompts])
    report = gate(base_both, cand_both, [noise_without_prompts], family=Family(skip=("prompts",)))
    assert [(d.task, d.rule, d.skipped) for d in report.decisions] == [
        ("prompts", None, True), ("gsm8k", "overlap", False)]


def test_gate_with_nothing_to_judge_cannot_judge():
    base, cand, _ = drift_runs(6, 5)
    with pytest.raises(IncomparableError, match="nothing to judge"):
        gate(base, cand)


def test_gate_leaves_tasks_without_ground_truth_unjudged_beside_judged_ones():
    base = run("a", accuracy_items(100, set()) + [prompt(0, "x")])
    cand = run("b", accuracy_items(100, set()) + [prompt(0, "y")], fingerprint=fp8_fingerprint())
    report = gate(base, cand)
    assert [(d.task, d.passed) for d in report.decisions] == [("gsm8k", True), ("prompts", None)]
    assert report.verdict == "pass"


def test_gate_error_rate():
    items = accuracy_items(100, set())
    with_errors = items[:-1] + [gsm8k(99, True, status="error")]
    base, cand = run("a", items), run("b", with_errors, fingerprint=fp8_fingerprint())
    with pytest.raises(IncomparableError, match="max-error-rate"):
        gate(base, cand)
    report = gate(base, cand, max_error_rate=0.05)
    assert report.comparison.pairing.with_errors == 1
    assert report.accuracy[0].table.n == 99
