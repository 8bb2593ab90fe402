"""The KV pool read from a started server's log, on the lines vLLM, SGLang and llama.cpp's
llama-server print (run/ab/serverlog.py)."""

from __future__ import annotations

import pytest

from kveval.run.ab.serverlog import kv_pool

LLAMA = ("0.00.492.589 I llama_kv_cache:        CPU KV buffer size =    47.81 MiB\n"
         "0.00.560.872 I llama_kv_cache: size =   47.81 MiB (  2048 cells,  30 layers,  2/2 "
         "seqs), K (q8_0):   23.91 MiB, V (q8_0):   23.91 MiB\n"
         "0.01.061.248 I srv    load_model: initializing, n_slots = 2, n_ctx_slot = 2048, "
         "kv_unified = 'false'\n")


def test_llama_server_at_lv_4_gives_the_pool_its_bytes_per_token_and_cache_type() -> None:
    pool = kv_pool(LLAMA)
    assert pool is not None and pool.tokens == 4096 and pool.cache_type == "q8_0"
    assert pool.bytes_per_token == pytest.approx(47.81 * 2**20 / 4096)


def test_llama_server_at_its_default_verbosity_gives_the_pool_in_tokens_only() -> None:
    pool = kv_pool(LLAMA.splitlines()[2])
    assert pool is not None and pool.tokens == 4096 and pool.bytes_per_token is None


def test_vllm_gives_tokens_memory_and_concurrency() -> None:
    pool = kv_pool("INFO [kv_cache_utils.py:1] GPU KV cache size: 4,455,808 tokens\n"
                   "INFO Available KV cache memory: 20.50 GiB\n"
                   "INFO Maximum concurrency for 4,096 tokens per request: 1087.84x\n")
    assert pool is not None and pool.tokens == 4_455_808
    assert pool.max_concurrency == 1087.84 and pool.at_tokens == 4096
    assert pool.bytes_per_token == pytest.approx(20.5 * 2**30 / 4_455_808)


@pytest.mark.parametrize(("line", "size_gib"), [
    ("[TP0] KV Cache is allocated. #tokens: 350257, K size: 0.21 GB, V size: 0.21 GB", 0.42),
    ("[DP0 TP0 EP0] KV Cache is allocated. #tokens: 524288, KV size: 17.16 GB", 17.16),
])
def test_sglang_gives_tokens_and_bytes_per_token(line: str, size_gib: float) -> None:
    pool = kv_pool(line)
    assert pool is not None and pool.bytes_per_token == pytest.approx(
        size_gib * 2**30 / pool.tokens)


def test_a_log_that_tells_nothing_gives_none() -> None:
    assert kv_pool("fake server: starting\nlistening on 127.0.0.1:8000\n") is None
