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


def write_figures(run: Path, load: float, tokens: int = 900) -> None:
    sending = {"items": 30, "output_tokens": tokens, "wall_s": 10.0, "load_1m": [load, load],
               "cpus": 2}
    figures = {"label": run.stem, "command": ["serve"],
               "run": {"concurrency": 2, "sent": [sending], "items": 30}}
    (run.parent / "servers").mkdir(exist_ok=True)
    (run.parent / "servers" / f"{run.stem}.json").write_text(json.dumps(figures))


def timed_gate(capsys: Any, tmp_path: Path, loads: tuple[float, float, float],
               cut: int = 0) -> tuple[str, dict[str, Any]]:
    paths = [write_run(tmp_path / f"{name}.jsonl", name, 1000, 0.5)
             for name in ("bf16a", "fp8", "bf16b")]
    if cut:  # the candidate's answers stop at max_tokens
        lines = paths[1].read_text().splitlines()
        cutoff = [json.dumps({**json.loads(line), "finish_reason": "length"})
                  for line in lines[1:cut + 1]]
        paths[1].write_text("\n".join([lines[0], *cutoff, *lines[cut + 1:]]) + "\n")
    for path, load in zip(paths, loads, strict=True):
        write_figures(path, load)
    args = ("--baseline", str(paths[0]), "--candidate", str(paths[1]), "--noise", str(paths[2]))
    _, out, _ = kveval(capsys, "gate", *args)
    _, data, _ = kveval(capsys, "gate", *args, "--json")
    return out, json.loads(data)["trade"]


def test_speed_ratios_of_runs_timed_under_different_loads_say_so(capsys: Any,
                                                                tmp_path: Path) -> None:
    out, trade = timed_gate(capsys, tmp_path, (6.0, 2.0, 5.8))
    assert trade["candidate"]["host_load_1m"] == 2.0 and trade["candidate"]["cpus"] == 2
    assert trade["speed_caveats"]["load"]["apart"] == pytest.approx(4.0)
    assert "speed caution: the runs were timed under different host loads (1-minute load " \
           "average bf16a 6.0, fp8 2.0, bf16b 5.8, on 2 CPUs; 4.0 apart): the speed ratios " \
           "measure the host as much as the cache" in out
    assert out.index("output 1.00x tokens/s") < out.index("speed caution")
    assert "host load (1 min)" in out


def test_speed_ratios_of_runs_under_one_load_carry_no_caution(capsys: Any,
                                                              tmp_path: Path) -> None:
    out, trade = timed_gate(capsys, tmp_path, (2.0, 2.4, 1.9))
    assert trade["speed_caveats"] == {} and "speed caution" not in out


def test_a_candidate_cut_at_max_tokens_far_more_often_is_said(capsys: Any,
                                                             tmp_path: Path) -> None:
    out, trade = timed_gate(capsys, tmp_path, (2.0, 2.0, 2.0), cut=27)
    assert trade["candidate"]["cut_at_max_tokens"] == 27
    assert "speed caution: fp8's answers stopped at max_tokens on 27 of 30 items (90%; the " \
           "baseline and its restarts 0%): its speed is the pace of cut text, not of " \
           "answers" in out
    assert "KV" not in out.split("speed caution")[1].splitlines()[0]
