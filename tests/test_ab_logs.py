"""A server's log, `DIR/servers/LABEL.log`: the key kveval sends masked even where the server
wraps it over two lines, and written under the regular-file rules of every output (a named
pipe in its place is one line and exit 2, not a hang; a symlink to a device is not written
through)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.test_ab import command, environment, last_line, serve, write_suite

KEY = "sk-split-key-0123456789abcdef"


def run_ab(tmp_path: Path, *args: str, serve_cmd: str | None = None,
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(tmp_path, write_suite(tmp_path, 4), *args,
                                  serve_cmd=serve_cmd),
                          capture_output=True, text=True, timeout=120,
                          env={**environment(), "KVEVAL_API_KEY": KEY})


def test_a_key_the_server_logs_over_two_lines_is_masked_whole(tmp_path: Path) -> None:
    done = run_ab(tmp_path, "--teacher-force", "off",
                  serve_cmd=serve(tmp_path, "--fault log-key"))
    assert done.returncode in (0, 2), done.stderr
    log = (tmp_path / "ab" / "servers" / "baseline.log").read_text()
    assert "request auth: *** (end)" in log
    assert KEY[:len(KEY) // 2] not in log and KEY[len(KEY) // 2:] not in log


@pytest.mark.parametrize(("make", "words"), [
    (lambda p: os.mkfifo(p), "is a named pipe, not a regular file"),
    (lambda p: p.symlink_to("/dev/null"), "is a character device (through a symlink)"),
])
def test_a_log_that_is_no_regular_file_is_one_line(tmp_path: Path, make, words) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ab" / "servers" / "baseline.log"
    log.parent.mkdir(parents=True)
    make(log)
    done = run_ab(tmp_path)
    assert done.returncode == 2, done.stderr
    line = last_line(done.stderr)
    assert line.startswith(f"kveval: error: {log}: ") and words in line, line
    assert "Traceback" not in done.stderr
