"""`kveval ab` end to end against tests/ab_server.py, a scripted server process: the verdict
and the trade, every supervisor fault (one line, exit 2, no process left), an interruption
and its rerun (nothing answered is sent again), changed arguments, --dry-run, secrets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FAKE = f"{sys.executable} {REPO / 'tests' / 'ab_server.py'}"
Q8 = "--cache-type-k q8_0 --cache-type-v q8_0"
PROMPTS = 40  # enough for drift to see 8 changed answers: a suite the gate can judge


def write_suite(tmp_path: Path, prompts: int) -> Path:
    found = tmp_path / "prompts.txt"
    found.write_text("".join(f"Prompt number {i}: say something.\n" for i in range(prompts)))
    path = tmp_path / "suite.toml"
    path.write_text(f'[[task]]\nname = "prompts"\ndata = "{found}"\n')
    return path


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    return write_suite(tmp_path, PROMPTS)


def serve(tmp_path: Path, extra: str = "") -> str:
    return (f"{FAKE} --port {{port}} --pids {tmp_path / 'pids'} --count {tmp_path / 'count'}"
            f" {extra}").strip()


def ab(tmp_path: Path, suite: Path, *args: str, serve_cmd: str | None = None,
       candidate: str = Q8, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(tmp_path, suite, *args, serve_cmd=serve_cmd,
                                  candidate=candidate),
                          capture_output=True, text=True, timeout=timeout, env=environment())


def command(tmp_path: Path, suite: Path, *args: str, serve_cmd: str | None = None,
            candidate: str = Q8) -> list[str]:
    return [sys.executable, "-m", "kveval.cli", "ab", "--serve", serve_cmd or serve(tmp_path),
            "--candidate", candidate, "--noise-runs", "1", "--suite", str(suite),
            "--concurrency", "1", "--stop-grace", "2", "-o", str(tmp_path / "ab"), *args]


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def pids(tmp_path: Path) -> list[int]:
    path = tmp_path / "pids"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def sent(tmp_path: Path) -> list[str]:
    """The answer requests the servers got (each server's one-token probes left out)."""
    path = tmp_path / "count"
    lines = path.read_text().splitlines() if path.exists() else []
    return [line for line in lines if line.split()[1] != "1"]


def last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1]


def test_ab_gives_the_verdict_and_what_the_change_bought(tmp_path: Path, suite: Path) -> None:
    done = ab(tmp_path, suite, "--json")
    assert done.returncode == 0, done.stderr
    gate = json.loads((tmp_path / "ab" / "gate.json").read_text())
    assert gate == json.loads(done.stdout)
    assert gate["verdict"] == "pass"
    ratio = gate["trade"]["ratio"]
    assert ratio["kv_bytes_per_token"]["ratio"] == pytest.approx(0.53, abs=0.01)
    assert ratio["kv_bytes_per_token"]["noise_range"] == [1.0, 1.0]
    assert gate["trade"]["candidate"]["kv_cache_type"] == "q8_0"
    assert gate["trade"]["baseline"]["output_tokens_per_s"] > 0
    assert gate["trade"]["baseline"]["host_load_1m"] >= 0  # what the host was doing
    assert gate["trade"]["baseline"]["cpus"] == os.cpu_count()
    assert gate["trade"]["candidate"]["setup"]["server_args"] == Q8
    assert "Trade: what the change bought" in (tmp_path / "ab" / "report.html").read_text()
    assert len(sent(tmp_path)) == 3 * PROMPTS  # baseline, noise1, candidate
    assert pids(tmp_path) and not any(alive(pid) for pid in pids(tmp_path))


def test_the_candidate_is_sent_like_a_restart(tmp_path: Path, suite: Path) -> None:
    assert ab(tmp_path, suite).returncode == 0
    orders = {label: json.loads((tmp_path / "ab" / f"{label}.jsonl").open().readline())
              for label in ("baseline", "noise1", "candidate")}
    assert orders["baseline"]["order"] == "data"
    assert orders["noise1"]["order"] == orders["candidate"]["order"] == "shuffle"
    assert orders["noise1"]["order_seed"] != orders["candidate"]["order_seed"]


def test_a_suite_too_small_for_any_check_cannot_be_judged(tmp_path: Path) -> None:
    done = ab(tmp_path, write_suite(tmp_path, 4), "--json")
    assert done.returncode == 2, done.stderr
    gate = json.loads((tmp_path / "ab" / "gate.json").read_text())
    assert gate["verdict"] == "cannot judge" and gate["exit_code"] == 2
    assert gate["tasks"][0]["status"] == "not judged"
    assert "could reach its level" in gate["tasks"][0]["not_judged"]
    assert gate["needs"] and gate["needs"][0]["task"] == "prompts"
    text = ab(tmp_path, write_suite(tmp_path, 4))
    assert "gate: CANNOT JUDGE: no check of any task could reach its level" in text.stdout
    assert "noise runs would catch" in text.stdout  # what would make it judgeable


def test_text_and_markdown_show_the_trade_beside_the_verdict(tmp_path: Path,
                                                             suite: Path) -> None:
    text = ab(tmp_path, suite)
    assert text.returncode == 0, text.stderr
    assert ("candidate: KV 0.53x the bytes per token (the baseline and its restarts "
            "1.00-1.00x); 1.88x the tokens in the same memory") in text.stdout
    markdown = ab(tmp_path, suite, "--markdown")
    assert "KV 0\\.53x the bytes per token" in markdown.stdout
    assert "| baseline |" in markdown.stdout


@pytest.mark.parametrize(("fault", "words"), [
    ("exit", "exited before it answered (exit code 1); last log lines: "),
    ("never", "did not answer on port"),
    ("die:3", "died while serving (exit code 134)"),
])
def test_a_server_fault_is_one_line_exit_2_and_no_process_left(
        tmp_path: Path, fault: str, words: str) -> None:
    ready = "3" if fault == "never" else "120"  # the others start however loaded the machine
    done = ab(tmp_path, write_suite(tmp_path, 4), "--ready-timeout", ready,
              serve_cmd=serve(tmp_path, f"--fault {fault}"))
    assert done.returncode == 2
    line = last_line(done.stderr)
    assert line.startswith("kveval: error: server baseline ") and words in line
    assert "Traceback" not in done.stderr
    assert pids(tmp_path) and not any(alive(pid) for pid in pids(tmp_path))


def test_a_server_that_ignores_sigterm_is_killed(tmp_path: Path, suite: Path) -> None:
    done = ab(tmp_path, suite, serve_cmd=serve(tmp_path, "--fault ignore-term"))
    assert done.returncode == 0, done.stderr
    assert len(pids(tmp_path)) == 3 and not any(alive(pid) for pid in pids(tmp_path))


def test_a_port_held_after_the_stop_is_one_line(tmp_path: Path, suite: Path) -> None:
    done = ab(tmp_path, suite, serve_cmd=serve(tmp_path, "--fault hold-port"))
    server, holder = pids(tmp_path)
    try:
        assert done.returncode == 2
        assert "is still taken" in last_line(done.stderr)
        assert "Traceback" not in done.stderr
        assert not alive(server)
    finally:
        os.kill(holder, signal.SIGKILL)


def test_an_interrupted_experiment_resumes_and_sends_nothing_answered_twice(
        tmp_path: Path, suite: Path) -> None:
    half = PROMPTS * 3 // 2  # the baseline and half of noise1: the next request is held
    cmd = command(tmp_path, suite, serve_cmd=serve(tmp_path, f"--hold-at {half}"))
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=environment())
    deadline = time.monotonic() + 120
    while len(sent(tmp_path)) < half:
        assert time.monotonic() < deadline, f"{len(sent(tmp_path))} of {half} requests in 120 s"
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 143
    line = last_line(err)
    assert "interrupted (SIGTERM); the server it started was stopped" in line
    assert "baseline.jsonl finished" in line and "noise1.jsonl" in line
    assert not any(alive(pid) for pid in pids(tmp_path))
    (tmp_path / "count.release").touch()
    done = ab(tmp_path, suite, serve_cmd=serve(tmp_path, f"--hold-at {half}"))
    assert done.returncode == 0, done.stderr
    assert "baseline: finished on file; not started" in done.stderr
    assert 3 * PROMPTS <= len(sent(tmp_path)) <= 3 * PROMPTS + 1  # at most the one in flight


def test_changed_arguments_are_refused_with_the_difference(tmp_path: Path,
                                                           suite: Path) -> None:
    assert ab(tmp_path, suite).returncode == 0
    done = ab(tmp_path, suite, candidate="--cache-type-k q4_0")
    assert done.returncode == 2
    assert "--candidate '--cache-type-k q4_0' (on file: " in last_line(done.stderr)


def test_dry_run_prints_the_plan_and_starts_nothing(tmp_path: Path, suite: Path) -> None:
    done = ab(tmp_path, suite, "--dry-run", "--teacher-force", "off")
    assert done.returncode == 0, done.stderr
    assert "start 1: baseline: " in done.stdout and "start 3: candidate: " in done.stdout
    assert "ab_server.py --port {port} --pids" in done.stdout and Q8 in done.stdout
    assert "noise1.jsonl (--order shuffle): new" in done.stdout
    assert "candidate.jsonl (--order shuffle): new" in done.stdout
    assert "forced" not in done.stdout
    assert not pids(tmp_path) and not (tmp_path / "ab").exists()
    forcing = ab(tmp_path, suite, "--dry-run", "--teacher-force", "on")
    assert forcing.returncode == 0, forcing.stderr
    start = forcing.stdout.split("start 2:")[0]  # the baseline's own server forces too
    assert "baseline-forced.jsonl (--order data, teacher-forcing the baseline's answers)" in start
    assert "forced restarts: to show a forced KL rise of 10% over the floor" in forcing.stdout
    assert "note: --noise-runs 1: fewer than the 3 forced restarts" in forcing.stdout


def test_a_missing_program_or_port_is_one_line(tmp_path: Path, suite: Path) -> None:
    missing = ab(tmp_path, suite, serve_cmd="no-such-server --port {port}")
    assert missing.returncode == 2
    assert "no-such-server: no such program on PATH" in last_line(missing.stderr)
    portless = ab(tmp_path, suite, serve_cmd=f"{FAKE} --port 8000")
    assert portless.returncode == 2 and "{port}" in last_line(portless.stderr)


def test_a_bad_suite_is_one_line_before_any_server_starts(tmp_path: Path, suite: Path) -> None:
    missing = ab(tmp_path, tmp_path / "no-such-suite.toml")
    assert missing.returncode == 2
    assert "no-such-suite.toml: no such file" in last_line(missing.stderr)
    suite.write_text('[[task]]\nname = "no-such-task"\n')
    unknown = ab(tmp_path, suite)
    assert unknown.returncode == 2 and "no-such-task" in last_line(unknown.stderr)
    assert "start" not in missing.stderr + unknown.stderr
    assert not pids(tmp_path) and not (tmp_path / "ab").exists()


def test_secrets_in_the_command_and_environment_are_masked_everywhere(
        tmp_path: Path, suite: Path) -> None:
    secret = "sk-abc123def456ghi789"
    done = ab(tmp_path, suite, "--candidate-env", f"HF_TOKEN={secret}x",
              serve_cmd=serve(tmp_path, f"--api-key {secret}"))
    assert done.returncode == 0, done.stderr
    assert secret not in done.stdout + done.stderr
    for path in (tmp_path / "ab").rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path


def test_speed_measures_a_streaming_load_on_every_server(tmp_path: Path, suite: Path) -> None:
    suite.write_text(suite.read_text() + "\n[speed]\nprompt_tokens = 64\noutput_tokens = 8\n"
                     "requests = 4\nconcurrency = [1, 2]\n")
    done = ab(tmp_path, suite, "--speed", "--json", "--teacher-force", "off")
    assert done.returncode == 0, done.stderr
    speed = json.loads(done.stdout)["trade"]["candidate"]["speed"]
    assert [load["concurrency"] for load in speed] == [1, 2]
    assert all(load["errors"] == 0 and load["output_tokens"] == 8 for load in speed)
    assert all(load["ttft_p50_s"] > 0 and load["output_tokens_per_s"] > 0 for load in speed)
    assert 60 <= speed[0]["prompt_tokens"] <= 68


def test_ab_timeout_bounds_each_attempt_and_a_resend_is_said(tmp_path: Path) -> None:
    done = ab(tmp_path, write_suite(tmp_path, 4), "--timeout", "0.5",
              serve_cmd=serve(tmp_path, "--fault slow-first:1.5"))
    said = [line for line in done.stderr.splitlines() if line.startswith("note: a request")]
    assert said and all("failed (no complete answer within --timeout 0.5 s); sending it again "
                        "(attempt 2 of 4)" in line for line in said)
    assert "request(s) sent again after a failed attempt (no complete answer within " \
           "--timeout 0.5 s: 1)" in done.stderr  # each run's summary counts its own


def test_a_rerun_without_concurrency_keeps_the_experiments_own(tmp_path: Path,
                                                                suite: Path) -> None:
    assert ab(tmp_path, suite).returncode == 0  # made at --concurrency 1
    cmd = command(tmp_path, suite)
    at = cmd.index("--concurrency")
    again = subprocess.run(cmd[:at] + cmd[at + 2:], capture_output=True, text=True,
                           timeout=120, env=environment())
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("finished on file; not started") == 3
