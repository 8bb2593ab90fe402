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
