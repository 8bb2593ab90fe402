"""Run the kveval command line in-process and collect its exit code, stdout and stderr; wait
for a run started in another process to have written so many items."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kveval.cli.cli import main


def kveval(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    else:  # pragma: no cover
        code = 0
    out, err = capsys.readouterr()
    return code, out, err


def wait_for_items(path: Path, count: int, timeout: float = 120) -> None:
    """Until the run file at `path` holds `count` items (its header aside); an error after
    `timeout` s (a run that never started), never a silent carry-on."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_bytes().splitlines()) > count:
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} never held {count} items within {timeout} s")
