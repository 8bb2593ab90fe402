"""The few numbers of a GGUF model file's header that size its KV cache (llama.cpp's format:
github.com/ggml-org/ggml docs/gguf.md), read without the rest of the file.

The header is: magic `GGUF`, a uint32 version (2 or 3), uint64 tensor and key-value counts,
then the key-value pairs, each a string key (uint64 length, UTF-8), a uint32 value type and
the value. Only scalars and arrays of integers are kept; every other value (the tokenizer's
vocabulary is an array of 49,152 strings in a small model) is skipped by its lengths. The
file is untrusted: every count and length is bounded, and a file that does not parse is
`None`, never an exception (the model's KV size is a reported figure, not a judgement).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import IO, Any

MAGIC = b"GGUF"
MAX_PAIRS = 1 << 16
MAX_ARRAY = 1 << 24
MAX_STRING = 1 << 24
MAX_HEADER = 256 << 20  # bytes of the file the header may span
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
           10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9
KEPT = ("general.architecture", ".block_count", ".embedding_length", ".attention.head_count",
        ".attention.head_count_kv", ".attention.key_length", ".attention.value_length")


class _Bad(Exception):
    pass


def _read(fh: IO[bytes], size: int) -> bytes:
    data = fh.read(size)
    if len(data) != size or fh.tell() > MAX_HEADER:
        raise _Bad
    return data


def _unpack(fh: IO[bytes], fmt: str) -> Any:
    return struct.unpack(fmt, _read(fh, struct.calcsize(fmt)))[0]


def _string(fh: IO[bytes], keep: bool = True) -> str:
    size = _unpack(fh, "<Q")
    if size > MAX_STRING:
        raise _Bad
    if not keep:
        fh.seek(size, 1)
        return ""
    return _read(fh, size).decode("utf-8", "replace")


def _value(fh: IO[bytes], kind: int, keep: bool) -> Any:
    if kind in SCALARS:
        return _unpack(fh, SCALARS[kind])
    if kind == STRING:
        return _string(fh, keep)
    if kind != ARRAY:
        raise _Bad
    inner, count = _unpack(fh, "<I"), _unpack(fh, "<Q")
    if count > MAX_ARRAY:
        raise _Bad
    if inner in SCALARS and not keep:
        fh.seek(count * struct.calcsize(SCALARS[inner]), 1)
        return None
    return [_value(fh, inner, keep) for _ in range(count)]


def _wanted(key: str) -> bool:
    return key == KEPT[0] or any(key.endswith(end) for end in KEPT[1:])


def read_header(fh: IO[bytes]) -> dict[str, Any]:
    if _read(fh, 4) != MAGIC or _unpack(fh, "<I") not in (2, 3):
        raise _Bad
    _unpack(fh, "<Q")  # tensors
    pairs = _unpack(fh, "<Q")
    if pairs > MAX_PAIRS:
        raise _Bad
    found = {}
    for _ in range(pairs):
        key = _string(fh)
        keep = _wanted(key)
        value = _value(fh, _unpack(fh, "<I"), keep)
        if keep:
            found[key] = value
    return found


def kv_shape(path: str | Path) -> dict[str, Any] | None:
    """The architecture's KV numbers from a GGUF file's header (`block_count`, `head_count`,
    `head_count_kv` (one or per layer), `embedding_length`, `key_length`, `value_length`),
    or None where the file cannot be read as GGUF."""
    try:
        with open(path, "rb") as fh:
            header = read_header(fh)
    except (OSError, _Bad, struct.error, RecursionError, ValueError):
        return None
    arch = header.get("general.architecture")
    if not isinstance(arch, str):
        return None
    prefix = f"{arch}."
    return {key[len(prefix):].removeprefix("attention."): value
            for key, value in header.items() if key.startswith(prefix)}


# bytes per element of each KV cache type llama.cpp takes (ggml's block sizes: q8_0 holds 32
# values in 34 bytes)
TYPE_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q5_1": 24 / 32,
              "q5_0": 22 / 32, "q4_1": 20 / 32, "q4_0": 18 / 32, "iq4_nl": 18 / 32}
LAYERS_MAX = 1 << 12


def _per_layer(value: Any, layers: int) -> list[int] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * layers
    if isinstance(value, list) and len(value) == layers and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    return None


def kv_bytes_per_token(shape: dict[str, Any], type_k: str, type_v: str) -> float | None:
    """The KV cache's bytes per token of a model of this shape (kv_shape) with these cache
    types: over its layers, KV heads times (key length times K's bytes per element plus value
    length times V's). None where the shape or a type is not known."""
    layers = shape.get("block_count")
    heads, embd = shape.get("head_count"), shape.get("embedding_length")
    if not isinstance(layers, int) or not 0 < layers <= LAYERS_MAX:
        return None
    kv_heads = _per_layer(shape.get("head_count_kv", heads), layers)
    head = embd // heads if isinstance(embd, int) and isinstance(heads, int) and heads > 0 \
        else None
    k_len, v_len = shape.get("key_length", head), shape.get("value_length", head)
    if kv_heads is None or not isinstance(k_len, int) or not isinstance(v_len, int):
        return None
    if type_k not in TYPE_BYTES or type_v not in TYPE_BYTES:
        return None
    per_head = k_len * TYPE_BYTES[type_k] + v_len * TYPE_BYTES[type_v]
    return float(sum(kv_heads) * per_head) or None
