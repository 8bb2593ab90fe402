"""The gate judges every task of the baseline, errors cannot hide losses, small tasks are
"cannot judge", and byte-identical runs never fail: as a user sees it through the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import tomllib

from kveval.formats.records import ItemRecord
from tests.clirun import kveval
from tests.test_cli_verdicts import (
    fingerprint,
    gate_args,
    gsm8k_items,
    header,
    prompt_items,
    runs,  # noqa: F401  (fixture)
    write,
)

ROOT = Path(__file__).resolve().parent.parent


def scored_items(task: str, n: int, wrong: set[int] = frozenset(),
                 errors: set[int] = frozenset()) -> list[ItemRecord]:
    return [ItemRecord(task=task, item_id=f"{task}/{i}", prompt_sha256=f"{task}{i}", request={},
                       status="error" if i in errors else "ok",
                       output=None if i in errors else f"{task} answer {i}",
                       correct=None if i in errors else i not in wrong,
                       error="timeout" if i in errors else None)
            for i in range(n)]


# ---------------------------------------------------------------- 1. every task is judged


def test_candidate_without_a_task_cannot_be_judged(runs, tmp_path, capsys):  # noqa: F811
    only_prompts = write(tmp_path / "c.jsonl", header("c", fingerprint=fingerprint("fp8")),
                         prompt_items(60, set()))
    code, out, err = kveval(capsys, *gate_args({**runs, "c": only_prompts}, "c"))
    assert code == 2 and out == ""
    assert "cannot judge: candidate has no gsm8k; the baseline has 500 items" in err
    assert "Traceback" not in err


def test_noise_run_without_a_task_cannot_be_judged_unless_skipped(runs, tmp_path, capsys):  # noqa: F811
    noise = write(tmp_path / "n.jsonl", header("n"), gsm8k_items(500, set(range(41))))
    args = gate_args(runs, "fp8", "--noise", noise)
    code, _, err = kveval(capsys, *args)
    assert code == 2 and "cannot judge: noise run n has no prompts; the baseline has 60" in err
    code, out, _ = kveval(capsys, *args + ["--skip", "prompts"])
    assert code == 0 and "prompts: skipped (--skip)" in out


def test_skip_of_an_unknown_task_is_a_usage_error(runs, capsys):  # noqa: F811
    code, _, err = kveval(capsys, *gate_args(runs, "fp8", "--skip", "gsm8kk"))
    assert code == 2 and "--skip gsm8kk: the baseline has no such task" in err


def test_a_candidate_cut_short_counts_its_missing_items_as_errors(runs, tmp_path, capsys):  # noqa: F811
    cut = write(tmp_path / "cut.jsonl", header("cut", fingerprint=fingerprint("fp8")),
                gsm8k_items(20, set()) + prompt_items(60, set()))
    code, _, err = kveval(capsys, *gate_args({**runs, "cut": cut}, "cut", "--max-error-rate",
                                             "0.02"))
    assert code == 2
    assert "0 of 560 items are errors and 480 missing (85.7%), above --max-error-rate 0.02" in err


# ---------------------------------------------------------------- 2. errors cannot hide losses


def test_errors_on_the_items_it_would_lose_fail_the_paired_policy(tmp_path, capsys):
    base = write(tmp_path / "a.jsonl", header("a"), scored_items("gsm8k", 500, set()))
    # the candidate's 10 errors are exactly the 10 items it would have got wrong
    cand = write(tmp_path / "b.jsonl", header("b", fingerprint=fingerprint("fp8")),
                 scored_items("gsm8k", 500, errors=set(range(10))))
    args = ["gate", "--baseline", base, "--candidate", cand, "--policy", "paired",
            "--max-error-rate", "0.02"]
    code, out, _ = kveval(capsys, *args)
    assert code == 1, out
    assert ("worst case, counting b's 10 error(s) on items the baseline answered as losses: "
            "10 lost, 0 gained") in out
    assert "a loss beyond a restart's shown at alpha 0.05" in out
    data = json.loads(kveval(capsys, *args + ["--json"])[1])
    worst = data["tasks"][0]["accuracy"]["worst_case"]
    assert (worst["errors"], worst["lost"], data["verdict"]) == (10, 10, "regression")
    assert data["tasks"][0]["outcome"] == "loss_shown"


# ---------------------------------------------------------------- 3. cannot judge, no false verdict


def test_a_task_too_small_for_the_margin_cannot_be_judged(tmp_path, capsys):
    items = scored_items("needle", 40) + scored_items("gsm8k", 500)
    a = write(tmp_path / "a.jsonl", header("a"), items)
    b = write(tmp_path / "b.jsonl", header("b", fingerprint=fingerprint("fp8")), items)
    args = ["gate", "--baseline", a, "--candidate", b, "--policy", "paired"]
    code, out, _ = kveval(capsys, *args)
    assert code == 2 and "REGRESSION" not in out
    assert ("needle: cannot judge: 40 items with 0 (0.0%) of their answers flipping either way "
            "cannot rule out a loss of 3 points: needs about 125 at that rate, or `--margin 8.8`"
            ) in out
    rows = [line.split() for line in out.splitlines() if line.startswith("needle  ")]
    assert rows[0][1] == "paired" and rows[0][-2:] == ["CANNOT", "JUDGE"]
    code, out, _ = kveval(capsys, *args + ["--skip", "needle"])
    assert code == 0 and "gate: PASS" in out and "skipped needle" in out
    code, _, _ = kveval(capsys, *args + ["--margin", "8.8"])
    assert code == 0
    data = json.loads(kveval(capsys, *args + ["--json"])[1])
    assert data["verdict"] == "cannot judge" and data["exit_code"] == 2
    needle = next(t for t in data["tasks"] if t["task"] == "needle")
    assert needle["status"] == "cannot judge" and "needs about 125" in needle["cannot_judge"]


def rollout_sizes() -> dict[str, int]:
    """Items per built-in task at its tasks/rollout.toml size."""
    suite = tomllib.loads((ROOT / "tasks" / "rollout.toml").read_text())
    sizes = {}
    for task in suite["task"]:
        name = task["name"]
        if name == "context":  # forced documents, judged by position, not scored items
            continue
        spec = tomllib.loads((ROOT / "tasks" / f"{name}.toml").read_text())
        params = {**spec.get("params", {}), **{k: v for k, v in task.items() if k != "name"}}
        if name == "gsm8k":
            sizes[name] = params["limit"]
        elif name == "prompts":
            lines = (ROOT / params["data"]).read_text().splitlines()
            sizes[name] = sum(bool(line.strip()) for line in lines)
        else:
            sizes[name] = len(params["lengths"]) * len(params["depths"]) * params["trials"] \
                * len(params.get("copy_lengths", [0]))
    return sizes


def test_byte_identical_runs_never_regress_under_any_policy(tmp_path, capsys):
    sizes = rollout_sizes()
    assert set(sizes) == {"gsm8k", "prompts", "needle", "evidence", "copy", "mrcr"}
    assert sizes["needle"] == 40 and sizes["copy"] == 18
    items = []
    for task, n in sizes.items():
        if task == "prompts":
            items += [ItemRecord(task=task, item_id=f"p{i}", prompt_sha256=f"p{i}", request={},
                                 status="ok", output=f"reply {i}") for i in range(n)]
        else:
            items += scored_items(task, n, wrong=set(range(0, n, 7)))
    a = write(tmp_path / "a.jsonl", header("a"), items)
    copy = tmp_path / "copy.jsonl"
    shutil.copyfile(a, copy)
    for policy in ("overlap", "paired"):
        for extra in ([], ["--noise", str(copy)], ["--noise", a, "--noise", str(copy)]):
            args = ["gate", "--baseline", a, "--candidate", str(copy), "--policy", policy, *extra]
            code, out, err = kveval(capsys, *args)
            assert code in (0, 2), (policy, extra, out, err)
            assert "REGRESSION" not in out


# ---------------------------------------------------------------- 4. the noise floor's spread


def departing(n: int, count: int, seed: int, task: str = "prompts") -> list[ItemRecord]:
    """Answers of one run: `count` items (a different set per seed) depart from the usual
    answer with a text of this run's own, as a restart under other batches does."""
    chosen = {(seed * 37 + 11 * i) % n for i in range(count)}
    return [ItemRecord(task=task, item_id=f"p{i}", prompt_sha256=f"p{i}", request={},
                       status="ok", output=f"reply {i}" + (f" (run {seed})" if i in chosen else ""))
            for i in range(n)]


def test_several_noise_runs_give_the_floor_a_spread(tmp_path, capsys):
    a = write(tmp_path / "a.jsonl", header("a"), departing(300, 12, 0))
    noise = [write(tmp_path / f"n{k}.jsonl", header(f"n{k}"), departing(300, c, k))
             for k, c in ((1, 10), (2, 15), (3, 12))]
    within = write(tmp_path / "w.jsonl", header("w", fingerprint=fingerprint("fp8")),
                   departing(300, 16, 5))
    beyond = write(tmp_path / "x.jsonl", header("x", fingerprint=fingerprint("fp8")),
                   departing(300, 80, 6))
    floor = [arg for path in noise for arg in ("--noise", path)]
    code, out, _ = kveval(capsys, "gate", "--baseline", a, "--candidate", within, *floor)
    assert code == 0, out
    assert "the noise runs n1, n2, n3 changed 22, 27, 24; their spread measured" in out
    assert "more drift than the noise floor not shown" in out
    code, out, _ = kveval(capsys, "gate", "--baseline", a, "--candidate", beyond, *floor)
    assert code == 1 and "more drift than the noise floor shown" in out, out
    data = json.loads(kveval(capsys, "compare", a, beyond, *floor, "--json")[1])
    task = data["tasks"][0]
    assert task["drift_test"]["spread_measured"] and len(task["drift_test"]["pool"]) == 3
    assert task["drift_test"]["shown"] and len(task["between_noise"]) == 3


def test_one_noise_run_says_the_floor_spread_rests_on_two_runs_and_the_prior(runs, capsys):  # noqa: F811
    code, out, _ = kveval(capsys, "compare", runs["bf16a"], runs["fp8"], "--noise", runs["bf16b"])
    assert code == 0
    assert "with one noise run the spread of accuracy and counts between restarts rests on " \
           "two runs and the declared prior" in out
    data = json.loads(kveval(capsys, "compare", runs["bf16a"], runs["fp8"], "--noise",
                             runs["bf16b"], "--json")[1])
    spread = data["tasks"][0]["drift_test"]["spread"]
    assert spread["runs"] == 2 and spread["df"] == 4.0  # the prior's 3 and the pool's own 1
    assert any(w.get("kind") == "spread" for w in data["warnings"])


def test_candidate_repeat_reports_its_own_instability(runs, tmp_path, capsys):  # noqa: F811
    again = write(tmp_path / "fp8r.jsonl", header("fp8r", fingerprint=fingerprint("fp8")),
                  gsm8k_items(500, set(range(6, 53)), changed=set(range(40, 106)))
                  + prompt_items(60, {1, 3}))
    args = gate_args(runs, "fp8", "--noise", runs["bf16b"], "--candidate-repeat", again)
    code, out, _ = kveval(capsys, *args)
    assert code == 0
    assert ("gsm8k: candidate's own instability: fp8r changed 66 of 500 of fp8's answers "
            "(noise floor: 50 of 500)") in out
    data = json.loads(kveval(capsys, "compare", runs["bf16a"], runs["fp8"], "--candidate-repeat",
                             again, "--json")[1])
    assert data["tasks"][0]["instability"][0]["changed"] == 66
    assert data["candidate_repeats"][0]["label"] == "fp8r"


def test_every_noise_run_and_repeat_must_share_the_sampling(runs, tmp_path, capsys):  # noqa: F811
    hot = header("hot", sampling={"temperature": 0.7, "seed": 0, "extra_body": None})
    other = write(tmp_path / "hot.jsonl", hot,
                  gsm8k_items(500, set(range(41))) + prompt_items(60, set()))
    for option in ("--noise", "--candidate-repeat"):
        args = ["compare", runs["bf16a"], runs["fp8"], "--noise", runs["bf16b"], option, other]
        code, _, err = kveval(capsys, *args)
        assert code == 2 and "different sampling parameters: temperature 0.0 vs 0.7" in err
        code, _, err = kveval(capsys, *gate_args(runs, "fp8", "--noise", runs["bf16b"], option,
                                                 other))
        assert code == 2 and "different sampling parameters" in err


def test_a_task_whose_candidate_answers_are_all_errors_is_named(tmp_path, capsys):
    a = write(tmp_path / "a.jsonl", header("a"),
              scored_items("gsm8k", 100) + scored_items("needle", 10))
    b = write(tmp_path / "b.jsonl", header("b", fingerprint=fingerprint("fp8")),
              scored_items("gsm8k", 100) + scored_items("needle", 10, errors=set(range(10))))
    args = ["gate", "--baseline", a, "--candidate", b, "--max-error-rate", "1"]
    code, out, _ = kveval(capsys, *args)
    assert code == 2, out
    assert "needle: cannot judge: no item of needle was answered in both runs" in out
    data = json.loads(kveval(capsys, *args + ["--json"])[1])
    assert [(t["task"], t["status"]) for t in data["tasks"]] == [("gsm8k", "pass"),
                                                                ("needle", "cannot judge")]
    assert kveval(capsys, *args + ["--skip", "needle"])[0] == 0


def test_each_noise_run_and_repeat_is_checked_to_be_a_rerun(runs, capsys):  # noqa: F811
    args = ["compare", runs["bf16a"], runs["fp8"], "--noise", runs["bf16b"], "--noise",
            runs["fp8bad"], "--candidate-repeat", runs["bf16b"]]
    code, out, _ = kveval(capsys, *args)
    assert code == 0
    assert ("warning: the noise run fp8bad differs from bf16a's setup "
            "(metrics.cache_config_info.cache_dtype)") in out
    assert "warning: the candidate repeat bf16b differs from fp8's setup" in out
