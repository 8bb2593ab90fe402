"""`kveval run` against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fake_server import Behaviour, FakeServer

from kveval.formats.reader import read_run
from tests.clirun import kveval, wait_for_items

REPO = Path(__file__).resolve().parents[1]


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def gsm8k_answer(body: dict[str, Any]) -> str:
    """Right for Janet's ducks (item 0), wrong for everything else."""
    text = body.get("prompt") or body["messages"][-1]["content"]
    last = text.rsplit("Question:", 1)[-1]
    return "She makes $18.\n#### 18" if "Janet" in last else "#### -1"


@pytest.fixture
def server() -> Any:
    with FakeServer(Behaviour(answer=gsm8k_answer)) as fake:
        yield fake


def run_gsm8k(capsys: Any, server: FakeServer, gsm8k_dir: Path, out: Path, *extra: str) -> tuple:
    return kveval(capsys, "run", "--endpoint", server.base_url, "--task", "gsm8k", "--data",
                  str(gsm8k_dir), "-o", str(out), *extra)


def test_gsm8k_sends_eight_shots_with_stop_and_temperature_zero(
        capsys: Any, server: FakeServer, gsm8k_dir: Path, tmp_path: Path) -> None:
    code, out, _ = run_gsm8k(capsys, server, gsm8k_dir, tmp_path / "a.jsonl", "--limit", "3")
    assert code == 0
    completions = [r for r in server.requests if r.get("max_tokens") != 1]
    assert len(completions) == 3
    body = completions[0]
    assert body["temperature"] == 0
    assert body["max_tokens"] == 256
    assert body["stop"] == ["Question:", "</s>", "<|im_end|>"]
    assert body["model"] == "fake-model"
    train = [json.loads(line) for line in (gsm8k_dir / "train.jsonl").open()][:8]
    expected_shots = "".join(f"Question: {t['question']}\nAnswer: {t['answer']}\n\n" for t in train)
    prompts = sorted(r["prompt"] for r in completions)
    assert all(p.startswith(expected_shots) for p in prompts)
    assert all(p.count("Question:") == 9 and p.endswith("\nAnswer:") for p in prompts)
    run = read_run(tmp_path / "a.jsonl")
    assert [i.item_id for i in sorted(run.items, key=lambda i: i.item_id)] == [
        "gsm8k/test/0000", "gsm8k/test/0001", "gsm8k/test/0002"]
    first = run.by_key()[("gsm8k", "gsm8k/test/0000")]
    assert first.correct is True and first.correct_strict is True and first.reference == "18"
    assert "1/3" in out and "gsm8k" in out
    assert run.header.tasks[0]["data_source"] == str(gsm8k_dir.resolve())
    assert run.header.sampling["temperature"] == 0.0


def test_prompts_task_uses_chat_and_has_no_ground_truth(
        capsys: Any, server: FakeServer, tmp_path: Path) -> None:
    prompt_file = tmp_path / "p.txt"
    prompt_file.write_text("First prompt\n\n  \nSecond prompt\n")
    code, out, _ = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "prompts",
                          "--prompts", str(prompt_file), "-o", str(tmp_path / "p.jsonl"))
    assert code == 0
    sent = [r for r in server.requests if r.get("max_tokens") == 200]
    assert sorted(r["messages"][0]["content"] for r in sent) == ["First prompt", "Second prompt"]
    assert all(r["temperature"] == 0 for r in sent)
    items = read_run(tmp_path / "p.jsonl").items
    assert len(items) == 2 and all(i.correct is None for i in items)
    assert "no ground truth" in out


def test_jsonl_prompt_file_with_messages(capsys: Any, server: FakeServer, tmp_path: Path) -> None:
    prompt_file = tmp_path / "p.jsonl"
    prompt_file.write_text(
        json.dumps({"id": "greet", "prompt": "Hello"}) + "\n"
        + json.dumps({"id": "sys", "messages": [{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": "Hi"}]}) + "\n")
    code, _, _ = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "prompts",
                        "--prompts", str(prompt_file), "-o", str(tmp_path / "r.jsonl"))
    assert code == 0
    ids = {i.item_id for i in read_run(tmp_path / "r.jsonl").items}
    assert ids == {"prompts/greet", "prompts/sys"}
    assert any(r["messages"][0] == {"role": "system", "content": "Be brief."}
               for r in server.requests)


def test_resume_after_a_partial_file_sends_only_what_is_missing(
        capsys: Any, server: FakeServer, gsm8k_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    assert run_gsm8k(capsys, server, gsm8k_dir, out, "--limit", "6")[0] == 0
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:3]) + "\n" + lines[3][:40])  # header, 2 items, a torn line
    assert read_run(out).truncated_tail
    server.requests.clear()
    code, _, _ = run_gsm8k(capsys, server, gsm8k_dir, out, "--limit", "6", "--resume")
    assert code == 0
    assert len([r for r in server.requests if r["max_tokens"] != 1]) == 4
    run = read_run(out)
    assert len(run.items) == 6 and not run.truncated_tail
    keys = [json.loads(line)["item_id"] for line in out.read_text().splitlines()[1:]]
    assert len(keys) == len(set(keys)) == 6


def test_failed_items_are_errors_not_wrong_answers_and_resume_retries_them(
        capsys: Any, gsm8k_dir: Path, tmp_path: Path) -> None:
    def broken(body: dict[str, Any]) -> int | None:
        return 500 if body.get("max_tokens") != 1 else None

    out = tmp_path / "r.jsonl"
    behaviour = Behaviour(answer=gsm8k_answer, status_for=broken)
    with FakeServer(behaviour) as flaky:
        code, _, err = run_gsm8k(capsys, flaky, gsm8k_dir, out, "--limit", "4", "--retries", "0")
        assert code == 1
        assert "--resume" in err
        run = read_run(out)
        errors = [i for i in run.items if not i.ok]
        assert len(errors) == 4 and all(i.correct is None for i in errors)
        assert all("HTTP 500" in (i.error or "") for i in errors)
        behaviour.status_for = lambda body: None
        flaky.requests.clear()
        code, _, _ = run_gsm8k(capsys, flaky, gsm8k_dir, out, "--limit", "4", "--resume")
        sent = [r for r in flaky.requests if r["max_tokens"] != 1]
    assert code == 0
    assert len(sent) == 4
    assert all(i.ok for i in read_run(out).items)
    assert len(out.read_text().splitlines()) == 5


def test_resume_refuses_a_different_run(capsys: Any, server: FakeServer, gsm8k_dir: Path,
                                        tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    assert run_gsm8k(capsys, server, gsm8k_dir, out, "--limit", "2")[0] == 0
    before = out.read_text()
    code, _, err = run_gsm8k(capsys, server, gsm8k_dir, out, "--limit", "2", "--resume",
                             "--max-tokens", "64")
    assert code == 2
    assert "cannot resume" in last_line(err)
    assert out.read_text() == before


@pytest.mark.parametrize(("fail_first", "drop_first"), [(2, 0), (0, 2), (1, 1)])
def test_503s_and_dropped_connections_are_retried(
        capsys: Any, gsm8k_dir: Path, tmp_path: Path, fail_first: int, drop_first: int) -> None:
    behaviour = Behaviour(answer=gsm8k_answer, fail_first=fail_first, drop_first=drop_first)
    with FakeServer(behaviour) as flaky:
        code, _, _ = run_gsm8k(capsys, flaky, gsm8k_dir, tmp_path / "r.jsonl", "--limit", "3",
                               "--concurrency", "1")
    assert code == 0
    assert all(i.ok for i in read_run(tmp_path / "r.jsonl").items)


def test_fingerprint_records_vllm_cache_config_and_never_the_api_key(
        capsys: Any, gsm8k_dir: Path, tmp_path: Path, monkeypatch: Any) -> None:
    metrics = (
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        'vllm:cache_config_info{block_size="16",cache_dtype="fp8",num_gpu_blocks="2048",'
        'gpu_memory_utilization="0.9"} 1.0\n'
        "vllm:num_requests_running 0.0\n"
    )
    behaviour = Behaviour(answer=gsm8k_answer, extra_routes={"/metrics": metrics},
                          models=[{"id": "qwen", "max_model_len": 32768}])
    monkeypatch.setenv("KVEVAL_API_KEY", "sk-very-secret-key")
    with FakeServer(behaviour) as vllm:
        url = vllm.base_url.replace("http://", "http://user:pw@")
        code, _, _ = kveval(capsys, "run", "--endpoint", url, "--task", "gsm8k", "--data",
                            str(gsm8k_dir), "--limit", "1", "-o", str(tmp_path / "r.jsonl"))
    assert code == 0
    header = read_run(tmp_path / "r.jsonl").header
    cache = header.fingerprint["metrics"]["cache_config_info"]
    assert cache["cache_dtype"] == "fp8" and cache["num_gpu_blocks"] == "2048"
    assert header.fingerprint["models"][0]["max_model_len"] == 32768
    text = (tmp_path / "r.jsonl").read_text()
    assert "sk-very-secret-key" not in text and "user:pw" not in text


def test_suite_file_and_command_line_overrides(capsys: Any, server: FakeServer,
                                               gsm8k_dir: Path, tmp_path: Path) -> None:
    prompts = tmp_path / "mine.txt"
    prompts.write_text("a\nb\nc\n")
    suite = tmp_path / "suite.toml"
    suite.write_text(f'[[task]]\nname = "gsm8k"\nlimit = 2\ndata = "{gsm8k_dir}"\n\n'
                     '[[task]]\nname = "prompts"\ndata = "mine.txt"\nmax_tokens = 50\n')
    out = tmp_path / "s.jsonl"
    code, _, _ = kveval(capsys, "run", "--endpoint", server.base_url, "--suite", str(suite),
                        "-o", str(out), "--max-tokens", "77")
    assert code == 0
    run = read_run(out)
    assert {t["name"]: t["max_tokens"] for t in run.header.tasks} == {"gsm8k": 77, "prompts": 77}
    assert len([i for i in run.items if i.task == "gsm8k"]) == 2
    assert len([i for i in run.items if i.task == "prompts"]) == 3


def test_shipped_regression_prompts(capsys: Any, server: FakeServer, tmp_path: Path) -> None:
    code, _, _ = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "prompts",
                        "-o", str(tmp_path / "r.jsonl"))
    assert code == 0
    assert 40 <= len(read_run(tmp_path / "r.jsonl").items) <= 50


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


BAD_INPUTS: list[tuple[str, list[str], str]] = [
    ("nothing to run", ["run", "--endpoint", "{url}"], "--task"),
    ("unknown task", ["run", "--endpoint", "{url}", "--task", "nope"], "unknown task"),
    ("unreachable endpoint", ["run", "--endpoint", "http://127.0.0.1:{port}/v1", "--task",
                              "gsm8k", "--data", "{data}"], "cannot reach"),
    ("wrong model", ["run", "--endpoint", "{url}", "--model", "other", "--task", "gsm8k",
                     "--data", "{data}"], "not served"),
    ("bad extra body", ["run", "--endpoint", "{url}", "--task", "gsm8k", "--data", "{data}",
                        "--extra-body", "{{oops"], "--extra-body"),
    ("extra body not an object", ["run", "--endpoint", "{url}", "--task", "gsm8k", "--data",
                                  "{data}", "--extra-body", "[1]"], "JSON object"),
    ("missing data folder", ["run", "--endpoint", "{url}", "--task", "gsm8k", "--data",
                             "{tmp}/nowhere"], "no such folder"),
    ("missing prompt file", ["run", "--endpoint", "{url}", "--task", "prompts", "--prompts",
                             "{tmp}/none.txt"], "no such prompt file"),
    ("resume and overwrite", ["run", "--endpoint", "{url}", "--task", "gsm8k", "--resume",
                              "--overwrite"], "exclude each other"),
    ("missing suite", ["run", "--endpoint", "{url}", "--suite", "{tmp}/none.toml"], "no such file"),
    ("engine flag with endpoint", ["run", "--endpoint", "{url}", "--task", "gsm8k",
                                   "--kv-cache-type", "q8_0"], "embedded engine"),
    ("limit zero", ["run", "--endpoint", "{url}", "--task", "gsm8k", "--limit", "0"], "--limit"),
    ("bad depths", ["run", "--endpoint", "{url}", "--task", "gsm8k", "--depths", "0,150"],
     "--depths"),
]


@pytest.mark.parametrize(("name", "args", "needle"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_2(capsys: Any, server: FakeServer, gsm8k_dir: Path,
                                          tmp_path: Path, name: str, args: list[str],
                                          needle: str) -> None:
    values = {"url": server.base_url, "port": str(free_port()), "data": str(gsm8k_dir),
              "tmp": str(tmp_path)}
    argv = [a.format(**values) for a in args] + ["-o", str(tmp_path / "out.jsonl")]
    started = time.perf_counter()
    code, _, err = kveval(capsys, *argv)
    assert code == 2, err
    assert time.perf_counter() - started < 10
    assert needle in last_line(err)
    assert len([line for line in err.strip().splitlines() if line.strip()]) <= 3
    assert not (tmp_path / "out.jsonl").exists()


def test_existing_output_is_never_touched(capsys: Any, server: FakeServer, gsm8k_dir: Path,
                                          tmp_path: Path) -> None:
    out = tmp_path / "keep.jsonl"
    out.write_text("precious\n")
    code, _, err = run_gsm8k(capsys, server, gsm8k_dir, out, "--limit", "1")
    assert code == 2 and "--overwrite" in last_line(err)
    assert out.read_text() == "precious\n"


def test_several_models_stop_and_list_them(capsys: Any, gsm8k_dir: Path, tmp_path: Path) -> None:
    with FakeServer(Behaviour(models=[{"id": "a"}, {"id": "b"}])) as two:
        code, _, err = run_gsm8k(capsys, two, gsm8k_dir, tmp_path / "r.jsonl", "--limit", "1")
    assert code == 2
    assert "--model" in last_line(err) and "a, b" in last_line(err)


def test_prompt_longer_than_the_server_allows_fails_before_the_run(
        capsys: Any, gsm8k_dir: Path, tmp_path: Path) -> None:
    def too_long(body: dict[str, Any]) -> int | None:
        return 400 if len(body.get("prompt", "")) > 3000 else None

    with FakeServer(Behaviour(status_for=too_long)) as small:
        code, _, err = run_gsm8k(capsys, small, gsm8k_dir, tmp_path / "r.jsonl", "--limit", "5")
        sent = len(small.requests)
    assert code == 2
    assert "longest prompt" in last_line(err) and "HTTP 400" in last_line(err)
    assert sent == 1
    assert not (tmp_path / "r.jsonl").exists()


def test_refused_api_key_is_one_line(capsys: Any, gsm8k_dir: Path, tmp_path: Path) -> None:
    with FakeServer(Behaviour(models_status=401)) as locked:
        code, _, err = run_gsm8k(capsys, locked, gsm8k_dir, tmp_path / "r.jsonl")
    assert code == 2 and "KVEVAL_API_KEY" in last_line(err)


def test_server_listing_no_models_is_one_line(capsys: Any, gsm8k_dir: Path, tmp_path: Path) -> None:
    with FakeServer(Behaviour(models=[])) as empty:
        code, _, err = run_gsm8k(capsys, empty, gsm8k_dir, tmp_path / "r.jsonl")
    assert code == 2 and "no models" in last_line(err)


def test_ctrl_c_leaves_a_valid_file_that_resume_completes(gsm8k_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    with FakeServer(Behaviour(answer=gsm8k_answer, hold_after=1 + 5)) as held:
        argv = [sys.executable, "-m", "kveval.cli", "run", "--endpoint", held.base_url, "--task",
                "gsm8k", "--data", str(gsm8k_dir), "--limit", "40", "--concurrency", "2",
                "-o", str(out)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        wait_for_items(out, 5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert len(read_run(out).items) == 5
        held.release()
        resumed = subprocess.run(argv + ["--resume"], capture_output=True,
                                 env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert len(read_run(out).items) == 40
    assert "35 sent this time" in resumed.stdout.decode()


def test_tasks_lists_every_adapter_with_what_it_measures(capsys: Any) -> None:
    code, out, _ = kveval(capsys, "tasks")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines() if line and not line.startswith(" ")]
    assert names == ["context", "copy", "evidence", "gsm8k", "mrcr", "needle", "needle-multikey",
                     "prompts"]
    assert "8-shot" in out and "api=completions max_tokens=256" in out
