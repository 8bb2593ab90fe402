"""The few numbers of a GGUF model file's header that size its KV cache (llama.cpp's format:
github.com/ggml-org/ggml docs/gguf.md), read without the rest of the file.

The header is: magic `GGUF`, a uint32 version (2 or 3), uint64 tensor and key-value counts,
then the key-value pairs, each a string key (uint64 length, UTF-8), a uint32 value type and
the value. Only scalars and short arrays of scalars under the kept keys are kept, an array
read in one unpack; every other value (the tokenizer's vocabulary is an array of 49,152
strings in a small model) is skipped by its lengths, an array of fixed-size elements in one
seek. The path is a server's word: it is opened without blocking and read only if it is a
regular file (a FIFO cannot hang kveval), and every count and length is bounded, as are the
header's bytes, the strings read one at a time and the time it takes, so a header costs
what its bytes cost. A file that does not parse is `None`, never an exception (the model's
KV size is a reported figure, not a judgement).
"""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path
from typing import IO, Any

from kveval.errors import KvevalError
from kveval.formats.limits import open_regular

MAGIC = b"GGUF"
MAX_PAIRS = 1 << 16
MAX_ARRAY = 1 << 24
MAX_STRING = 1 << 24
MAX_HEADER = 256 << 20  # bytes of the file the header may span
MAX_ITEMS = 1 << 20  # strings in arrays, read one at a time: a vocabulary and its merges
TIME_LIMIT = 2.0  # seconds a header may take to read
MAX_FILE = 1 << 50  # a model file of any real size
CHUNK = 1 << 20
LAYERS_MAX = 1 << 12  # a per-layer array longer than this is kept as unknown
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
           12: "d"}
STRING, ARRAY = 8, 9
_STRUCTS = {fmt: struct.Struct("<" + fmt) for fmt in (*SCALARS.values(), "I", "Q")}
KEPT = ("general.architecture", ".block_count", ".embedding_length", ".attention.head_count",
        ".attention.head_count_kv", ".attention.key_length", ".attention.value_length")


class _Bad(Exception):
    pass


class _Header:
    """The header's bytes as the parse asks for them: read in chunks, skipped by seeking,
    never past MAX_HEADER bytes or the file's end, MAX_ITEMS strings or the time limit."""

    def __init__(self, fh: IO[bytes], size: int) -> None:
        self.fh, self.end = fh, min(size, MAX_HEADER)
        self.deadline = time.monotonic() + TIME_LIMIT
        self.buf, self.pos, self.offset, self.items = b"", 0, 0, 0

    def take(self, size: int) -> bytes:
        if self.pos + size > len(self.buf):
            self._fill(size)
        self.pos += size
        return self.buf[self.pos - size:self.pos]

    def _fill(self, size: int) -> None:
        if self.offset + self.pos + size > self.end or time.monotonic() > self.deadline:
            raise _Bad
        rest = self.buf[self.pos:]
        self.offset += self.pos
        more = self.fh.read(max(size - len(rest), CHUNK))
        self.buf, self.pos = rest + more, 0
        if len(self.buf) < size:
            raise _Bad

    def skip(self, size: int) -> None:
        if self.offset + self.pos + size > self.end:
            raise _Bad
        if self.pos + size <= len(self.buf):
            self.pos += size
            return
        self.fh.seek(self.offset + self.pos + size)
        self.offset, self.buf, self.pos = self.offset + self.pos + size, b"", 0

    def unpack(self, fmt: str) -> Any:
        form = _STRUCTS[fmt]
        if self.pos + form.size > len(self.buf):
            self._fill(form.size)
        self.pos += form.size
        return form.unpack_from(self.buf, self.pos - form.size)[0]

    def count(self, items: int) -> None:
        self.items += items
        if self.items > MAX_ITEMS:
            raise _Bad


def _string(src: _Header, keep: bool = True) -> str:
    size = src.unpack("Q")
    if size > MAX_STRING:
        raise _Bad
    if not keep:
        src.skip(size)
        return ""
    return src.take(size).decode("utf-8", "replace")


def _array(src: _Header, keep: bool) -> Any:
    inner, count = src.unpack("I"), src.unpack("Q")
    if count > MAX_ARRAY:
        raise _Bad
    if inner in SCALARS:
        fmt = f"<{count}{SCALARS[inner]}"
        if not keep or count > LAYERS_MAX:
            src.skip(struct.calcsize(fmt))
            return None
        return list(struct.unpack(fmt, src.take(struct.calcsize(fmt))))
    if inner != STRING:  # llama.cpp loads no array of arrays
        raise _Bad
    src.count(count)
    for _ in range(count):
        _string(src, False)
    return None


def _value(src: _Header, kind: int, keep: bool) -> Any:
    if kind in SCALARS:
        return src.unpack(SCALARS[kind])
    if kind == STRING:
        return _string(src, keep)
    if kind != ARRAY:
        raise _Bad
    return _array(src, keep)


def _wanted(key: str) -> bool:
    return key == KEPT[0] or any(key.endswith(end) for end in KEPT[1:])


def read_header(fh: IO[bytes], size: int = MAX_HEADER) -> dict[str, Any]:
    """The kept keys' values of the header of a file of `size` bytes."""
    src = _Header(fh, size)
    if src.take(4) != MAGIC or src.unpack("I") not in (2, 3):
        raise _Bad
    src.unpack("Q")  # tensors
    pairs = src.unpack("Q")
    if pairs > MAX_PAIRS:
        raise _Bad
    found = {}
    for _ in range(pairs):
        key = _string(src)
        keep = _wanted(key)
        value = _value(src, src.unpack("I"), keep)
        if keep:
            found[key] = value
    return found


def kv_shape(path: str | Path) -> dict[str, Any] | None:
    """The architecture's KV numbers from a GGUF file's header (`block_count`, `head_count`,
    `head_count_kv` (one or per layer), `embedding_length`, `key_length`, `value_length`),
    or None where the path is not a regular file that can be read as GGUF."""
    try:
        with open_regular(path, MAX_FILE) as fh:
            header = read_header(fh, os.fstat(fh.fileno()).st_size)
    except (OSError, KvevalError, _Bad, struct.error, ValueError):
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
