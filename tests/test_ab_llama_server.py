"""`kveval ab` on llama.cpp's own llama-server (`make llama-server`, integration): an f16
against a q8_0 KV cache on a small suite, teacher-forced, from the two setups to gate.json.

llama.cpp on a CPU is deterministic: a forced restart repeats the baseline's own forced pass
bit for bit (KL 0), so a cache that moves any distribution shows with `--max-kl 0`. The server
runs at its default verbosity: the trade's KV bytes per token come from the model file's
header and the cache types of the command line, not from a log line it does not print."""

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
           "Count from one to five.", "Name a fruit.", "What is two plus two?",
           "Say goodbye.", "Name an animal."]


def ab(tmp_path: Path, *extra: str, candidates: tuple[str, ...] = ("-ctk q8_0 -ctv q8_0",),
       folder: str = "ab", threads: int = 0) -> subprocess.CompletedProcess[str]:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    suite = tmp_path / "suite.toml"
    suite.write_text(f'[[task]]\nname = "prompts"\ndata = "{prompts}"\nmax_tokens = 16\n')
    serve = shlex.join([str(BINARY), "-m", str(engine_setup.bundled_model_path()), "--host",
                        "127.0.0.1", "--port", "{port}", "-np", "2", "-c", "4096", "-fa", "on",
                        "-t", str(threads or engine_setup.available_cpus()), "--no-webui",
                        "--no-cache-idle-slots"])
    return subprocess.run(
        [sys.executable, "-m", "kveval.cli", "ab", "--serve", serve,
         "--baseline", "-ctk f16 -ctv f16",
         *(word for c in candidates for word in ("--candidate", c)),
         "--noise-runs", "1", "--suite", str(suite), "--concurrency", "2",
         "--teacher-force", "on", "-o", str(tmp_path / folder), "--json", *extra],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)})


def test_ab_f16_against_q8_0_judges_the_forced_passes_and_the_trade(tmp_path: Path) -> None:
    done = ab(tmp_path)
    assert done.returncode in (0, 1), done.stderr
    folder = tmp_path / "ab"
    assert (folder / "baseline-forced.jsonl").is_file()
    gate = json.loads((folder / "gate.json").read_text())
    task = gate["tasks"][0]
    forced = task["forced_divergence"]
    assert forced["noise_runs"][0]["kl_mean"] == 0  # a forced restart repeats the reference
    assert forced["kl_mean"] > 0  # q8_0 moved the distributions
    check = next(c for c in gate["checks"] if c["kind"] == "forced")
    assert check["p_value"] < check["level"]  # the rise is shown
    assert "forced" in task["shown"] and gate["exit_code"] == 0  # without --max-kl: named
    header = json.loads((folder / "candidate.jsonl").open().readline())
    assert header["order"] == "shuffle"
    trade = gate["trade"]
    for run in (trade["baseline"], trade["candidate"], *trade["noise"]):
        assert run["kv_bytes_per_token"] > 0 and run["kv_source"].endswith("model file (bytes)")
    assert trade["ratio"]["kv_bytes_per_token"]["ratio"] == pytest.approx(34 / 64, rel=0.01)
    assert trade["ratio"]["kv_bytes_per_token"]["noise_range"] == [1.0, 1.0]
    assert trade["ratio"]["kv_tokens"]["ratio"] == 1.0  # -c 4096 either way
    again = ab(tmp_path, "--max-kl", "0")  # the same experiment, judged on any rise
    assert again.returncode == 1, again.stderr
    assert again.stderr.count("finished on file; not started") == 3
    assert json.loads(again.stdout)["tasks"][0]["failed"] == ["forced"]


def answers(path: Path) -> dict[str, object]:
    items = [json.loads(line) for line in path.open() if '"type":"item"' in line.replace(" ", "")]
    return {json.dumps(i["item_id"]): (i["output"], i.get("logprobs")) for i in items}


def test_a_sweep_shares_one_pool_and_side_by_side_gives_the_same_answers(
        tmp_path: Path) -> None:
    both = ("q8=-ctk q8_0 -ctv q8_0", "q4=-ctk q4_0 -ctv q4_0")
    same = "same=--cache-type-k f16 --cache-type-v f16"  # changes nothing
    done = ab(tmp_path, candidates=(*both, same), threads=1)
    assert done.returncode == 1, done.stderr  # q4_0 moves more than a restart: drift shown
    assert done.stderr.count("answering on port") == 5  # 2 + 3, not 3 x 2
    data = json.loads(done.stdout)
    q8, q4, unchanged = data["candidates"]
    assert unchanged["exit_code"] == 0 and unchanged["costs"]["kl_rise"] == 0
    assert unchanged["gate"]["tasks"][0]["forced_divergence"]["kl_mean"] == 0
    assert q8["bought"]["kv_bytes_per_token"]["ratio"] == pytest.approx(34 / 64, rel=0.01)
    assert q4["bought"]["kv_bytes_per_token"]["ratio"] == pytest.approx(18 / 64, rel=0.01)
    assert q4["costs"]["kl_rise"] > q8["costs"]["kl_rise"] > 0
    assert q8["costs"]["kl_forced"] and q4["exit_code"] == 1
    side = ab(tmp_path, "--parallel", "2", candidates=both, folder="side", threads=1)
    assert side.returncode == 1, side.stderr
    for run in ("baseline", "noise1", "q8", "q4", "baseline-forced", "q4-forced"):
        assert answers(tmp_path / "side" / f"{run}.jsonl") == answers(
            tmp_path / "ab" / f"{run}.jsonl"), run
