"""`--resume` never deletes an answer and never mixes two setups in one file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from clirun import kveval
from fake_server import Behaviour, FakeServer

from kveval.formats.reader import read_run

METRICS = 'vllm:cache_config_info{block_size="16",cache_dtype="%s"} 1.0\n'


def prompts(tmp_path: Path, count: int, skip: int | None = None) -> Path:
    path = tmp_path / "prompts.txt"
    path.write_text("".join(f"Prompt number {i}.\n" for i in range(count) if i != skip))
    return path


def run(capsys: Any, server: FakeServer, tmp_path: Path, prompt_file: Path,
        *extra: str) -> tuple[int, str, str]:
    return kveval(capsys, "run", "--endpoint", server.base_url, "--task", "prompts",
                  "--prompts", str(prompt_file), "-o", str(tmp_path / "r.jsonl"), *extra)


@pytest.fixture
def server() -> Any:
    props = {"media_marker": "<__media_a1__>", "n_ctx": 4096}
    behaviour = Behaviour(extra_routes={"/metrics": METRICS % "auto", "/props": props})
    with FakeServer(behaviour) as fake:
        yield fake


def test_a_smaller_limit_is_refused_and_the_file_keeps_every_answer(
        capsys: Any, server: FakeServer, tmp_path: Path) -> None:
    file = prompts(tmp_path, 20)
    assert run(capsys, server, tmp_path, file)[0] == 0
    before = (tmp_path / "r.jsonl").read_bytes()
    code, _, err = run(capsys, server, tmp_path, file, "--limit", "10", "--resume")
    assert code == 2
    assert "would drop 10 item(s) on file" in err and "--overwrite" in err
    assert (tmp_path / "r.jsonl").read_bytes() == before


def test_a_prompt_removed_from_its_file_is_refused(
        capsys: Any, server: FakeServer, tmp_path: Path) -> None:
    assert run(capsys, server, tmp_path, prompts(tmp_path, 5))[0] == 0
    code, _, err = run(capsys, server, tmp_path, prompts(tmp_path, 5, skip=2), "--resume")
    assert code == 2 and "cannot resume" in err
    assert len(read_run(tmp_path / "r.jsonl").items) == 5


def test_a_larger_limit_resumes_and_sends_only_the_new_items(
        capsys: Any, server: FakeServer, tmp_path: Path) -> None:
    file = prompts(tmp_path, 6)
    assert run(capsys, server, tmp_path, file, "--limit", "3")[0] == 0
    sent = len(server.requests)
    code, out, _ = run(capsys, server, tmp_path, file, "--limit", "6", "--resume")
    assert code == 0 and "3 sent this time" in out
    assert len(server.requests) - sent == 4  # the pre-flight and three items
    assert len(read_run(tmp_path / "r.jsonl").items) == 6


def test_a_server_restarted_with_another_cache_dtype_is_not_resumed_into_the_file(
        capsys: Any, server: FakeServer, tmp_path: Path) -> None:
    file = prompts(tmp_path, 4)
    assert run(capsys, server, tmp_path, file, "--limit", "2")[0] == 0
    server.behaviour.extra_routes["/metrics"] = METRICS % "fp8"
    code, _, err = run(capsys, server, tmp_path, file, "--resume")
    assert code == 2
    assert "fingerprint.metrics.cache_config_info.cache_dtype ('auto' -> 'fp8')" in err
    run_file = read_run(tmp_path / "r.jsonl")
    assert len(run_file.items) == 2
    assert run_file.header.fingerprint["metrics"]["cache_config_info"]["cache_dtype"] == "auto"


def test_a_plain_restart_changes_only_volatile_fields_and_resumes(
        capsys: Any, server: FakeServer, tmp_path: Path) -> None:
    file = prompts(tmp_path, 4)
    assert run(capsys, server, tmp_path, file, "--limit", "2")[0] == 0
    server.behaviour.extra_routes["/props"] = {"media_marker": "<__media_b2__>", "n_ctx": 4096}
    code, _, err = run(capsys, server, tmp_path, file, "--resume")
    assert code == 0, err
    assert len(read_run(tmp_path / "r.jsonl").items) == 4


def test_another_concurrency_is_refused(capsys: Any, server: FakeServer, tmp_path: Path) -> None:
    file = prompts(tmp_path, 4)
    assert run(capsys, server, tmp_path, file, "--limit", "2", "--concurrency", "4")[0] == 0
    code, _, err = run(capsys, server, tmp_path, file, "--resume", "--concurrency", "8")
    assert code == 2 and "concurrency (4 -> 8)" in err
    assert read_run(tmp_path / "r.jsonl").header.concurrency == 4


def test_another_stated_setup_is_refused(capsys: Any, server: FakeServer, tmp_path: Path) -> None:
    file = prompts(tmp_path, 4)
    assert run(capsys, server, tmp_path, file, "--limit", "2", "--setup", "kv_cache=f16")[0] == 0
    code, _, err = run(capsys, server, tmp_path, file, "--resume", "--setup", "kv_cache=q8_0")
    assert code == 2 and "setup.kv_cache ('f16' -> 'q8_0')" in err


def test_overwrite_replaces_the_file_on_purpose(
        capsys: Any, server: FakeServer, tmp_path: Path) -> None:
    file = prompts(tmp_path, 6)
    assert run(capsys, server, tmp_path, file)[0] == 0
    assert run(capsys, server, tmp_path, file, "--limit", "2", "--overwrite")[0] == 0
    assert len(read_run(tmp_path / "r.jsonl").items) == 2
