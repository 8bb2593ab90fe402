"""How much of the full-vocabulary KL the top-K bound captures (judge/divergence.py's
estimator), where full distributions exist: the embedded engine's own model through
llama-cpp-python with `logits_all`, f16 KV as the base, q8_0 and q4_0 as the candidates.

The same GSM8K test texts (question and answer) are evaluated under each KV cache type; per
position the full KL(f16 || other) over the whole vocabulary is computed from the logits, and
the top-K bound from each side's top K alone, twice: keyed by token id, and keyed by text as a
run file records it (each id's text as llama-server sends it, the valid UTF-8 head of its
bytes; two ids of one text summed by run/logprobs.py `outcomes`). Prints, per cache type and
K, the mean full KL, the mean bound, and the capture share sum(bound) / sum(full) with its
position-level median, and how many positions' top-K held two ids of one text.

    python bench/topk_capture.py [--data ../shared/data/gsm8k] [--items 12]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kveval.judge.kl_bound import kl_topk  # noqa: E402
from kveval.run.engine_setup import KV_CACHE_TYPES, bundled_model_path  # noqa: E402
from kveval.run.logprobs import outcomes  # noqa: E402

KS = (5, 20)


def texts(data: Path, items: int) -> list[str]:
    lines = (data / "test.jsonl").read_text().splitlines()[:items]
    return [f"Question: {json.loads(x)['question']}\nAnswer: {json.loads(x)['answer']}"
            for x in lines]


def _model(kv: str, threads: int) -> object:
    from llama_cpp import Llama

    return Llama(str(bundled_model_path()), n_ctx=1024, n_batch=512, logits_all=True,
                 type_k=KV_CACHE_TYPES[kv], type_v=KV_CACHE_TYPES[kv], flash_attn=True,
                 n_threads=threads, verbose=False)


def _valid_head(piece: bytes) -> str:
    """The longest head of the bytes that is valid UTF-8 (llama-server's validate_utf8)."""
    for cut in range(len(piece), max(len(piece) - 4, 0) - 1, -1):
        try:
            return piece[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ""


def texts_of_ids(threads: int) -> list[str]:
    """Every token id's text as llama-server lists it in a top-K."""
    llm = _model("f16", threads)
    return [_valid_head(llm.detokenize([i])) for i in range(llm.n_vocab())]  # type: ignore[attr-defined]


def log_probs(kv: str, docs: list[str], threads: int) -> list[np.ndarray]:
    """Each text's per-position log-softmax over the vocabulary, under one KV cache type."""
    llm: Any = _model(kv, threads)
    out = []
    for doc in docs:
        tokens = llm.tokenize(doc.encode())
        llm.reset()
        llm.eval(tokens)
        logits = np.array(llm.scores[: len(tokens)], dtype=np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        out.append(logits - np.log(np.exp(logits).sum(axis=1, keepdims=True)))
    return out


def top(row: np.ndarray, k: int, texts: list[str] | None = None) -> dict[str, float]:
    """A position's top k: by id, or (texts) by text with two ids of one text summed."""
    idx = np.argpartition(-row, k)[:k]
    if texts is None:
        return {str(i): float(np.exp(row[i])) for i in idx}
    merged = outcomes((texts[i], float(row[i])) for i in idx)
    return {text: float(np.exp(value)) for text, value in merged.items()}


def _summary(bound: np.ndarray, full: np.ndarray) -> tuple[float, float, float]:
    mask = full > 1e-6
    share = float(bound.sum() / full.sum()) if full.sum() > 0 else float("nan")
    median = float(np.median(bound[mask] / full[mask])) if mask.any() else float("nan")
    return float(bound.mean()), share, median


def shares(base: list[np.ndarray], other: list[np.ndarray], texts: list[str]
           ) -> dict[str, Any]:
    full: list[float] = []
    bounds: dict[str, list[float]] = {f"{kind}{k}": [] for k in KS for kind in ("id", "text")}
    shared = {k: 0 for k in KS}
    for b, o in zip(base, other, strict=True):
        full.extend((np.exp(b) * (b - o)).sum(axis=1))
        for k in KS:
            for i in range(len(b)):
                bounds[f"id{k}"].append(kl_topk(top(b[i], k), top(o[i], k)))
                mine, theirs = top(b[i], k, texts), top(o[i], k, texts)
                bounds[f"text{k}"].append(kl_topk(mine, theirs))
                shared[k] += min(len(mine), len(theirs)) < k
    f = np.maximum(np.array(full), 0.0)
    found: dict[str, Any] = {"positions": len(f), "full": float(f.mean()), "shared": shared}
    found.update({key: _summary(np.array(values), f) for key, values in bounds.items()})
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "gsm8k")
    parser.add_argument("--items", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    docs = texts(args.data, args.items)
    names = texts_of_ids(args.threads)
    base = log_probs("f16", docs, args.threads)
    print(f"{args.items} GSM8K test texts, SmolLM2-135M (the bundled GGUF), f16 KV as the base")
    heads = [f"{'top-' + str(k) + ' ' + kind:>13} {'share':>6} {'median':>6}"
             for k in KS for kind in ("ids", "texts")]
    print(f"{'KV':<6} {'positions':>9} {'full KL':>9} " + " ".join(heads)
          + "  positions with two ids of one text (top-5, top-20)")
    for kv in ("f16", "q8_0", "q4_0"):
        found = shares(base, base if kv == "f16" else log_probs(kv, docs, args.threads), names)
        cells = " ".join(f"{found[key][0]:>13.6f} {found[key][1]:>6.1%} {found[key][2]:>6.1%}"
                         for k in KS for key in (f"id{k}", f"text{k}"))
        print(f"{kv:<6} {found['positions']:>9} {found['full']:>9.6f} {cells}  "
              f"{found['shared'][5]}, {found['shared'][20]}")


if __name__ == "__main__":
    main()
