from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))

from fake_server import Behaviour, FakeServer  # noqa: E402
from gsm8k_data import write_gsm8k  # noqa: E402

# A shell that starts the tests in the background ignores SIGINT, and an ignored signal stays
# ignored in every process the tests start: the Ctrl-C tests would interrupt nothing. A
# handled one is reset to the default in a child, whose Python then raises KeyboardInterrupt.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    with FakeServer(Behaviour()) as server:
        yield server


@pytest.fixture(scope="session")
def gsm8k_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of GSM8K's splits at their full sizes (tests/gsm8k_data.py)."""
    return write_gsm8k(tmp_path_factory.mktemp("gsm8k"))


# Hypothesis profiles: `ci` (the default, `make test`) keeps the fuzz suite to about two
# minutes and draws the same examples every run; `fuzz` (`make fuzz`) draws many more, new
# ones each run, and keeps failures in .hypothesis/ to replay them.
_SLOW_IS_FINE = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                 HealthCheck.data_too_large]
settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True,
                          database=None, suppress_health_check=_SLOW_IS_FINE)
settings.register_profile("fuzz", max_examples=500, deadline=None,
                          suppress_health_check=_SLOW_IS_FINE)
settings.register_profile("explore", max_examples=150, deadline=None,
                          suppress_health_check=_SLOW_IS_FINE)
settings.load_profile(os.environ.get("KVEVAL_HYPOTHESIS", "ci"))


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (`make test`), each worker and what it starts (the embedded
    engine, llama-server: as many threads as CPUs they may use) runs on cores of its own:
    two engines each spinning a thread on every core slow each other several times."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if not worker.startswith("gw") or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    if 0 < count <= len(cpus):
        os.sched_setaffinity(0, set(cpus[int(worker[2:]) % count::count]))


# The reasons a test may skip under --fail-on-skip (.ci/run): none. A test that skips says why
# (`make test` lists them, -rs); any other reason fails the session.
EXPECTED_SKIPS: tuple[str, ...] = ()
_SKIPPED: list[str] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fail-on-skip", action="store_true",
                     help="fail the session on a skip whose reason is not in EXPECTED_SKIPS")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Every skip, as the session that reports it sees it (under pytest-xdist, the
    controller sees every worker's)."""
    if report.skipped and isinstance(report.longrepr, tuple) and not hasattr(report, "wasxfail"):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        if not any(reason.startswith(known) for known in EXPECTED_SKIPS):
            _SKIPPED.append(f"{report.nodeid}: {reason}")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    worker = hasattr(session.config, "workerinput")  # a pytest-xdist worker: its controller says
    if worker or not session.config.getoption("--fail-on-skip") or not _SKIPPED:
        return
    print(f"\n{len(_SKIPPED)} unexpected skip(s) (--fail-on-skip; tests/conftest.py "
          "EXPECTED_SKIPS lists the expected reasons):", *_SKIPPED, sep="\n  ")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
