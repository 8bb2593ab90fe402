"""lm-evaluation-harness sample logs read as runs, and GSM8K prompts built as lm-eval builds them.

The fixtures under tests/fixtures/lmeval come from real lm-eval runs against the fake server
(tests/fixtures/lmeval/make_fixtures.py says how).
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest
from fake_server import Behaviour, FakeServer

from kveval.formats.lmeval import looks_like_lmeval, read_lmeval
from kveval.formats.reader import read_run
from kveval.formats.records import to_json
from tests.clirun import kveval

FIXTURES = Path(__file__).parent / "fixtures" / "lmeval"
V13 = FIXTURES / "0.4.13"
V02 = FIXTURES / "0.4.2"  # one pretty-printed JSON array, no filter field, no prompt_hash


def samples_file(folder: Path) -> Path:
    (path,) = folder.rglob("samples_*.jsonl")
    return path


def raw_lines(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in samples_file(folder).read_text().splitlines()]


def by_filter(folder: Path, name: str) -> dict[int, dict[str, Any]]:
    return {row["doc_id"]: row for row in raw_lines(folder) if row["filter"] == name}


# ---------------------------------------------------------------- the mapping


def test_each_question_becomes_one_item_with_lm_evals_fields() -> None:
    run = read_lmeval(V13 / "completions-a")
    flexible = by_filter(V13 / "completions-a", "flexible-extract")
    strict = by_filter(V13 / "completions-a", "strict-match")
    assert [item.item_id for item in run.items] == [f"gsm8k/test/{i:04d}" for i in range(20)]
    for item in run.items:
        doc = int(item.item_id[-4:])
        assert item.task == "gsm8k"
        assert item.output == flexible[doc]["resps"][0][0]
        assert item.prompt_sha256 == flexible[doc]["prompt_hash"]
        assert item.request["prompt"] == flexible[doc]["arguments"]["gen_args_0"]["arg_0"]
        assert item.correct is (flexible[doc]["exact_match"] == 1.0)
        assert item.correct_strict is (strict[doc]["exact_match"] == 1.0)
        assert item.extracted == flexible[doc]["filtered_resps"][0]
        assert item.reference == flexible[doc]["doc"]["answer"].split("#### ")[-1]
    assert any(i.correct != i.correct_strict for i in run.items)  # the filters differ


def test_the_header_comes_from_the_results_file_without_credentials() -> None:
    run = read_lmeval(V13 / "completions-a")
    raw = (next((V13 / "completions-a").rglob("results_*.json"))).read_text()
    assert "s3cret" in raw  # the log itself holds the password ...
    text = to_json(run.header)
    assert "s3cret" not in text and "kv:" not in text  # ... the header does not
    assert run.header.endpoint.startswith("http://127.0.0.1:")
    assert run.header.model == "fake-model"
    assert run.header.label == "completions-a"  # lm-eval's --output_path
    lm = run.header.fingerprint["lm_eval"]
    assert lm["lm_eval_version"] == "0.4.13" and lm["n-shot"] == {"gsm8k": 5}
    assert lm["task_hashes"]["gsm8k"] and lm["fewshot_seed"] == 1234
    (task,) = run.header.tasks
    assert task["api"] == "completions" and task["stop"] == ["Question:", "</s>", "<|im_end|>"]
    assert task["params"] == {"shots": 5, "fewshot": "lm-eval", "fewshot_seed": 1234}


def test_a_chat_log_carries_its_messages() -> None:
    run = read_lmeval(V13 / "chat")
    assert run.header.tasks[0]["api"] == "chat"
    first = run.items[0].request["messages"]
    assert first[0]["role"] == "user" and first[-1]["content"].endswith("\nAnswer:")
    assert len(first) == 11  # 5 shots as user/assistant turns, then the question


def test_folder_results_file_and_samples_file_name_the_same_run() -> None:
    folder = V13 / "completions-b"
    (results,) = folder.rglob("results_*.json")
    runs = [read_lmeval(p) for p in (folder, results, samples_file(folder))]
    assert runs[0].items == runs[1].items == runs[2].items
    assert runs[0].header == runs[1].header == runs[2].header


def test_two_runs_in_one_folder_are_told_apart_by_date(tmp_path: Path) -> None:
    folder = tmp_path / "out" / "fake-model"
    for log in ("completions-a", "completions-b"):
        for path in (V13 / log / "fake-model").iterdir():
            (folder / path.name).parent.mkdir(parents=True, exist_ok=True)
            (folder / path.name).write_text(path.read_text())
    (a,) = folder.glob("samples_*T21-50-48*.jsonl")
    assert read_lmeval(a).header.label == "out 2026-11-29T21-50-48.252204"
    assert read_lmeval(V13 / "completions-a").header.label == "completions-a"


def test_logs_without_filter_field_in_rank_order_read_the_same(tmp_path: Path) -> None:
    """Before 0.4.7 only the order tells the filter; multi-GPU logs come rank by rank."""
    rows = raw_lines(V13 / "completions-a")
    for row in rows:
        del row["filter"]
    strict, flexible = rows[:20], rows[20:]
    ranks = [[r for r in part if r["doc_id"] % 2 == rank] for rank in (0, 1)
             for part in (strict, flexible)]
    shuffled = [row for rank in (ranks[0] + ranks[1], ranks[2] + ranks[3]) for row in rank]
    out = tmp_path / "samples_gsm8k_2026-01-01T00-00-00.000000.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in shuffled))
    assert read_lmeval(out).items == read_lmeval(V13 / "completions-a").items


def test_the_0_4_2_array_format_reads_as_the_same_questions() -> None:
    (samples,) = V02.rglob("*_gsm8k.jsonl")
    rows = json.loads(samples.read_text())  # strict-match lines, then flexible-extract
    run = read_lmeval(V02 / "chat")
    assert [i.item_id for i in run.items] == [f"gsm8k/test/{i:04d}" for i in range(20)]
    for item in run.items:
        doc = int(item.item_id[-4:])
        strict, flexible = rows[doc], rows[20 + doc]
        assert strict["doc_id"] == flexible["doc_id"] == doc and "filter" not in strict
        assert item.correct is (flexible["exact_match"] == 1.0)
        assert item.correct_strict is (strict["exact_match"] == 1.0)
        assert item.output == flexible["resps"][0][0]
        prompt = flexible["arguments"][0][0]
        assert item.request["messages"] == [{"role": "user", "content": prompt}]
        assert item.prompt_sha256 == hashlib.sha256(prompt.encode()).hexdigest()
    assert "s3cret" in samples.name and "s3cret" in (V02 / "chat" / "results.json").read_text()
    assert "s3cret" not in to_json(run.header)
    assert run.header.endpoint.startswith("http://127.0.0.1:")
    assert run.header.tasks[0]["api"] == "chat"


def test_lm_eval_0_4_2_and_0_4_13_draw_the_same_exemplars() -> None:
    """0.4.2's chat model sent the completion prompt as one user turn: same text, same hash."""
    expected = json.loads((FIXTURES / "prompt_hashes.json").read_text())["prompt_hash"]["5"]
    assert [i.prompt_sha256 for i in read_lmeval(V02 / "chat").items] == expected[:20]


def test_line_separator_characters_inside_answers_stay_data(tmp_path: Path) -> None:
    """lm-eval writes with ensure_ascii=False: U+2028 inside a string is not a line break."""
    rows = raw_lines(V13 / "completions-a")
    for row in rows:
        if row["doc_id"] == 3:
            row["resps"] = [["first\u2028second #### 540"]]
    out = tmp_path / "samples_gsm8k_2026-01-01T00-00-00.000000.jsonl"
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    assert read_lmeval(out).items[3].output == "first\u2028second #### 540"


def test_content_decides_the_format(tmp_path: Path) -> None:
    kveval_run = tmp_path / "run.jsonl"
    kveval_run.write_text('{"label": "doc_id", "type": "run"}\n')
    assert not looks_like_lmeval(kveval_run)
    answers = tmp_path / "answers.json"
    answers.write_text('["18", "3"]')
    array = tmp_path / "old.jsonl"
    array.write_text('[\n  {\n    "doc_id": 0}]')
    assert not looks_like_lmeval(answers) and looks_like_lmeval(array)
    assert looks_like_lmeval(samples_file(V13 / "chat")) and looks_like_lmeval(V13 / "chat")


# ---------------------------------------------------------------- verdicts on lm-eval logs


@pytest.mark.parametrize("log", [V13 / "completions-a", V13 / "completions-b", V13 / "chat",
                                 V02 / "chat"])
def test_score_reproduces_lm_evals_exact_match_for_both_filters(
        capsys: Any, log: Path) -> None:
    code, out, _ = kveval(capsys, "score", str(log), "--json")
    assert code == 0
    (task,) = json.loads(out)["tasks"]
    (results,) = [*log.rglob("results_*.json"), *log.rglob("results.json")]
    theirs = json.loads(results.read_text())["results"]["gsm8k"]
    assert task["flexible"]["accuracy"] == theirs["exact_match,flexible-extract"]
    assert task["strict"]["accuracy"] == theirs["exact_match,strict-match"]


def test_gate_two_lm_eval_logs(capsys: Any) -> None:
    code, out, _ = kveval(capsys, "gate", "--baseline", str(V13 / "completions-a"),
                          "--candidate", str(V13 / "completions-b"), "--json")
    data = json.loads(out)
    assert code == 0 and data["verdict"] == "pass"  # 12/20 -> 14/20: the intervals overlap
    assert data["pairing"]["pairs"] == 20
    code, out, _ = kveval(capsys, "gate", "--baseline", str(V13 / "completions-a"),
                          "--candidate", str(V13 / "completions-b"), "--policy", "paired")
    assert code == 2 and "cannot rule out a loss of 3 points: needs about" in out  # too few


@pytest.mark.parametrize("bad, says", [
    ("missing", "no such"),
    ("empty-folder", "no lm-eval results"),
    ("broken", "line is not JSON"),
    (str(V13), "holds 3 lm-eval runs"),
])
def test_bad_lm_eval_input_is_one_line_and_exit_2(capsys: Any, tmp_path: Path, bad: str,
                                                   says: str) -> None:
    (tmp_path / "empty-folder").mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    text = samples_file(V13 / "completions-a").read_text().splitlines()
    (broken / "samples_gsm8k_2026-01-01T00-00-00.000000.jsonl").write_text(
        "\n".join([text[0], text[1][:50], *text[2:]]))
    code, out, err = kveval(capsys, "score", str(tmp_path / bad))
    assert code == 2 and says in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------- --fewshot lm-eval


def references(gsm8k_dir: Path) -> dict[str, str]:
    rows = [json.loads(x) for x in (gsm8k_dir / "test.jsonl").read_text().splitlines()]
    return {r["question"]: r["answer"].split("####")[-1].strip() for r in rows}


@pytest.fixture
def server(gsm8k_dir: Path) -> Any:
    refs = references(gsm8k_dir)
    rnd = random.Random(7)

    def answer(body: dict[str, Any]) -> str:
        text = body.get("prompt") or body["messages"][-1]["content"]
        question = text.rsplit("Question: ", 1)[-1].rsplit("\nAnswer:", 1)[0]
        return f"#### {refs[question]}" if rnd.random() < 0.7 else "#### 0"

    with FakeServer(Behaviour(answer=answer)) as fake:
        yield fake


def hashes(items: Any) -> list[str]:
    """prompt_sha256 in question order (a run file holds items in answer order)."""
    return [i.prompt_sha256 for i in sorted(items, key=lambda i: i.item_id)]


def run(capsys: Any, server: FakeServer, gsm8k_dir: Path, out: Path, *extra: str) -> int:
    code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "gsm8k",
                          "--data", str(gsm8k_dir), "-o", str(out), "--concurrency", "4",
                          *extra)
    assert code == 0, err
    return code


@pytest.mark.parametrize("shots", [5, 8])
def test_fewshot_lm_eval_sends_lm_evals_prompts(capsys: Any, server: FakeServer,
                                                gsm8k_dir: Path, tmp_path: Path,
                                                shots: int) -> None:
    expected = json.loads((FIXTURES / "prompt_hashes.json").read_text())["prompt_hash"]
    out = tmp_path / "run.jsonl"
    run(capsys, server, gsm8k_dir, out, "--limit", "50", "--fewshot", "lm-eval", "--shots",
        str(shots))
    saved = read_run(out)
    assert hashes(saved.items) == expected[str(shots)]
    sent = {hashlib.sha256(r["prompt"].encode()).hexdigest() for r in server.requests}
    assert set(expected[str(shots)]) <= sent  # the bytes on the wire, not only the record
    assert saved.header.tasks[0]["params"]["fewshot"] == "lm-eval"
    assert saved.header.tasks[0]["params"]["fewshot_seed"] == 1234


def test_fewshot_lm_eval_chat_matches_lm_evals_chat_prompts(
        capsys: Any, server: FakeServer, gsm8k_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "chat.jsonl"
    run(capsys, server, gsm8k_dir, out, "--limit", "20", "--fewshot", "lm-eval", "--shots",
        "5", "--api", "chat")
    theirs = read_lmeval(V13 / "chat")
    assert hashes(read_run(out).items) == hashes(theirs.items)
    code, out_text, err = kveval(capsys, "gate", "--baseline", str(V13 / "chat"),
                                 "--candidate", str(out))
    assert code in (0, 1), err


def test_another_fewshot_seed_draws_other_exemplars(capsys: Any, server: FakeServer,
                                                    gsm8k_dir: Path, tmp_path: Path) -> None:
    run(capsys, server, gsm8k_dir, tmp_path / "a.jsonl", "--limit", "5", "--fewshot", "lm-eval")
    run(capsys, server, gsm8k_dir, tmp_path / "b.jsonl", "--limit", "5", "--fewshot", "lm-eval",
        "--fewshot-seed", "99")
    a, b = read_run(tmp_path / "a.jsonl"), read_run(tmp_path / "b.jsonl")
    assert len(a.items) == len(b.items) == 5
    assert not set(hashes(a.items)) & set(hashes(b.items))
    assert b.header.tasks[0]["params"]["fewshot_seed"] == 99


def test_pairing_a_kveval_run_with_other_exemplars_is_refused_with_the_fix(
        capsys: Any, server: FakeServer, gsm8k_dir: Path, tmp_path: Path) -> None:
    first = tmp_path / "first.jsonl"
    run(capsys, server, gsm8k_dir, first, "--limit", "20")
    lmeval_log = str(V13 / "completions-a")
    for args in (["gate", "--baseline", lmeval_log, "--candidate", str(first)],
                 ["score", str(first), "--baseline", lmeval_log],
                 ["compare", lmeval_log, str(first)]):
        code, _, err = kveval(capsys, *args)
        assert code == 2
        assert "few-shot exemplars differ" in err and "20 of 20 paired gsm8k prompts" in err
        assert "--fewshot lm-eval --shots 5" in err
        assert len(err.strip().splitlines()) == 1
    aligned = tmp_path / "aligned.jsonl"
    run(capsys, server, gsm8k_dir, aligned, "--limit", "20", "--fewshot", "lm-eval",
        "--shots", "5")
    code, out, err = kveval(capsys, "gate", "--baseline", lmeval_log, "--candidate",
                            str(aligned), "--json")
    assert code in (0, 1), err
    assert json.loads(out)["pairing"]["pairs"] == 20
    code, out, err = kveval(capsys, "score", str(aligned), "--baseline", lmeval_log, "--json")
    assert code == 0 and json.loads(out)["pairing"]["pairs"] == 20


@pytest.mark.parametrize("extra, says", [
    (["--fewshot-seed", "5"], "applies only to --fewshot lm-eval"),
    (["--fewshot", "sometimes"], "Invalid value for '--fewshot'"),
    (["--shots", "-1"], "Invalid value for '--shots'"),
])
def test_bad_fewshot_options_exit_2(capsys: Any, server: FakeServer, gsm8k_dir: Path,
                                    tmp_path: Path, extra: list[str], says: str) -> None:
    code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "gsm8k",
                          "--data", str(gsm8k_dir), "-o", str(tmp_path / "x.jsonl"), *extra)
    assert code == 2 and says in err
    assert not (tmp_path / "x.jsonl").exists() and not server.requests


def test_fewshot_suite_key_is_checked(capsys: Any, server: FakeServer, gsm8k_dir: Path,
                                      tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text('[[task]]\nname = "gsm8k"\nfewshot = "lmeval"\n')
    code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--suite", str(suite),
                          "--data", str(gsm8k_dir), "-o", str(tmp_path / "x.jsonl"))
    assert code == 2 and "fewshot" in err and "lm-eval" in err and "lmeval" in err


def test_fewshot_options_need_the_gsm8k_task(capsys: Any, server: FakeServer,
                                             tmp_path: Path) -> None:
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n")
    code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "prompts",
                          "--prompts", str(prompts), "--shots", "3", "-o",
                          str(tmp_path / "x.jsonl"))
    assert code == 2 and "gsm8k task only" in err


def test_the_refusal_names_the_api_too(capsys: Any, server: FakeServer, gsm8k_dir: Path,
                                       tmp_path: Path) -> None:
    out = tmp_path / "completions.jsonl"
    run(capsys, server, gsm8k_dir, out, "--limit", "20", "--fewshot", "lm-eval", "--shots", "5")
    code, _, err = kveval(capsys, "gate", "--baseline", str(V13 / "chat"), "--candidate",
                          str(out))
    assert code == 2 and "--fewshot lm-eval --shots 5 --api chat" in err


def test_same_sampler_on_other_train_data_says_so(capsys: Any, server: FakeServer,
                                                  gsm8k_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "gsm8k"
    data.mkdir()
    (data / "test.jsonl").write_text((gsm8k_dir / "test.jsonl").read_text())
    train = (gsm8k_dir / "train.jsonl").read_text().splitlines()
    (data / "train.jsonl").write_text("\n".join(reversed(train)) + "\n")
    out = tmp_path / "other-train.jsonl"
    run(capsys, server, data, out, "--limit", "20", "--fewshot", "lm-eval", "--shots", "5")
    code, _, err = kveval(capsys, "score", str(out), "--baseline", str(V13 / "completions-a"))
    assert code == 2 and "both use lm-eval's sampler" in err and "--data" in err


def test_a_one_turn_chat_log_cannot_be_aligned_and_says_so(
        capsys: Any, server: FakeServer, gsm8k_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "chat.jsonl"
    run(capsys, server, gsm8k_dir, out, "--limit", "20", "--fewshot", "lm-eval", "--shots", "5",
        "--api", "chat")
    code, _, err = kveval(capsys, "gate", "--baseline", str(V02 / "chat"), "--candidate",
                          str(out))
    assert code == 2 and "as one user message" in err


def test_report_draws_lm_eval_logs_and_names_the_exemplar_fix(
        capsys: Any, server: FakeServer, gsm8k_dir: Path, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    code, _, err = kveval(capsys, "report", "--baseline", str(V13 / "completions-a"),
                          "--candidate", str(V13 / "completions-b"), "-o", str(page))
    assert code == 0, err
    assert "completions-b" in page.read_text()
    first = tmp_path / "first.jsonl"
    run(capsys, server, gsm8k_dir, first, "--limit", "20")
    code, _, err = kveval(capsys, "report", "--baseline", str(V13 / "completions-a"),
                          "--candidate", str(first), "-o", str(page))
    assert code == 2
    assert "--fewshot lm-eval --shots 5" in page.read_text()
