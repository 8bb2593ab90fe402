"""Three run files for the HTML page's tests: a baseline, a restart of it (the noise floor)
and a candidate that loses GSM8K questions and long-context needles."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from kveval.formats.records import ItemRecord, RunHeader
from kveval.formats.writer import create_run

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"
TASKS = [
    {"name": "gsm8k", "adapter": "gsm8k", "api": "completions", "max_tokens": 256, "stop": [],
     "temperature": 0.0, "limit": None, "params": {}},
    {"name": "prompts", "adapter": "prompts", "api": "chat", "max_tokens": 128, "stop": [],
     "temperature": 0.0, "limit": None, "params": {}},
    {"name": "needle", "adapter": "needle", "api": "completions", "max_tokens": 32, "stop": [],
     "temperature": 0.0, "limit": None, "params": {}},
]
LENGTHS = (1024, 2048, 4096, 8192, 16384)
DEPTHS = (0, 17, 33, 50, 67, 83, 100)


def header(label: str, cache_dtype: str, model: str = "qwen3-8b") -> RunHeader:
    return RunHeader(
        label=label, endpoint="http://127.0.0.1:8000/v1", model=model, tasks=copy.deepcopy(TASKS),
        sampling={"temperature": 0.0, "seed": 0, "extra_body": None}, concurrency=8,
        fingerprint={"models": [{"id": model}], "metrics": {"cache_config_info": {
            "cache_dtype": cache_dtype, "block_size": "16", "num_gpu_blocks": "4096"}},
            "engine": {"name": "vllm", "version": "0.9.1"}},
        created="2026-11-29T10:00:00Z", kveval_version="0.1.0")


def gsm8k(n: int, wrong: set[int], changed: set[int], answer: str = "") -> list[ItemRecord]:
    items = []
    for i in range(n):
        text = (f"Natalia sold {i} clips in April and half as many in May. "
                f"So she sold {i} + {i // 2} = {i + i // 2} clips.\n#### {i + i // 2}")
        if i in changed:
            text = text.replace("half as many", "twice as many") + (answer if i == 3 else "")
        items.append(ItemRecord(
            task="gsm8k", item_id=f"gsm8k/test/{i:04d}", prompt_sha256=f"g{i}", request={},
            status="ok", output=text, finish_reason="stop", extracted=str(i + i // 2),
            reference=str(i + i // 2), correct=i not in wrong,
            correct_strict=i not in wrong and i % 7 != 0))
    return items


def prompts(n: int, changed: set[int]) -> list[ItemRecord]:
    return [ItemRecord(task="prompts", item_id=f"p{i}", prompt_sha256=f"p{i}", request={},
                       status="ok", output=f"Reply {i}: the capital of France is Paris."
                       + (" It is also large." if i in changed else ""))
            for i in range(n)]


def needle(lost: set[tuple[int, int]]) -> list[ItemRecord]:
    items = []
    for length in LENGTHS:
        for depth in DEPTHS:
            for trial in range(3):
                found = (length, depth) not in lost or trial == 2
                items.append(ItemRecord(
                    task="needle", item_id=f"needle/L{length}/D{depth}/T{trial}",
                    prompt_sha256=f"n{length}-{depth}-{trial}", request={}, status="ok",
                    output="The magic number is 4172." if found else "I do not know.",
                    extracted="4172" if found else None, reference="4172", correct=found,
                    meta={"target_tokens": length, "depth": depth, "trial": trial,
                          "needle_class": "exact" if found else "no_answer"}))
    return items


def write(path: Path, head: RunHeader, items: list[ItemRecord]) -> str:
    with create_run(path, head) as writer:
        for item in items:
            writer.append(item)
    return str(path)


def three_runs(folder: Path, hostile: bool = False) -> dict[str, str]:
    """bf16a (baseline), bf16b (restart), fp8 (candidate: 40 more GSM8K questions wrong,
    needles lost at 16k)."""
    model = HOSTILE if hostile else "qwen3-8b"
    fp8 = header(HOSTILE if hostile else "fp8", HOSTILE if hostile else "fp8", model)
    lost = {(16384, d) for d in DEPTHS[2:]} | {(8192, 50)}
    return {
        "bf16a": write(folder / "bf16a.jsonl", header("bf16a", "auto", model),
                       gsm8k(200, set(range(20)), set()) + prompts(30, set()) + needle(set())),
        "bf16b": write(folder / "bf16b.jsonl", header("bf16b", "auto", model),
                       gsm8k(200, set(range(2, 23)), {5, 9}) + prompts(30, {4})
                       + needle({(16384, 100)})),
        "fp8": write(folder / "fp8.jsonl", fp8,
                     gsm8k(200, set(range(60)), set(range(0, 80, 3)),
                           HOSTILE if hostile else "") + prompts(30, set(range(0, 30, 3)))
                     + needle(lost)),
    }


def extras() -> dict[str, Any]:
    """Per-task figures other parts of kveval add to the `--json` outputs."""
    return {
        "collapse": {"answers": 100, "truncated": 8, "empty": 2, "length_ratio": 1.31,
                     "repetition": 0.05, "mean_length": 412.0, "ngram": 4,
                     "baseline": {"answers": 100, "truncated": 1, "empty": 0, "length_ratio": 1.0,
                                  "repetition": 0.01, "mean_length": 315.0},
                     "noise": [{"answers": 100, "truncated": 1, "empty": 0,
                                "length_ratio": 1.02, "repetition": 0.01, "mean_length": 321.0}]},
        "divergence": {"kl_mean": 0.0123, "kl_p99": 0.41, "top1_agreement": 0.962,
                       "dlogp_mean": 0.031, "flip_margin_median": 0.22,
                       "positions": [0.001 * (i % 17) + 0.0005 * i for i in range(64)]},
        "length_curve": {"buckets": [{"length": x, "baseline": 1.0 - 0.02 * i,
                                      "candidate": 1.0 - 0.09 * i} for i, x in enumerate(LENGTHS)],
                         "auc": 0.81, "auc_recovery": {"value": 0.9, "low": 0.84, "high": 0.95},
                         "sign_test": {"lower": 4, "buckets": 5, "p": 0.0625},
                         "effective_length": 4096},
    }
