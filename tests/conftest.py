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

# the full GSM8K (train.jsonl, test.jsonl): KVEVAL_GSM8K_DATA (`make test` passes GSM8K_DATA),
# else ../shared/data/gsm8k beside the checkout; tests that need it skip without it
GSM8K_DIR = Path(os.environ.get("KVEVAL_GSM8K_DATA")
                 or Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k")

# A shell that starts the tests in the background ignores SIGINT, and an ignored signal stays
# ignored in every process the tests start: the Ctrl-C tests would interrupt nothing. A
# handled one is reset to the default in a child, whose Python then raises KeyboardInterrupt.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    with FakeServer(Behaviour()) as server:
        yield server


@pytest.fixture
def gsm8k_dir() -> Path:
    if not (GSM8K_DIR / "test.jsonl").is_file():
        pytest.skip(f"GSM8K data not found at {GSM8K_DIR}")
    return GSM8K_DIR


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
