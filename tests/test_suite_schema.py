"""Suites have a schema, and the request on file is the request sent: what the user cannot
set through extra_body, what a typo does, temperature 0 only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from clirun import kveval
from fake_server import FakeServer

from kveval.formats.reader import read_run


def suite(tmp_path: Path, text: str) -> Path:
    (tmp_path / "p.txt").write_text("One.\nTwo.\n")
    path = tmp_path / "suite.toml"
    path.write_text(text.replace("PROMPTS", str(tmp_path / "p.txt")))
    return path


def run_suite(capsys: Any, server: FakeServer, tmp_path: Path, text: str,
              *extra: str) -> tuple[int, str, str]:
    return kveval(capsys, "run", "--endpoint", server.base_url, "--suite",
                  str(suite(tmp_path, text)), "-o", str(tmp_path / "r.jsonl"), *extra)


TASK = '[[task]]\nname = "prompts"\ndata = "PROMPTS"\n'


@pytest.mark.parametrize(("line", "message"), [
    ("max_token = 5", "unknown key `max_token`; did you mean `max_tokens`?"),
    ("lenghts = [1024]", "did you mean `lengths`?"),
    ("limit = -3", "`limit = -3` must be an integer >= 1"),
    ('api = "foo"', "`api = 'foo'` must be one of 'completions', 'chat'"),
    ('max_tokens = "abc"', "`max_tokens = 'abc'` must be an integer >= 1"),
    ("temperature = 0.7", "`temperature = 0.7` must be 0"),
    ("stop = [1, 2]", "must be a string or a list of strings"),
    ('label = "../x"', "must be a name"),
])
def test_a_bad_task_key_is_one_line_and_nothing_is_sent(
        capsys: Any, fake_server: FakeServer, tmp_path: Path, line: str, message: str) -> None:
    code, out, err = run_suite(capsys, fake_server, tmp_path, TASK + line + "\n")
    assert code == 2 and message in err, err
    assert err.count("\n") == 1 and fake_server.paths == []
    assert not (tmp_path / "r.jsonl").exists()


def test_an_unknown_top_level_key_names_the_nearest(
        capsys: Any, fake_server: FakeServer, tmp_path: Path) -> None:
    code, _, err = run_suite(capsys, fake_server, tmp_path, "[setpu]\na = \"b\"\n" + TASK)
    assert code == 2 and "unknown key `setpu`; did you mean `setup`?" in err


def test_one_stop_string_is_one_stop(capsys: Any, fake_server: FakeServer, tmp_path: Path) -> None:
    code, _, err = run_suite(capsys, fake_server, tmp_path, TASK + 'stop = "Question:"\n')
    assert code == 0, err
    assert {tuple(r["stop"]) for r in fake_server.requests} == {("Question:",)}


def test_the_same_task_twice_needs_a_label_each(
        capsys: Any, fake_server: FakeServer, tmp_path: Path) -> None:
    code, _, err = run_suite(capsys, fake_server, tmp_path, TASK + TASK)
    assert code == 2 and "task `prompts` appears twice" in err and "label" in err
    labelled = (TASK + 'label = "short"\nmax_tokens = 5\n' + TASK + 'label = "long"\n')
    code, _, err = run_suite(capsys, fake_server, tmp_path, labelled)
    assert code == 0, err
    items = read_run(tmp_path / "r.jsonl").items
    assert sorted(i.item_id for i in items) == ["long/0000", "long/0001", "short/0000",
                                                "short/0001"]
    assert {i.request["max_tokens"] for i in items if i.task == "short"} == {5}


@pytest.mark.parametrize(("body", "option"), [
    ('{"temperature": 1.0}', "kveval always sends temperature 0"),
    ('{"prompt": "another prompt"}', "the task's data"),
    ('{"max_tokens": 9}', "--max-tokens"),
    ('{"logprobs": true}', "--logprobs"),
    ('{"echo": true}', "--teacher-force"),
    ('{"model": "x"}', "--model"),
])
def test_extra_body_cannot_set_a_key_kveval_owns(
        capsys: Any, fake_server: FakeServer, tmp_path: Path, body: str, option: str) -> None:
    code, _, err = kveval(capsys, "run", "--endpoint", fake_server.base_url, "--task", "gsm8k",
                          "--extra-body", body, "-o", str(tmp_path / "r.jsonl"))
    key = body.split('"')[1]
    assert code == 2 and f"--extra-body cannot set '{key}'" in err and option in err
    assert fake_server.paths == []


def test_a_suite_extra_body_is_checked_and_sent(
        capsys: Any, fake_server: FakeServer, tmp_path: Path) -> None:
    code, _, err = run_suite(capsys, fake_server, tmp_path, "[extra_body]\nseed = 3\n" + TASK)
    assert code == 2 and "extra_body cannot set 'seed'" in err and "--seed" in err
    code, _, err = run_suite(capsys, fake_server, tmp_path, "[extra_body]\ntop_k = 1\n" + TASK)
    assert code == 0, err
    assert all(r["top_k"] == 1 and r["temperature"] == 0 for r in fake_server.requests)
    header = read_run(tmp_path / "r.jsonl").header
    assert header.sampling["extra_body"] == {"top_k": 1}


def test_setup_from_the_suite_and_the_command_line_is_recorded(
        capsys: Any, fake_server: FakeServer, tmp_path: Path) -> None:
    text = '[setup]\nkv_cache = "f16"\nattention = "fa3"\n' + TASK
    code, _, err = run_suite(capsys, fake_server, tmp_path, text, "--setup", "kv_cache=q8_0")
    assert code == 0, err
    assert read_run(tmp_path / "r.jsonl").header.setup == {"kv_cache": "q8_0",
                                                           "attention": "fa3"}


@pytest.mark.parametrize("bad", ["kv_cache", "=q8", "a/b=c", "k="])
def test_a_malformed_setup_pair_is_refused(
        capsys: Any, fake_server: FakeServer, tmp_path: Path, bad: str) -> None:
    code, _, err = kveval(capsys, "run", "--endpoint", fake_server.base_url, "--task", "gsm8k",
                          "--setup", bad, "-o", str(tmp_path / "r.jsonl"))
    assert code == 2 and "expected KEY=VALUE" in err


def test_a_task_may_carry_its_own_gate_margin(capsys: Any, fake_server: FakeServer,
                                              tmp_path: Path) -> None:
    code, _, err = run_suite(capsys, fake_server, tmp_path, TASK + "margin = 1.5\n")
    assert code == 0, err
    task = read_run(tmp_path / "r.jsonl").header.tasks[0]
    assert task["params"]["margin"] == 1.5 and task["items"] == 2
    code, _, err = run_suite(capsys, fake_server, tmp_path, TASK + 'margin = "wide"\n',
                             "--overwrite")
    assert code == 2 and "must be a number of points from 0 to 100" in err
