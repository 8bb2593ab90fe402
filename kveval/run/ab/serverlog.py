"""The KV pool a server's own log tells, read from one start's output (pure).

- llama.cpp (llama-server, Ollama's runner): `llama_kv_cache: size = 47.81 MiB (2048 cells,
  30 layers, 2/2 seqs), K (q8_0): 23.91 MiB, V (q8_0): 23.91 MiB` (llama-server prints it at
  `-lv 4`), and at its default verbosity `n_slots = 2, n_ctx_slot = 2048, kv_unified =
  'false'`, which gives the pool's tokens.
- vLLM: `GPU KV cache size: 1,234,560 tokens`, `Available KV cache memory: 20.5 GiB` and
  `Maximum concurrency for 4,096 tokens per request: 301.41x`.
- SGLang: `KV Cache is allocated. #tokens: 1234567, K size: 10.23 GB, V size: 10.23 GB`,
  or with an MLA model's one pool `KV Cache is allocated. #tokens: 524288, KV size: 17.16 GB`
  (its GB is 2**30 bytes).
"""

from __future__ import annotations

import re

from kveval.formats.figures import KvPool

MiB, GiB = 1 << 20, 1 << 30
_NUMBER = r"([\d][\d,]*)"
_LLAMA_SIZE = re.compile(
    r"llama_kv_cache\w*: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*\d+ layers,\s*\d+/(\d+) "
    r"seqs\), K \((\w+)\):\s*[\d.]+ MiB, V \((\w+)\)")
_LLAMA_SLOTS = re.compile(r"n_slots = (\d+), n_ctx_slot = (\d+), kv_unified = '(\w+)'")
_LLAMA_CTX = re.compile(r"llama_context: n_ctx\s*=\s*(\d+)")
_VLLM_TOKENS = re.compile(r"KV cache size: " + _NUMBER + " tokens")
_VLLM_MEMORY = re.compile(r"Available KV cache memory: ([\d.]+) GiB")
_VLLM_CONCURRENCY = re.compile(r"Maximum concurrency for " + _NUMBER +
                               r" tokens per request: ([\d.]+)x")
_SGLANG = re.compile(r"KV Cache is allocated\. #tokens: (\d+), (?:K size: ([\d.]+) GB, "
                     r"V size: ([\d.]+) GB|KV size: ([\d.]+) GB)")


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _line(text: str, match: re.Match[str]) -> str:
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start:end if end != -1 else len(text)].strip()[:300]


def _llama(text: str) -> KvPool | None:
    sizes = list(_LLAMA_SIZE.finditer(text))
    slots = _LLAMA_SLOTS.search(text)
    ctx = _LLAMA_CTX.search(text)
    if not sizes and not slots:
        return None
    tokens = None
    if slots:
        n, per_slot, unified = int(slots[1]), int(slots[2]), slots[3] == "true"
        tokens = per_slot if unified else n * per_slot
    elif ctx:
        tokens = int(ctx[1])
    elif sizes:
        tokens = int(sizes[0][2]) * int(sizes[0][3])
    size = sum(float(m[1]) for m in sizes) * MiB
    said = tuple(_line(text, m) for m in [*sizes, *([slots] if slots else [])])
    return KvPool(tokens, size / tokens if sizes and tokens else None,
                  _cache_type(sizes[0][4], sizes[0][5]) if sizes else None, said=said)


def _cache_type(k: str, v: str) -> str:
    return k if k == v else f"K {k}, V {v}"


def _vllm(text: str) -> KvPool | None:
    tokens = _last(_VLLM_TOKENS, text)
    if tokens is None:
        return None
    memory = _last(_VLLM_MEMORY, text)
    concurrency = _last(_VLLM_CONCURRENCY, text)
    count = _int(tokens[1])
    found = [m for m in (tokens, memory, concurrency) if m is not None]
    return KvPool(count, float(memory[1]) * GiB / count if memory and count else None,
                  max_concurrency=float(concurrency[2]) if concurrency else None,
                  at_tokens=_int(concurrency[1]) if concurrency else None,
                  said=tuple(_line(text, m) for m in found))


def _sglang(text: str) -> KvPool | None:
    found = _last(_SGLANG, text)
    if found is None:
        return None
    count = int(found[1])
    size = (float(found[2]) + float(found[3]) if found[2] else float(found[4])) * GiB
    return KvPool(count, size / count if count else None, said=(_line(text, found),))


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    found = None
    for found in pattern.finditer(text):  # noqa: B007 - the last one is wanted
        pass
    return found


def kv_pool(text: str) -> KvPool | None:
    """The KV pool one start's output tells, or None where it says nothing known."""
    for read in (_vllm, _sglang, _llama):
        pool = read(text)
        if pool is not None:
            return pool
    return None
