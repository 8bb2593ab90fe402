"""The KV cache's bytes per token from what a server was started with, where its log does
not say (llama-server tells its KV cache's size only at `-lv 4`): the model it loads and the
cache types its command line sets.

- llama.cpp (llama-server, and the model path /props reports where the command names none):
  the GGUF header's layers, KV heads and head sizes (formats/gguf.py), with `-ctk/--cache-type-k`
  and `-ctv/--cache-type-v` (llama.cpp's default is f16).
- vLLM (`vllm serve MODEL`, a local folder): its config.json's layers, KV heads and head size,
  with `--kv-cache-dtype` (fp8: one byte) or else `--dtype` (auto: the config's torch_dtype).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kveval.errors import KvevalError
from kveval.formats.figures import KvPool
from kveval.formats.gguf import kv_bytes_per_token, kv_shape
from kveval.formats.limits import read_whole
from kveval.formats.numbers import count

LLAMA_FLAGS = {"model": ("-m", "--model"), "k": ("-ctk", "--cache-type-k"),
               "v": ("-ctv", "--cache-type-v")}
VLLM_BYTES = {"fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "fp8_inc": 1.0, "float16": 2.0,
              "half": 2.0, "bfloat16": 2.0, "float": 4.0, "float32": 4.0}
CONFIG_BYTES = 4 << 20  # a config.json larger than this is not one


def flag(argv: Sequence[str], names: Sequence[str]) -> str | None:
    """The value of the last of these flags (`-m PATH` or `--model=PATH`)."""
    found = None
    for at, word in enumerate(argv):
        name, sep, value = word.partition("=")
        if name in names:
            found = value if sep else (argv[at + 1] if at + 1 < len(argv) else None)
    return found


def llama(argv: Sequence[str], model_path: str | None = None) -> KvPool | None:
    model = flag(argv, LLAMA_FLAGS["model"]) or model_path
    shape = kv_shape(model) if model else None
    if model is None or shape is None:
        return None
    k = flag(argv, LLAMA_FLAGS["k"]) or "f16"
    v = flag(argv, LLAMA_FLAGS["v"]) or "f16"
    size = kv_bytes_per_token(shape, k, v)
    if size is None:
        return None
    return KvPool(bytes_per_token=size, cache_type=k if k == v else f"K {k}, V {v}",
                  said=(f"model file {Path(model).name}: {shape.get('block_count')} layers; "
                        f"cache types K {k}, V {v}",), source="model file")


def _config(folder: str) -> dict[str, Any] | None:
    try:
        found = json.loads(read_whole(Path(folder) / "config.json", CONFIG_BYTES))
    except (OSError, KvevalError, ValueError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


def _int(value: Any) -> int | None:
    """A positive count of the config's, bounded (a 400-digit one is unknown, not an
    OverflowError)."""
    return count(value, 1) if isinstance(value, int) else None


def vllm(argv: Sequence[str]) -> KvPool | None:
    serving = list(argv[2:3]) if len(argv) > 2 and argv[1] == "serve" else []
    config = _config(flag(argv, ("--model",)) or (serving[0] if serving else ""))
    if config is None:
        return None
    layers, heads = _int(config.get("num_hidden_layers")), _int(config.get("num_attention_heads"))
    kv_heads = _int(config.get("num_key_value_heads")) or heads
    hidden = _int(config.get("hidden_size"))
    head = _int(config.get("head_dim")) or (hidden // heads if hidden and heads else None)
    dtype = flag(argv, ("--kv-cache-dtype",)) or "auto"
    if dtype == "auto":
        dtype = flag(argv, ("--dtype",)) or "auto"
    if dtype == "auto":
        dtype = str(config.get("torch_dtype") or "bfloat16")
    size = VLLM_BYTES.get(dtype)
    if not (layers and kv_heads and head and size):
        return None
    return KvPool(bytes_per_token=float(2 * layers * kv_heads * head * size), cache_type=dtype,
                  said=(f"config.json: {layers} layers, {kv_heads} KV heads of {head}; "
                        f"KV cache {dtype}",), source="config.json")


def from_command(argv: Sequence[str], model_path: str | None = None) -> KvPool | None:
    """The KV bytes per token the command (and the server's own model path) give."""
    program = Path(argv[0]).name if argv else ""
    if program == "vllm" or "vllm" in argv[:3]:
        return vllm(argv)
    return llama(argv, model_path)


def completed(pool: KvPool | None, argv: Sequence[str],
              model_path: str | None = None) -> KvPool | None:
    """The log's pool with the bytes per token the model gives where the log gave none."""
    if pool is not None and pool.bytes_per_token is not None:
        return pool
    found = from_command(argv, model_path)
    if found is None:
        return pool
    if pool is None:
        return found
    return KvPool(pool.tokens, found.bytes_per_token, pool.cache_type or found.cache_type,
                  pool.max_concurrency, pool.at_tokens, (*pool.said, *found.said),
                  f"{pool.source} (tokens), {found.source} (bytes)")
