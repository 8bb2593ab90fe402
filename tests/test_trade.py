"""The gate's `trade` on run files made without `kveval ab`: what their headers and items
hold (vLLM's cache_config_info, item latencies), and a dash for what they do not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_compare_lean import HEADER, item

from tests.clirun import kveval


def write_run(path: Path, label: str, blocks: int | str, latency: float) -> Path:
    fingerprint = {"metrics": {"cache_config_info": {"num_gpu_blocks": str(blocks),
                                                     "block_size": "16",
                                                     "cache_dtype": "auto"}}}
    items = [{**item(i, "So = 18\n#### 18"), "latency_s": latency} for i in range(30)]
    lines = [json.dumps({**HEADER, "label": label, "fingerprint": fingerprint})]
    path.write_text("\n".join(lines + [json.dumps(x) for x in items]) + "\n")
    return path


def gate(capsys: Any, tmp_path: Path, *extra: str) -> tuple[int, str]:
    base = write_run(tmp_path / "bf16a.jsonl", "bf16a", 1000, 0.5)
    cand = write_run(tmp_path / "fp8.jsonl", "fp8", 2000, 0.4)
    noise = write_run(tmp_path / "bf16b.jsonl", "bf16b", 1000, 0.55)
    code, out, _ = kveval(capsys, "gate", "--baseline", str(base), "--candidate", str(cand),
                          "--noise", str(noise), *extra)
    return code, out


def test_gate_json_carries_the_trade_its_headers_and_items_hold(capsys: Any,
                                                               tmp_path: Path) -> None:
    code, out = gate(capsys, tmp_path, "--json")
    assert code == 0
    trade = json.loads(out)["trade"]
    assert trade["baseline"]["kv_tokens"] == 16_000 and trade["candidate"]["kv_tokens"] == 32_000
    assert trade["ratio"]["kv_tokens"] == {"ratio": 2.0, "setup": 16_000, "setup_runs": 2,
                                           "noise_range": [1.0, 1.0], "outside_noise": True}
    # against the setup's median (0.5 and 0.55 s), never the baseline alone
    latency = trade["ratio"]["latency_p50_s"]
    assert latency["setup"] == pytest.approx(0.525)
    assert latency["ratio"] == pytest.approx(0.4 / 0.525)
    assert latency["noise_range"] == [pytest.approx(0.5 / 0.525), pytest.approx(0.55 / 0.525)]
    assert "output_tokens_per_s" not in trade["candidate"]  # no ab: nothing timed the run


def test_gate_text_shows_the_trade_beside_the_verdict(capsys: Any, tmp_path: Path) -> None:
    code, out = gate(capsys, tmp_path)
    assert code == 0
    assert "fp8: KV pool 2.00x the tokens (the baseline and its restarts 1.00-1.00x); latency " \
           "p50 0.76x (the baseline and its restarts 0.95-1.05x)" in out
    assert out.index("trade: what the change bought") < out.index("\ngate: PASS")


@pytest.mark.parametrize("blocks", ["9" * 400, "many", "-5", "1.5e3", "0x10"])
def test_a_count_no_server_gives_is_unknown_never_an_error(capsys: Any, tmp_path: Path,
                                                           blocks: str) -> None:
    base = write_run(tmp_path / "bf16a.jsonl", "bf16a", 1000, 0.5)
    cand = write_run(tmp_path / "fp8.jsonl", "fp8", blocks, 0.4)
    code, out, err = kveval(capsys, "gate", "--baseline", str(base), "--candidate", str(cand),
                            "--json")
    assert code == 0, err
    trade = json.loads(out)["trade"]
    assert "kv_tokens" not in trade["candidate"] and "kv_tokens" not in trade["ratio"]
