"""The trade's numbers as a server gives them: a log line, a reply's usage, a suite's
[speed] table with numbers that are not numbers or lie far out of range. Each is parsed
once and bounded: unknown (with a warning for a log line) or one line and exit 2, never a
ValueError, OverflowError, TypeError or MemoryError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kveval.errors import UsageError
from kveval.formats.numbers import LARGEST, amount, count
from kveval.run.ab.serverlog import kv_pool, read_pool
from kveval.run.ab.speed import load_size
from kveval.run.client import parse_reply

NUMBERS = ["1.2.3", "1..5", "9" * 400, "0", "00", "1e999", "nan", "-1", "4,096", "1,2,3",
           "47.81", "18446744073709551616", "", "x", "1.", ".5"]
LINES = ["llama_kv_cache: size = {0} MiB ( {1} cells, 30 layers, {2}/{2} seqs), K (q8_0): "
         "1.0 MiB, V (q8_0): 1.0 MiB",
         "n_slots = {0}, n_ctx_slot = {1}, kv_unified = 'false'",
         "llama_context: n_ctx = {0}\nn_slots = {1}, n_ctx_slot = {2}, kv_unified = 'true'",
         "GPU KV cache size: {0} tokens\nAvailable KV cache memory: {1} GiB\n"
         "Maximum concurrency for {2} tokens per request: {0}x",
         "KV Cache is allocated. #tokens: {0}, K size: {1} GB, V size: {2} GB",
         "KV Cache is allocated. #tokens: {0}, KV size: {1} GB"]
FIELDS = ("tokens", "bytes_per_token", "max_concurrency", "at_tokens")


def in_range(value: Any) -> bool:
    return value is None or (0 < value <= LARGEST and not isinstance(value, bool))


@given(st.sampled_from(LINES), st.lists(st.one_of(st.sampled_from(NUMBERS), st.text(
    "0123456789.,", max_size=30)), min_size=3, max_size=3))
def test_a_log_line_with_any_number_gives_a_bounded_pool_or_none(line: str,
                                                                  numbers: list[str]) -> None:
    pool, unknown = read_pool(line.format(*numbers))
    if pool is not None:
        assert all(in_range(getattr(pool, field)) for field in FIELDS)
        assert all(isinstance(said, str) for said in unknown)


@pytest.mark.parametrize("line", [
    "llama_kv_cache: size = 1.2.3 MiB (  2048 cells,  30 layers,  1/1 seqs), K (f16): 1.0 "
    "MiB, V (f16): 1.0 MiB",
    "GPU KV cache size: 10,000 tokens\nAvailable KV cache memory: 1..5 GiB",
    f"KV Cache is allocated. #tokens: {'9' * 400}, KV size: 1.5 GB",
])
def test_a_figure_that_is_no_number_is_unknown_with_a_warning(line: str, capsys: Any) -> None:
    pool = kv_pool(line)
    assert pool is None or pool.bytes_per_token is None
    assert "is not a number in range; the trade shows it as unknown" in capsys.readouterr().err


@given(st.one_of(st.integers(), st.floats(), st.text(max_size=30), st.booleans(), st.none(),
                 st.sampled_from([10 ** 400, "9" * 400, "many", 2 ** 64])))
def test_counts_and_amounts_are_bounded_or_unknown(value: Any) -> None:
    assert in_range(count(value, 1)) and in_range(amount(value))


def test_usage_that_is_no_count_is_recorded_as_unknown() -> None:
    reply = parse_reply({"choices": [{"text": "x", "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": "many", "completion_tokens": 10 ** 400,
                                   "total_tokens": 7}}, 0.1)
    assert reply.usage == {"prompt_tokens": None, "completion_tokens": None,
                           "total_tokens": 7}


@pytest.mark.parametrize("value", ["1000000000000", "1e-9", "0", "\"4k\"", "true"])
def test_a_speed_load_out_of_range_is_refused_as_the_suite_is_read(
        tmp_path: Path, value: str) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(f"[[task]]\nname = \"prompts\"\n[speed]\nprompt_tokens = {value}\n")
    with pytest.raises(UsageError, match=r"\[speed\]: `prompt_tokens = .*` must be an "
                                         r"integer from 1 to 1048576"):
        load_size(suite)
