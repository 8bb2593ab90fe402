"""The run file on disk: modes, symlinks, a full disk, a file-size limit, an unwritable -o,
temporary files, a killed run; every failure one line, the file valid, `--resume` the way on."""

from __future__ import annotations

import errno
import os
import resource
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clirun import kveval, wait_for_items
from fake_server import Behaviour, FakeServer

from kveval.formats import writer
from kveval.formats.reader import read_run

REPO = Path(__file__).resolve().parents[1]


def prompts(tmp_path: Path, count: int = 6) -> Path:
    path = tmp_path / "prompts.txt"
    path.write_text("".join(f"Prompt number {i}.\n" for i in range(count)))
    return path


def run(capsys: Any, server: FakeServer, tmp_path: Path, out: Path, *extra: str) -> tuple:
    return kveval(capsys, "run", "--endpoint", server.base_url, "--task", "prompts",
                  "--prompts", str(prompts(tmp_path)), "-o", str(out), *extra)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("umask", "expected"), [(0o022, 0o644), (0o077, 0o600)])
def test_a_new_run_file_follows_the_umask(capsys: Any, fake_server: FakeServer, tmp_path: Path,
                                          umask: int, expected: int) -> None:
    old = os.umask(umask)
    try:
        assert run(capsys, fake_server, tmp_path, tmp_path / "r.jsonl")[0] == 0
    finally:
        os.umask(old)
    assert mode(tmp_path / "r.jsonl") == expected


def test_resume_keeps_the_mode_and_writes_through_a_symlink(
        capsys: Any, fake_server: FakeServer, tmp_path: Path) -> None:
    target = tmp_path / "store" / "r.jsonl"
    assert run(capsys, fake_server, tmp_path, target, "--limit", "3")[0] == 0
    target.chmod(0o640)
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    code, _, err = run(capsys, fake_server, tmp_path, link, "--resume")
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert mode(target) == 0o640 and len(read_run(target).items) == 6
    assert sorted(p.name for p in target.parent.iterdir()) == ["r.jsonl"]


def test_a_full_disk_mid_run_leaves_a_valid_file_and_resume_completes_it(
        capsys: Any, fake_server: FakeServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    real_write, calls = os.write, {"n": 0}

    def write(fd: int, data: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 3:  # the third item: half a line, then the disk is full
            real_write(fd, bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    out = tmp_path / "r.jsonl"
    monkeypatch.setattr(writer.os, "write", write)
    code, _, err = run(capsys, fake_server, tmp_path, out, "--concurrency", "1")
    lines = [line for line in err.splitlines() if line.startswith("kveval:")]
    assert code == 2 and len(lines) == 1 and "/kveval/" not in err  # (the server's own
    assert "No space left on device" in lines[0]                     # thread may complain)
    assert "holds 2 item(s)" in lines[0] and "--resume" in lines[0]
    partial = read_run(out)
    assert len(partial.items) == 2 and not partial.truncated_tail
    monkeypatch.setattr(writer.os, "write", real_write)
    code, out_text, err = run(capsys, fake_server, tmp_path, out, "--concurrency", "1",
                              "--resume")
    assert code == 0, err
    assert len(read_run(out).items) == 6 and "4 sent this time" in out_text


def test_a_failed_resume_rewrite_leaves_the_file_and_no_temporary_file(
        capsys: Any, fake_server: FakeServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "r.jsonl"
    assert run(capsys, fake_server, tmp_path, out, "--limit", "3")[0] == 0
    before = out.read_bytes()

    def fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(writer.os, "fsync", fsync)
    code, _, err = run(capsys, fake_server, tmp_path, out, "--resume")
    assert code == 2 and "No space left on device" in err and "nothing on file changed" in err
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prompts.txt", "r.jsonl"]


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (1500, 1500))


def test_a_file_size_limit_is_one_line_and_a_valid_file(
        fake_server: FakeServer, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    argv = [sys.executable, "-m", "kveval.cli", "run", "--endpoint", fake_server.base_url,
            "--task", "prompts", "--prompts", str(prompts(tmp_path, 20)), "-o", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)},
                          preexec_fn=_limit_file_size)
    assert done.returncode == 2, done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("kveval:")]
    assert len(error) == 1 and "File too large" in error[0] and "--resume" in error[0]
    assert "Traceback" not in done.stderr
    on_file = read_run(out)
    assert 0 < len(on_file.items) < 20 and not on_file.truncated_tail
    assert f"holds {len(on_file.items)} item(s)" in error[0]


def test_an_unwritable_output_is_found_before_any_request(
        capsys: Any, fake_server: FakeServer, tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("a file, not a folder")
    code, _, err = run(capsys, fake_server, tmp_path, tmp_path / "plain" / "r.jsonl")
    assert code == 2 and "cannot write here" in err
    assert fake_server.paths == []


@pytest.mark.parametrize("label", ["../../escaped", "a/b/c", "x y", ""])
def test_a_label_is_a_name_not_a_path(capsys: Any, fake_server: FakeServer, tmp_path: Path,
                                      label: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = kveval(capsys, "run", "--endpoint", fake_server.base_url, "--task", "prompts",
                          "--prompts", str(prompts(tmp_path)), "--label", label)
    assert code == 2 and "a label is a name" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prompts.txt"]
    assert fake_server.paths == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_run_killed_mid_way_leaves_a_valid_file_that_resume_completes(
        tmp_path: Path, sig: signal.Signals) -> None:
    out = tmp_path / "r.jsonl"
    argv = [sys.executable, "-m", "kveval.cli", "run", "--task", "prompts", "--prompts",
            str(prompts(tmp_path, 40)), "--concurrency", "2", "-o", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with FakeServer(Behaviour(hold_after=1 + 5)) as held:  # pre-flight, 5 items
        argv[4:4] = ["--endpoint", held.base_url]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        wait_for_items(out, 5)
        proc.send_signal(sig)
        proc.communicate(timeout=30)
        partial = read_run(out)
        assert len(partial.items) == 5 and not partial.truncated_tail
        held.release()
        resumed = subprocess.run(argv + ["--resume"], capture_output=True, text=True, env=env,
                                 timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert len(read_run(out).items) == 40
    assert "35 sent this time" in resumed.stdout
