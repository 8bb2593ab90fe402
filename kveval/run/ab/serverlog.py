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

Every figure is parsed once and bounded (formats/numbers.py): one that is not a number or lies
outside a sane range (`size = 1.2.3 MiB`, a count of 400 digits) is unknown, with a warning
naming its log line, never an error.
"""

from __future__ import annotations

import re

import click

from kveval.formats.figures import KvPool
from kveval.formats.numbers import amount, count

MiB, GiB = 1 << 20, 1 << 30
_NUMBER = r"(\d[\d,]*)"
_AMOUNT = r"(\d[\d.]*)"
_LLAMA_SIZE = re.compile(
    r"llama_kv_cache\w*: size =\s*" + _AMOUNT + r" MiB \(\s*(\d+) cells,\s*\d+ layers,\s*\d+/(\d+) "
    r"seqs\), K \((\w+)\):\s*[\d.]+ MiB, V \((\w+)\)")
_LLAMA_SLOTS = re.compile(r"n_slots = (\d+), n_ctx_slot = (\d+), kv_unified = '(\w+)'")
_LLAMA_CTX = re.compile(r"llama_context: n_ctx\s*=\s*(\d+)")
_VLLM_TOKENS = re.compile(r"KV cache size: " + _NUMBER + " tokens")
_VLLM_MEMORY = re.compile(r"Available KV cache memory: " + _AMOUNT + " GiB")
_VLLM_CONCURRENCY = re.compile(r"Maximum concurrency for " + _NUMBER +
                               r" tokens per request: " + _AMOUNT + "x")
_SGLANG = re.compile(r"KV Cache is allocated\. #tokens: (\d+), (?:K size: " + _AMOUNT +
                     " GB, V size: " + _AMOUNT + " GB|KV size: " + _AMOUNT + " GB)")


def _line(text: str, match: re.Match[str]) -> str:
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start:end if end != -1 else len(text)].strip()[:300]


class _Reading:
    """One start's output, and the log lines whose figures were not numbers in range."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.unknown: list[str] = []

    def _seen(self, found: float | None, match: re.Match[str]) -> None:
        line = _line(self.text, match)
        if found is None and line not in self.unknown:
            self.unknown.append(line)

    def count(self, match: re.Match[str], group: int, least: int = 1) -> int | None:
        found = count(match[group], least)
        self._seen(found, match)
        return found

    def amount(self, match: re.Match[str], group: int) -> float | None:
        found = amount(match[group])
        self._seen(found, match)
        return found

    def ratio(self, size: float | None, tokens: int | None) -> float | None:
        return size / tokens if size is not None and tokens else None


def _llama_tokens(r: _Reading, sizes: list[re.Match[str]], slots: re.Match[str] | None,
                  ctx: re.Match[str] | None) -> int | None:
    if slots:
        n, per_slot = r.count(slots, 1), r.count(slots, 2)
        if n is None or per_slot is None:
            return None
        return count(per_slot if slots[3] == "true" else n * per_slot, 1)
    if ctx:
        return r.count(ctx, 1)
    cells, seqs = r.count(sizes[0], 2), r.count(sizes[0], 3)
    return count(cells * seqs, 1) if cells is not None and seqs is not None else None


def _llama(r: _Reading) -> KvPool | None:
    sizes = list(_LLAMA_SIZE.finditer(r.text))
    slots = _LLAMA_SLOTS.search(r.text)
    if not sizes and not slots:
        return None
    tokens = _llama_tokens(r, sizes, slots, _LLAMA_CTX.search(r.text))
    parts = [r.amount(m, 1) for m in sizes]
    size = sum(p for p in parts if p is not None) * MiB if parts and None not in parts else None
    said = tuple(_line(r.text, m) for m in [*sizes, *([slots] if slots else [])])
    return KvPool(tokens, r.ratio(size, tokens),
                  _cache_type(sizes[0][4], sizes[0][5]) if sizes else None, said=said)


def _cache_type(k: str, v: str) -> str:
    return k if k == v else f"K {k}, V {v}"


def _vllm(r: _Reading) -> KvPool | None:
    tokens = _last(_VLLM_TOKENS, r.text)
    if tokens is None:
        return None
    memory = _last(_VLLM_MEMORY, r.text)
    concurrency = _last(_VLLM_CONCURRENCY, r.text)
    number = r.count(tokens, 1)
    gib = r.amount(memory, 1) if memory else None
    found = [m for m in (tokens, memory, concurrency) if m is not None]
    return KvPool(number, r.ratio(gib * GiB if gib else None, number),
                  max_concurrency=r.amount(concurrency, 2) if concurrency else None,
                  at_tokens=r.count(concurrency, 1) if concurrency else None,
                  said=tuple(_line(r.text, m) for m in found))


def _sglang(r: _Reading) -> KvPool | None:
    found = _last(_SGLANG, r.text)
    if found is None:
        return None
    number = r.count(found, 1)
    parts = [r.amount(found, 2), r.amount(found, 3)] if found[2] else [r.amount(found, 4)]
    size = sum(p for p in parts if p is not None) * GiB if None not in parts else None
    return KvPool(number, r.ratio(size, number), said=(_line(r.text, found),))


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    found = None
    for found in pattern.finditer(text):  # noqa: B007 - the last one is wanted
        pass
    return found


def read_pool(text: str) -> tuple[KvPool | None, tuple[str, ...]]:
    """The KV pool one start's output tells (None where it says nothing known), and the log
    lines whose figures were not numbers in range (those figures unknown)."""
    reading = _Reading(text)
    for read in (_vllm, _sglang, _llama):
        pool = read(reading)
        if pool is not None:
            return pool, tuple(reading.unknown)
    return None, ()


def kv_pool(text: str) -> KvPool | None:
    """`read_pool`, with a warning for each figure it could not take."""
    pool, unknown = read_pool(text)
    for line in unknown:
        click.echo(f"warning: the server's log says `{line}`: a figure in it is not a "
                   "number in range; the trade shows it as unknown", err=True)
    return pool
