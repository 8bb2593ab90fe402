"""How much of the full-vocabulary KL the top-K bound captures (judge/divergence.py's
estimator), where full distributions exist: the embedded engine's own model through
llama-cpp-python with `logits_all`, f16 KV as the base, q8_0 and q4_0 as the candidates.

The same GSM8K test texts (question and answer) are evaluated under each KV cache type; per
position the full KL(f16 || other) over the whole vocabulary is computed from the logits, and
the top-K bound from each side's top K alone. Prints, per cache type and K, the mean full KL,
the mean bound, and the capture share sum(bound) / sum(full) with its position-level median.

    python bench/topk_capture.py [--data ../shared/data/gsm8k] [--items 12]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kveval.judge.divergence import kl_topk  # noqa: E402
from kveval.run.engine_setup import KV_CACHE_TYPES, bundled_model_path  # noqa: E402

KS = (5, 20)


def texts(data: Path, items: int) -> list[str]:
    lines = (data / "test.jsonl").read_text().splitlines()[:items]
    return [f"Question: {json.loads(x)['question']}\nAnswer: {json.loads(x)['answer']}"
            for x in lines]


def log_probs(kv: str, docs: list[str], threads: int) -> list[np.ndarray]:
    """Each text's per-position log-softmax over the vocabulary, under one KV cache type."""
    from llama_cpp import Llama

    llm = Llama(str(bundled_model_path()), n_ctx=1024, n_batch=512, logits_all=True,
                type_k=KV_CACHE_TYPES[kv], type_v=KV_CACHE_TYPES[kv], flash_attn=True,
                n_threads=threads, verbose=False)
    out = []
    for doc in docs:
        tokens = llm.tokenize(doc.encode())
        llm.reset()
        llm.eval(tokens)
        logits = np.array(llm.scores[: len(tokens)], dtype=np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        out.append(logits - np.log(np.exp(logits).sum(axis=1, keepdims=True)))
    return out


def top(row: np.ndarray, k: int) -> dict[str, float]:
    idx = np.argpartition(-row, k)[:k]
    return {str(i): float(np.exp(row[i])) for i in idx}


def shares(base: list[np.ndarray], other: list[np.ndarray]) -> dict[str, object]:
    full, bounds = [], {k: [] for k in KS}
    for b, o in zip(base, other, strict=True):
        p = np.exp(b)
        full.extend((p * (b - o)).sum(axis=1))
        for k in KS:
            bounds[k].extend(kl_topk(top(b[i], k), top(o[i], k)) for i in range(len(b)))
    f = np.maximum(np.array(full), 0.0)
    found: dict[str, object] = {"positions": len(f), "full": float(f.mean())}
    for k in KS:
        bound = np.array(bounds[k])
        mask = f > 1e-6
        share = float(bound.sum() / f.sum()) if f.sum() > 0 else float("nan")
        found[f"top{k}"] = (float(bound.mean()), share,
                            float(np.median(bound[mask] / f[mask])) if mask.any() else float("nan"))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "gsm8k")
    parser.add_argument("--items", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    docs = texts(args.data, args.items)
    base = log_probs("f16", docs, args.threads)
    print(f"{args.items} GSM8K test texts, SmolLM2-135M (the bundled GGUF), f16 KV as the base")
    print(f"{'KV':<6} {'positions':>9} {'full KL':>9} "
          + " ".join(f"{'top-' + str(k) + ' bound':>13} {'share':>6} {'median':>6}" for k in KS))
    for kv in ("f16", "q8_0", "q4_0"):
        found = shares(base, base if kv == "f16" else log_probs(kv, docs, args.threads))
        cells = " ".join(f"{found[f'top{k}'][0]:>13.6f} {found[f'top{k}'][1]:>6.1%} "  # type: ignore[index]
                         f"{found[f'top{k}'][2]:>6.1%}" for k in KS)  # type: ignore[index]
        print(f"{kv:<6} {found['positions']:>9} {found['full']:>9.6f} {cells}")


if __name__ == "__main__":
    main()
