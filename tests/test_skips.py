"""--fail-on-skip (.ci/run): a test that skips for a reason tests/conftest.py does not list
as expected fails the session, naming the test and its reason; without the flag it is named
(-rs) and the session passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def pytest_on(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (folder / "test_one.py").write_text(
        "import pytest\n\ndef test_runs():\n    pass\n\n"
        "def test_skips():\n    pytest.skip('the frobnicator is not installed')\n")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "tests.conftest", "-p",
         "no:cacheprovider", "--rootdir", str(folder), *args, str(folder / "test_one.py")],
        capture_output=True, text=True, cwd=folder, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)})


def test_an_unexpected_skip_fails_the_session_and_is_named(tmp_path: Path) -> None:
    strict = pytest_on(tmp_path, "--fail-on-skip")
    assert strict.returncode == 1, strict.stdout
    assert "test_one.py::test_skips: the frobnicator is not installed" in strict.stdout
    named = pytest_on(tmp_path)
    assert named.returncode == 0, named.stdout
    assert "SKIPPED [1]" in named.stdout and "the frobnicator is not installed" in named.stdout
