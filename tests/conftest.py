from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_server import Behaviour, FakeServer  # noqa: E402

GSM8K_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k"


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    with FakeServer(Behaviour()) as server:
        yield server


@pytest.fixture
def gsm8k_dir() -> Path:
    if not (GSM8K_DIR / "test.jsonl").is_file():
        pytest.skip(f"GSM8K data not found at {GSM8K_DIR}")
    return GSM8K_DIR
