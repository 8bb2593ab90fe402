"""The KV cache's bytes per token from what a server loads: a GGUF model file's header and the
cache types of a llama-server command line, a vLLM model folder's config.json; and the header
reader on files that are not GGUF (never an exception)."""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kveval.formats.gguf import kv_bytes_per_token, kv_shape
from kveval.run.ab.model_kv import completed, from_command
from tests.test_ab import ab, serve, write_suite

SMOLLM2 = {"block_count": 30, "embedding_length": 576, "head_count": 9, "head_count_kv": 3}


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _pair(key: str, kind: int, value: bytes) -> bytes:
    return _string(key) + struct.pack("<I", kind) + value


def gguf(fields: dict[str, int], vocabulary: int = 1000) -> bytes:
    """A GGUF v3 header: the architecture, uint32 fields, a float, a vocabulary of strings."""
    pairs = [_pair("general.architecture", 8, _string("llama")),
             _pair("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, vocabulary)
                   + b"".join(_string(f"tok{i}") for i in range(vocabulary))),
             _pair("llama.rope.freq_base", 6, struct.pack("<f", 1e5))]
    pairs += [_pair(f"llama.{k.replace('head_', 'attention.head_')}", 4, struct.pack("<I", v))
              for k, v in fields.items()]
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(pairs)) + b"".join(pairs)


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(gguf(SMOLLM2))
    return path


def test_the_header_gives_the_bytes_per_token_of_each_cache_type(model: Path) -> None:
    shape = kv_shape(model)
    assert shape is not None and shape["head_count_kv"] == 3 and shape["block_count"] == 30
    f16 = kv_bytes_per_token(shape, "f16", "f16")
    assert f16 == 30 * 3 * 64 * 2 * 2  # layers, KV heads, head size, K and V, 2 bytes
    assert kv_bytes_per_token(shape, "q8_0", "q8_0") / f16 == pytest.approx(34 / 64)
    assert kv_bytes_per_token(shape, "q4_0", "q4_0") / f16 == pytest.approx(18 / 64)
    assert kv_bytes_per_token(shape, "q8_0", "f16") / f16 == pytest.approx((34 / 32 + 2) / 4)
    assert kv_bytes_per_token(shape, "q3_k", "f16") is None  # not a KV cache type


def test_a_llama_server_command_gives_its_pool_without_its_log(model: Path) -> None:
    pool = from_command(["llama-server", "-m", str(model), "-ctk", "q8_0", "-ctv", "q8_0"])
    assert pool is not None and pool.bytes_per_token == pytest.approx(30 * 3 * 64 * 2 * 34 / 32)
    assert pool.cache_type == "q8_0" and pool.source == "model file"
    default = from_command(["llama-server", f"--model={model}"])
    assert default is not None and default.bytes_per_token == 23040  # f16 by default
    told = from_command(["llama-server", "-hf", "org/model"], model_path=str(model))
    assert told is not None and told.bytes_per_token == 23040  # /props said which file


def test_the_log_wins_where_it_tells_the_size(model: Path) -> None:
    from kveval.formats.figures import KvPool

    logged = KvPool(4096, 12240.0, "q8_0")
    assert completed(logged, ["llama-server", "-m", str(model)]) == logged
    tokens_only = completed(KvPool(4096), ["llama-server", "-m", str(model)])
    assert tokens_only is not None and tokens_only.tokens == 4096
    assert tokens_only.bytes_per_token == 23040


def test_a_vllm_model_folder_gives_its_pool(tmp_path: Path) -> None:
    config = {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
              "hidden_size": 576, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    auto = from_command(["vllm", "serve", str(tmp_path), "--port", "8000"])
    fp8 = from_command(["vllm", "serve", str(tmp_path), "--kv-cache-dtype", "fp8"])
    assert auto is not None and auto.bytes_per_token == 2 * 30 * 3 * 64 * 2
    assert fp8 is not None and fp8.bytes_per_token == auto.bytes_per_token / 2
    assert from_command(["vllm", "serve", "org/remote-model"]) is None


@pytest.mark.parametrize("data", [b"", b"GGUF", b"GGML" + b"\0" * 40,
                                  b"GGUF" + struct.pack("<IQQ", 3, 0, 1 << 40)])
def test_a_file_that_is_not_gguf_has_no_shape(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    assert kv_shape(path) is None
    assert from_command(["llama-server", "-m", str(path)]) is None


@settings(max_examples=200, deadline=None)
@given(cut=st.integers(min_value=0, max_value=400), flip=st.integers(min_value=0, max_value=399),
       byte=st.integers(min_value=0, max_value=255))
def test_a_damaged_header_never_raises(tmp_path_factory: pytest.TempPathFactory, cut: int,
                                       flip: int, byte: int) -> None:
    data = bytearray(gguf(SMOLLM2, vocabulary=3))
    if flip < len(data):
        data[flip] = byte
    path = tmp_path_factory.mktemp("gguf") / "model.gguf"
    path.write_bytes(bytes(data[:len(data) - cut]))
    shape = kv_shape(path)
    assert shape is None or isinstance(shape, dict)
    if shape is not None:
        kv_bytes_per_token(shape, "f16", "f16")  # whatever the fields hold: a number or None


# ---------------------------------------------------------------- a path a server names


def hostile(path: Path, kind: int, inner: int, elements: int, after: bool = True) -> Path:
    """A GGUF whose one array of `elements` zero-filled elements (sparse on disk) stands
    between the architecture and the block count."""
    head = [_pair("general.architecture", 8, _string("llama"))]
    array = _string("llama.attention.head_count_kv" if kind == 0 else "tokenizer.x") + \
        struct.pack("<IIQ", 9, inner, elements)
    size = {0: 1, 8: 8, 9: 12}[inner] * elements
    tail = _pair("llama.block_count", 4, struct.pack("<I", 2)) if after else b""
    with path.open("wb") as fh:
        fh.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 3 if after else 2) + b"".join(head) + array)
        fh.seek(size, 1)
        fh.write(tail)
    return path


@pytest.mark.parametrize(("kind", "inner", "elements", "shape"), [
    # a kept per-layer array of 16M elements: kept as unknown, unread
    (0, 0, 1 << 24, {"block_count": 2, "head_count_kv": None}),
    (1, 0, (1 << 24), {"block_count": 2}),  # a skipped array of bytes: one seek
    (1, 0, (1 << 28), None),  # past the bytes a header may span
    (1, 8, 1 << 24, None),  # 16M strings: past the cap on strings read one at a time
    (1, 9, 1 << 24, None),  # 16M arrays in an array: no GGUF llama.cpp loads
    (1, 8, (1 << 20) - 8, {"block_count": 2}),  # a vocabulary under the cap: read
])
def test_a_hostile_header_costs_what_its_bytes_cost(tmp_path: Path, kind: int, inner: int,
                                                   elements: int, shape: object) -> None:
    path = hostile(tmp_path / "m.gguf", kind, inner, elements)
    started = time.monotonic()
    assert kv_shape(path) == shape
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("what", ["fifo", "folder", "device", "missing"])
def test_a_model_path_that_is_not_a_regular_file_is_not_opened(tmp_path: Path,
                                                               what: str) -> None:
    path = tmp_path / "model.gguf"
    if what == "fifo":
        os.mkfifo(path)
    elif what == "folder":
        path.mkdir()
    elif what == "device":
        path = Path("/dev/zero")
    assert kv_shape(path) is None  # a FIFO with no writer would block a plain open
    assert from_command(["llama-server", "-hf", "org/m"], model_path=str(path)) is None


def test_ab_against_a_server_naming_a_fifo_as_its_model_ends(tmp_path: Path) -> None:
    """llama-server's /props `model_path` naming a FIFO: read after the baseline's run, it
    once hung `kveval ab` for good."""
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    suite = write_suite(tmp_path, 8)
    done = ab(tmp_path, suite, serve_cmd=serve(tmp_path, f"--model-path {fifo}"), timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "ab" / "servers" / "baseline.json").is_file()
