"""The run file while it is written: a second writer is refused, -o never names an input,
Ctrl-C and SIGTERM say what the file holds, a page is never left half-written, and the
request body refuses what JSON cannot carry before anything is sent."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_server import Behaviour, FakeServer

from kveval.formats.reader import read_run
from tests.clirun import kveval, wait_for_items
from tests.report_fixtures import three_runs

PROMPTS = 40


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.txt"
    path.write_text("".join(f"Say {i}.\n" for i in range(PROMPTS)))
    return path


def run_args(url: str, prompts: Path, out: Path, *extra: str) -> list[str]:
    return ["run", "--endpoint", url, "--task", "prompts", "--prompts", str(prompts),
            "-o", str(out), "--concurrency", "1", *extra]


def start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "kveval.cli", *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=Path(__file__).resolve().parents[1])


def test_a_second_writer_is_refused_while_the_first_runs(capsys: Any, tmp_path: Path,
                                                         prompts: Path) -> None:
    out = tmp_path / "r.jsonl"
    with FakeServer(Behaviour(hold_after=1 + 3)) as server:  # pre-flight, 3 items
        first = start(run_args(server.base_url, prompts, out))
        wait_for_items(out, 3)
        for again in ("--resume", "--overwrite"):
            code, _, err = kveval(capsys, *run_args(server.base_url, prompts, out, again))
            assert code == 2 and "another kveval run is writing it" in err, err
            assert err.count("\n") == 1
        server.release()
        _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert len(read_run(out).items) == PROMPTS  # every answer of the first run is on file


def test_a_file_whose_writer_ended_resumes(capsys: Any, tmp_path: Path, prompts: Path) -> None:
    out = tmp_path / "r.jsonl"
    with FakeServer(Behaviour()) as server:
        assert kveval(capsys, *run_args(server.base_url, prompts, out))[0] == 0
        code, out_text, err = kveval(capsys, *run_args(server.base_url, prompts, out,
                                                       "--resume"))
    assert code == 0 and f"{PROMPTS} items (0 sent this time)" in out_text, err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_says_what_its_file_holds(tmp_path: Path, prompts: Path,
                                                     signum: int) -> None:
    out = tmp_path / "r.jsonl"
    with FakeServer(Behaviour(hold_after=1 + 3)) as server:  # pre-flight, 3 items
        proc = start(run_args(server.base_url, prompts, out))
        wait_for_items(out, 3)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    held = len(read_run(out).items)  # the file is valid
    last = err.replace("\r", "\n").strip().splitlines()[-1]
    assert proc.returncode == 128 + signum
    name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    assert last == (f"kveval: interrupted ({name}); {out} is valid and holds {held} item(s); "
                    "`kveval run ... --resume` continues it")
    assert held == 3


def test_output_is_never_an_input(capsys: Any, tmp_path: Path, prompts: Path) -> None:
    kept = prompts.read_text()
    with FakeServer(Behaviour()) as server:
        code, _, err = kveval(capsys, *run_args(server.base_url, prompts, prompts,
                                                "--overwrite"))
        assert code == 2 and "is also an input of this run" in err
        assert prompts.read_text() == kept
        base = tmp_path / "base.jsonl"
        assert kveval(capsys, *run_args(server.base_url, prompts, base))[0] == 0
        kept = base.read_bytes()
        code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--teacher-force",
                              str(base), "-o", str(base), "--overwrite")
    assert code == 2 and "is also an input of this run" in err
    assert base.read_bytes() == kept
    suite = tmp_path / "s.toml"
    suite.write_text('[[task]]\nname = "prompts"\n')
    code, _, err = kveval(capsys, "run", "--endpoint", "http://127.0.0.1:9/v1", "--suite",
                          str(suite), "-o", str(suite), "--overwrite")
    assert code == 2 and "is also an input" in err and suite.read_text().startswith("[[task")


def limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (10 * 1024, 10 * 1024))


def test_a_page_past_ulimit_f_is_never_left_half_written(tmp_path: Path) -> None:
    runs = three_runs(tmp_path)
    page = tmp_path / "page.html"
    proc = subprocess.run(
        [sys.executable, "-m", "kveval.cli", "report", "--baseline", runs["bf16a"],
         "--candidate", runs["fp8"], "-o", str(page)], capture_output=True, text=True,
        preexec_fn=limit_file_size, cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 2 and "cannot write the page (File too large)" in proc.stderr
    assert not page.exists() and list(tmp_path.glob(".page.html.*")) == []
    assert str(page) not in proc.stdout  # report prints the path only once it is written


def test_an_old_page_stays_whole_when_the_new_one_cannot_be_written(tmp_path: Path) -> None:
    runs = three_runs(tmp_path)
    page = tmp_path / "page.html"
    page.write_text("<html>the old page</html>")
    proc = subprocess.run(
        [sys.executable, "-m", "kveval.cli", "gate", "--baseline", runs["bf16a"],
         "--candidate", runs["fp8"], "--html", str(page)], capture_output=True, text=True,
        preexec_fn=limit_file_size, cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 2 and "nothing was written" in proc.stderr
    assert page.read_text() == "<html>the old page</html>"


@pytest.mark.parametrize(("command", "target"), [("report", "bf16a"), ("report", "bf16b"),
                                                   ("gate", "fp8")])
def test_a_page_never_replaces_an_input_of_the_gate(capsys: Any, tmp_path: Path,
                                                    command: str, target: str) -> None:
    runs = three_runs(tmp_path)
    kept = Path(runs[target]).read_bytes()
    page = ("-o", runs[target]) if command == "report" else ("--html", runs[target])
    code, out, err = kveval(capsys, command, "--baseline", runs["bf16a"], "--candidate",
                            runs["fp8"], "--noise", runs["bf16b"], *page)
    assert code == 2 and "is also an input of this gate" in err and err.count("\n") == 1
    assert out == "" and Path(runs[target]).read_bytes() == kept


def test_a_page_never_replaces_a_file_of_an_lmeval_log(capsys: Any, tmp_path: Path) -> None:
    logs = Path(__file__).parent / "fixtures" / "lmeval" / "0.4.13"
    for name in ("completions-a", "completions-b"):
        shutil.copytree(logs / name, tmp_path / name)
    (samples,) = (tmp_path / "completions-b").rglob("samples_*.jsonl")
    kept = samples.read_bytes()
    code, _, err = kveval(capsys, "report", "--baseline", str(tmp_path / "completions-a"),
                          "--candidate", str(tmp_path / "completions-b"), "-o", str(samples))
    assert code == 2 and "is also an input of this gate" in err and samples.read_bytes() == kept
    page = tmp_path / "completions-b" / "page.html"  # beside the log's files is fine
    code, _, err = kveval(capsys, "report", "--baseline", str(tmp_path / "completions-a"),
                          "--candidate", str(tmp_path / "completions-b"), "-o", str(page))
    assert code in (0, 1) and page.read_text().startswith("<!DOCTYPE html>"), err


@pytest.mark.parametrize("body", ['{"a": NaN}', '{"a": 1e999}', '{"a": [1, -Infinity]}'])
def test_extra_body_json_cannot_carry_is_a_usage_error(capsys: Any, tmp_path: Path,
                                                       prompts: Path, body: str) -> None:
    with FakeServer(Behaviour()) as server:
        code, _, err = kveval(capsys, *run_args(server.base_url, prompts,
                                                tmp_path / "r.jsonl", "--extra-body", body))
        assert server.requests == []  # nothing was sent
    assert code == 2 and "--extra-body: a" in err and "which JSON cannot carry" in err
    assert "server" not in err


def test_a_suites_extra_body_nan_is_a_usage_error(capsys: Any, tmp_path: Path,
                                                  prompts: Path) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text(f'[[task]]\nname = "prompts"\ndata = {json.dumps(str(prompts))}\n'
                     "[extra_body]\ntop_p = nan\n")
    code, _, err = kveval(capsys, "run", "--endpoint", "http://127.0.0.1:9/v1", "--suite",
                          str(suite), "-o", str(tmp_path / "r.jsonl"))
    assert code == 2 and "extra_body: top_p is nan" in err


def test_the_lock_leaves_no_file_behind(capsys: Any, tmp_path: Path, prompts: Path) -> None:
    with FakeServer(Behaviour()) as server:
        assert kveval(capsys, *run_args(server.base_url, prompts, tmp_path / "r.jsonl"))[0] == 0
    assert sorted(os.listdir(tmp_path)) == ["prompts.txt", "r.jsonl"]
