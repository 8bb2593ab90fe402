"""`kveval ab` on llama.cpp's own llama-server (`make llama-server`, integration): an f16
against a q8_0 KV cache on a tiny suite, one command from the two setups to gate.json with
a verdict and the trade the server's log tells (`-lv 4` makes llama-server print its KV
cache's size)."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from llama_server import BINARY, available

from kveval.run import engine_setup

REPO = Path(__file__).resolve().parents[1]
HAVE_MODEL = importlib.util.find_spec(engine_setup.BUNDLED_PACKAGE) is not None
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (available() and HAVE_MODEL),
                       reason="no llama-server (make test builds it) or no bundled model"),
]
PROMPTS = ["Name three colours.", "What is the capital of France?", "Say hello.",
           "Count from one to five."]


def test_ab_f16_against_q8_0_gives_a_verdict_and_the_trade(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    suite = tmp_path / "suite.toml"
    suite.write_text(f'[[task]]\nname = "prompts"\ndata = "{prompts}"\nmax_tokens = 32\n')
    model = engine_setup.bundled_model_path()
    serve = shlex.join([str(BINARY), "-m", str(model), "--host", "127.0.0.1", "--port",
                        "{port}", "-np", "2", "-c", "4096", "-fa", "on",
                        "-t", str(engine_setup.available_cpus()), "--no-webui",
                        "--no-cache-idle-slots", "-lv", "4"])
    done = subprocess.run(
        [sys.executable, "-m", "kveval.cli", "ab", "--serve", serve,
         "--baseline", "-ctk f16 -ctv f16", "--candidate", "-ctk q8_0 -ctv q8_0",
         "--noise-runs", "1", "--suite", str(suite), "--concurrency", "2",
         "--teacher-force", "off", "-o", str(tmp_path / "ab"), "--json"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode in (0, 1), done.stderr
    gate = json.loads((tmp_path / "ab" / "gate.json").read_text())
    assert gate["verdict"] in ("pass", "fail")
    trade = gate["trade"]
    assert trade["baseline"]["kv_tokens"] == 4096 == trade["candidate"]["kv_tokens"]
    # the log's `llama_kv_cache: size = ...` line (at -lv 4): q8_0 is 34 bytes per 32 values
    assert trade["ratio"]["kv_bytes_per_token"]["ratio"] == pytest.approx(34 / 64, rel=0.01)
    assert trade["candidate"]["kv_cache_type"] == "q8_0"
    assert trade["baseline"]["output_tokens_per_s"] > 0
    assert trade["candidate"]["latency_p50_s"] > 0
    assert "server_args" in trade["candidate"]["setup"]
    print(json.dumps(trade, indent=1))
