"""`kveval report` and `gate --html`: the page a reviewer reads, its escaping, its fallbacks,
and its exit codes."""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from kveval.cli.cli import main
from kveval.formats.reader import read_run
from kveval.formats.records import ItemRecord
from kveval.judge.compare import side_from_run
from kveval.judge.verdict import gate as judge
from kveval.show.extras import task_extras
from kveval.show.html import render
from kveval.show.page import Inputs, page_data
from tests.clirun import kveval
from tests.report_fixtures import HOSTILE, extras, header, three_runs, write

HAVE_MPL = "matplotlib" in sys.modules or __import__("importlib").util.find_spec("matplotlib")


def report_args(runs: dict[str, str], page: Path, *extra: str) -> list[str]:
    return ["report", "--baseline", runs["bf16a"], "--candidate", runs["fp8"],
            "--noise", runs["bf16b"], "-o", str(page), *extra]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return three_runs(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def page(runs: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("page") / "report.html"
    with pytest.raises(SystemExit) as exit_info:
        main(report_args(runs, out))
    assert exit_info.value.code == 1  # the candidate loses questions: a regression
    return out.read_text(encoding="utf-8")


def text_of(page: str) -> str:
    """The page as a reader sees it: tags dropped, entities decoded, space folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


# ---------------------------------------------------------------- the page


def test_report_prints_the_path_and_exits_with_the_verdict(runs, tmp_path, capsys):
    out = tmp_path / "sub" / "r.html"
    args = ["report", "--baseline", runs["bf16a"], "--candidate", runs["bf16b"], "-o", str(out),
            "--policy", "paired", "--margin", "30"]
    code, stdout, stderr = kveval(capsys, *args)
    assert code == 0 and stdout.strip().splitlines()[-1] == str(out)
    assert "PASS" in text_of(out.read_text())
    assert "policy paired, margin 30 points" in text_of(out.read_text())


def test_page_has_every_section_in_order(page):
    shown = text_of(page)
    order = ["REGRESSION", "exit 1", "Decision per task", "Setup", "Accuracy", "Drift",
             "Long context", "Changed answers"]
    positions = [shown.index(word) for word in order]
    assert positions == sorted(positions)
    assert ("200 questions show a loss (the check above); 95% CI of the loss 15.0 to 26.1 "
            "points (unadjusted).") in shown
    assert "fp8 changed 27 of 200 answers; the noise run bf16b changed 2" in shown


def test_setup_highlights_what_differs(page):
    row = re.search(r'<tr class="differs"><td class="key">metrics\.cache_config_info\.cache_dtype'
                    r'</td>(.*?)</tr>', page, re.S)
    assert row is not None
    assert re.findall(r'<td class="val">([^<]*)</td>', row.group(1)) == ["auto", "fp8", "auto"]
    assert "5 fingerprint values the same in baseline and candidate" in text_of(page)


def test_page_is_self_contained(page):
    lowered = page.lower()
    assert "<script" not in lowered
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', lowered)
    assert "@import" not in lowered
    assert not re.search(r"url\(\s*[\"']?(https?:)?//", lowered)


@pytest.mark.skipif(not HAVE_MPL, reason="matplotlib (the plot extra) is not installed")
def test_charts_are_inline_svg(page):
    assert page.count("<svg") >= 5  # accuracy, drift, three heatmaps
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page


def test_changed_answers_side_by_side_with_the_first_difference_marked(page):
    gsm8k = page[page.index("gsm8k: 27 of 200 answers changed"):]
    first = gsm8k[gsm8k.index("<details"):gsm8k.index("</details>")]
    assert "<details open>" in first  # the longest change is open, the rest folded
    assert "and <mark>h</mark><span class=\"rest\">alf as many" in first
    assert "and <mark>t</mark><span class=\"rest\">wice as many" in first
    assert "reference: " in text_of(first)
    sizes = [int(r) for r in re.findall(r"(\d+) characters differ", gsm8k.split("<h3>")[0])]
    assert len(sizes) == 27 and sizes == sorted(sizes, reverse=True)  # longest change first


def test_long_context_heatmap_numbers_are_on_the_page(page):
    shown = text_of(page)
    assert "needle: answers by class, fp8" in shown
    assert re.search(r"16k 100\.0 52\.4 -47\.6 10 0", shown)


# ---------------------------------------------------------------- escaping


def test_hostile_strings_show_as_text(tmp_path, capsys):
    runs = three_runs(tmp_path, hostile=True)
    out = tmp_path / "hostile.html"
    code, _, _ = kveval(capsys, *report_args(runs, out))
    page = out.read_text()
    assert code == 1
    assert "<script" not in page.lower() and "<img" not in page.lower()
    shown = text_of(page)
    assert shown.count(HOSTILE) >= 4  # answer, model id, fingerprint, label
    assert html.escape(HOSTILE, quote=False).replace(">", "&gt;") in page


# ---------------------------------------------------------------- sections present only with data


def _data(runs: dict[str, str]) -> dict[str, Any]:
    base, cand, noise = (side_from_run(read_run(runs[k])) for k in ("bf16a", "fp8", "bf16b"))
    result = judge(base, cand, [noise])
    inputs = Inputs(base, cand, (noise,), (), (), "overlap", None)
    return page_data(inputs, result, None, extras=task_extras)


def test_collapse_divergence_and_length_curves_render_from_their_json_keys(runs):
    data = _data(runs)
    assert "Collapse and divergence" not in render(data)
    quiet = {"answers": 100, "truncated": 0, "empty": 0, "length_ratio": 1.0}
    data["gate"]["tasks"][0]["collapse"] = {**quiet, "baseline": quiet}
    assert "Collapse and divergence" not in render(data)  # nothing cut off or empty
    for task in data["gate"]["tasks"]:
        if task["task"] == "needle":
            task.update(extras())
    page = render(data)
    shown = text_of(page)
    assert "Collapse and divergence" in shown and "needle: length curve" in shown
    for figure in ("run items positions KL mean KL p99 top-1 same mean |dlogp| flip margin",
                   "fp8 - 64 values 0.0123 0.41 96.2% 0.031 0.22 -",
                   "run answers truncated empty length_ratio repetition mean_length ngram",
                   "bf16a 100 1 0 1 0.01 315 -", "fp8 100 8 2 1.31 0.05 412 4",
                   "bf16b 100 1 0 1.02 0.01 321 -",
                   "auc_recovery value 0.9, low 0.84, high 0.95", "effective_length 4096"):
        assert figure in shown
    if HAVE_MPL:
        # truncated/empty shares and KL per position; the needle's length curve is drawn
        # either way (the gate's JSON holds kveval's own, replaced here)
        assert page.count("<svg") == render(_data(runs)).count("<svg") + 2


def test_divergence_has_a_row_for_every_noise_run_and_its_sentence(runs):
    data = _data(runs)
    floor = {"kl_mean": 0.001, "items": 50}
    data["gate"]["tasks"][0]["divergence"] = {
        "kl_mean": 0.02, "items": 50, "noise": floor, "summary": "fp8 raised <the> KL",
        "noise_runs": [{"label": "bf16b", **floor}, {"label": "bf16c", "kl_mean": 0.003}],
        "test": {"noise_kl": 0.002, "noise_runs": 2}, "max_kl": 0.01, "passed": False}
    page = render(data)
    shown = text_of(page)
    assert "fp8 50 - 0.02" in shown and "bf16b 50 - 0.001" in shown
    assert "bf16c - - 0.003" in shown and "fp8 raised <the> KL" in shown
    assert "&lt;the&gt;" in page and "test.noise_runs 2" in shown and "passed false" in shown
    assert "noise.kl_mean" not in shown  # the first noise run is its row, not repeated


def test_without_matplotlib_the_page_shows_tables_and_says_how_to_get_charts(runs, monkeypatch):
    data = _data(runs)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    page = render(data)
    assert "<svg" not in page
    assert "pip install &#39;kveval[plot]&#39;" in page
    assert re.search(r"<caption>fp8 minus bf16a: points on paired items</caption>", page)
    assert '<td style="background: #d73027">-67</td>' in page  # the change heatmap as a table
    assert '<td style="background: #1a9850">100</td>' in page  # accuracy: green at 100


# ---------------------------------------------------------------- cannot judge, bad input


def test_cannot_judge_still_writes_the_page(runs, tmp_path, capsys):
    other = header("hot", "fp8")
    other.sampling["temperature"] = 0.7
    hot = write(tmp_path / "hot.jsonl", other, read_run(runs["fp8"]).items)
    out = tmp_path / "r.html"
    code, stdout, stderr = kveval(capsys, "report", "--baseline", runs["bf16a"], "--candidate", hot,
                                   "-o", str(out))
    assert code == 2 and stdout.strip() == str(out)
    assert stderr.startswith("kveval: error: different sampling parameters: temperature")
    assert len(stderr.strip().splitlines()) == 1
    shown = text_of(out.read_text())
    assert "CANNOT JUDGE exit 2" in shown and "different sampling parameters" in shown


def test_unreadable_run_file_gives_a_cannot_judge_page(runs, tmp_path, capsys):
    out = tmp_path / "r.html"
    code, _, stderr = kveval(capsys, "report", "--baseline", runs["bf16a"], "--candidate",
                              str(tmp_path / "missing.jsonl"), "-o", str(out))
    assert code == 2 and "no such run file" in stderr and "Traceback" not in stderr
    assert "CANNOT JUDGE" in out.read_text() and "no such run file" in text_of(out.read_text())


def test_unwritable_output_is_one_line_exit_2(runs, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, stderr = kveval(capsys, *report_args(runs, blocker / "r.html"))
    assert code == 2 and stderr.startswith("kveval: error: ") and "cannot write" in stderr
    assert len(stderr.strip().splitlines()) == 1


def test_margin_needs_the_paired_policy(runs, tmp_path, capsys):
    code, _, stderr = kveval(capsys, *report_args(runs, tmp_path / "r.html", "--margin", "2"))
    assert code == 2 and "--margin applies only to --policy paired" in stderr
    assert not (tmp_path / "r.html").exists()


# ---------------------------------------------------------------- gate --html, step summary


def test_gate_html_writes_the_same_page_beside_the_json(runs, tmp_path, capsys):
    out = tmp_path / "gate.html"
    code, stdout, stderr = kveval(capsys, "gate", "--baseline", runs["bf16a"], "--candidate",
                                   runs["fp8"], "--noise", runs["bf16b"], "--json",
                                   "--html", str(out))
    assert code == 1 and json.loads(stdout)["verdict"] == "regression"
    assert str(out) in stderr
    assert "REGRESSION" in out.read_text() and "Changed answers" in out.read_text()


def test_gate_html_on_cannot_judge(runs, tmp_path, capsys):
    out = tmp_path / "gate.html"
    code, _, _ = kveval(capsys, "gate", "--baseline", runs["bf16a"], "--candidate",
                         str(tmp_path / "nope.jsonl"), "--html", str(out))
    assert code == 2 and "CANNOT JUDGE" in out.read_text()


def test_gate_markdown_appends_to_the_github_step_summary(runs, tmp_path, capsys, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    args = ["gate", "--baseline", runs["bf16a"], "--candidate", runs["fp8"], "--markdown"]
    code, stdout, _ = kveval(capsys, *args)
    assert code == 1
    written = summary.read_text()
    assert written.startswith("# earlier step\n") and stdout in written
    kveval(capsys, *args[:-1])  # without --markdown nothing is appended
    assert summary.read_text() == written


def test_a_late_first_difference_in_a_long_answer_is_still_on_the_page(tmp_path, capsys):
    base_text = "word " * 1200 + "the answer is 41. " + "tail " * 400
    cand_text = "word " * 1200 + "the answer is 42. " + "tail " * 400
    runs = {}
    for label, text in (("bf16a", base_text), ("fp8", cand_text)):
        item = ItemRecord(task="essay", item_id="e1", prompt_sha256="e1", request={},
                          status="ok", output=text, correct=label == "bf16a")
        runs[label] = write(tmp_path / f"{label}.jsonl", header(label, label), [item])
    out = tmp_path / "r.html"
    kveval(capsys, "report", "--baseline", runs["bf16a"], "--candidate", runs["fp8"], "-o",
           str(out))
    page = out.read_text()
    assert "the answer is 4<mark>1</mark>" in page and "the answer is 4<mark>2</mark>" in page
    assert "[5015 characters before ...]" in page


def test_demo_writes_the_page_and_ends_with_its_path(runs, tmp_path, capsys):
    from kveval.cli.demo import PAGE, explain, steps, verdicts

    for step, source in zip(steps("q8_0"), ("bf16a", "bf16b", "fp8"), strict=True):
        (tmp_path / f"{step.label}.jsonl").write_text(Path(runs[source]).read_text())
    code = verdicts(tmp_path, steps("q8_0"), family=())  # runs without log-probabilities
    assert code == 1 and "REGRESSION" in (tmp_path / PAGE).read_text()
    assert f"--html {tmp_path / PAGE}" in capsys.readouterr().err
    told = explain("q8_0", code, tmp_path, 60.0).rstrip("\n")
    assert told.splitlines()[-1] == str(tmp_path / PAGE)


def test_gate_cannot_judge_goes_to_the_step_summary_too(runs, tmp_path, capsys, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, _, _ = kveval(capsys, "gate", "--baseline", runs["bf16a"], "--candidate",
                         str(tmp_path / "no_such.jsonl"), "--markdown")
    assert code == 2
    assert summary.read_text().startswith("### kveval gate: CANNOT JUDGE\n\n")
    assert "no\\_such\\.jsonl: no such run file" in summary.read_text()


def test_every_noise_run_and_candidate_repeat_has_its_drift_row(runs, tmp_path, capsys):
    out = tmp_path / "r.html"
    code, _, _ = kveval(capsys, "report", "--baseline", runs["bf16a"], "--candidate", runs["fp8"],
                         "--noise", runs["bf16b"], "--noise", runs["bf16a"],
                         "--candidate-repeat", runs["fp8"], "-o", str(out))
    shown = text_of(out.read_text())
    assert code == 1
    for row in ("gsm8k fp8 173/200 (86.5%)", "gsm8k bf16b 198/200 (99.0%)",
                "gsm8k fp8 (candidate repeat)"):
        assert row in shown
    # the baseline given as a noise run is the baseline: said so, and counted once
    assert "is a copy of the baseline (the same run): counted once" in shown


def test_report_passes_skip_and_policy_to_the_gate(runs, tmp_path, capsys):
    out = tmp_path / "r.html"
    code, _, _ = kveval(capsys, "report", "--baseline", runs["bf16a"], "--candidate", runs["bf16b"],
                         "--noise", runs["bf16a"], "--skip", "prompts",
                         "--policy", "paired", "--margin", "30", "-o", str(out))
    shown = text_of(out.read_text())
    assert code == 0 and "PASS exit 0 · policy paired, margin 30 points" in shown
    assert "prompts - skipped" in shown and "gsm8k paired pass" in shown


def test_the_needle_grid_gets_its_length_curve_from_kveval_itself(page):
    shown = text_of(page)
    assert "needle: length curve" in shown
    assert re.search(r"auc_recovery value 0\.\d+, low 0\.\d+, high [01]\.\d+", shown)


def test_only_tasks_with_a_strict_match_name_their_metric(page):
    assert "gsm8k flexible" in page and "gsm8k strict" in page
    assert "needle flexible" not in page and "prompts flexible" not in page


def test_length_curves_are_named_by_their_runs(page):
    assert "fp8, all items" in page and "baseline_paired_mean</text>" not in page
