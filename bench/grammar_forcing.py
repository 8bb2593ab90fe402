"""Forced decoding (one request per answer token) against a grammar that forces the whole
answer in one request, on a real llama-server: how often the grammar's tokens are the
baseline's, how far its top-K is from forced decoding's, and the time of each.

With a grammar of exactly the answer's text, llama-server still reports `n_probs` from the
raw logits (before its samplers), so each generated position's top-K is the unconstrained
distribution; but the grammar fixes characters, not tokens: at each step the server takes the
most likely token that fits the rest of the text, which need not be the baseline's.

    python bench/grammar_forcing.py --baseline results/bench-tf/baseline.jsonl [--items 10]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from llama_server import BINARY, llama_server  # noqa: E402

from kveval.formats.reader import read_run  # noqa: E402
from kveval.judge.kl_bound import kl_topk  # noqa: E402
from kveval.run.forcing.token_ids import recorded_tokens  # noqa: E402


def post(root: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(root + path, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as reply:
        return dict(json.loads(reply.read()))


def gbnf(text: str) -> str:
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\r", "\\r").replace("\t", "\\t"))
    return f'root ::= "{escaped}"'


def prompt_ids(root: str, request: dict) -> list[int]:
    text = request.get("prompt")
    if text is None:
        text = post(root, "/apply-template", {"messages": request["messages"]})["prompt"]
    return list(post(root, "/tokenize", {"content": text, "add_special": True,
                                         "parse_special": True})["tokens"])


def exact_ids(root: str, pieces: list[str]) -> list[int] | None:
    ids = []
    for piece in pieces:
        one = post(root, "/tokenize", {"content": piece, "parse_special": False})["tokens"]
        if len(one) != 1:
            return None
        ids.append(one[0])
    return ids


def dist(entry: dict) -> dict[str, float]:
    import math

    return {str(t["token"]): math.exp(t["logprob"]) for t in entry["top_logprobs"]}


def one_item(root: str, record) -> dict | None:
    pieces = recorded_tokens(record.logprobs, record.output or "")
    ids = exact_ids(root, pieces) if pieces else None
    if not ids:
        return None
    prompt = prompt_ids(root, record.request)
    started = time.perf_counter()
    forced = [post(root, "/completion", {"prompt": prompt + ids[:i], "n_predict": 1,
                                         "n_probs": 5, "temperature": 0, "cache_prompt": True,
                                         "id_slot": 0})["completion_probabilities"][0]
              for i in range(len(ids))]
    forced_s = time.perf_counter() - started
    started = time.perf_counter()
    reply = post(root, "/completion", {"prompt": prompt, "n_predict": len(ids), "n_probs": 5,
                                       "temperature": 0, "grammar": gbnf(record.output or ""),
                                       "cache_prompt": True, "id_slot": 0,
                                       "return_tokens": True})
    grammar_s = time.perf_counter() - started
    got = reply.get("tokens") or [p["id"] for p in reply["completion_probabilities"]]
    same = got[: len(ids)] == ids
    kls = [kl_topk(dist(f), dist(g)) for f, g in zip(forced, reply["completion_probabilities"],
                                                      strict=False)] if same else []
    return {"tokens": len(ids), "same": same, "forced_s": forced_s, "grammar_s": grammar_s,
            "kl": max(kls) if kls else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--items", type=int, default=10, help="of each task")
    parser.add_argument("--server", type=Path, default=BINARY)
    args = parser.parse_args()
    from kveval.run.engine_setup import bundled_model_path

    base = read_run(args.baseline)
    picked, counts = [], {}
    for record in base.items:
        if record.ok and record.output and counts.get(record.task, 0) < args.items:
            counts[record.task] = counts.get(record.task, 0) + 1
            picked.append(record)
    with llama_server(bundled_model_path(), "f16", slots=1, binary=args.server) as url:
        rows = [r for r in (one_item(url[:-3], record) for record in picked) if r]
    tokens = sum(r["tokens"] for r in rows)
    same = [r for r in rows if r["same"]]
    print(f"{len(rows)} items, {tokens} answer tokens (the first {args.items} of each task)")
    print(f"grammar's tokens are the baseline's in {len(same)} of {len(rows)} items")
    print(f"forced decoding: {sum(r['forced_s'] for r in rows):.1f} s, {tokens} requests; "
          f"grammar: {sum(r['grammar_s'] for r in rows):.1f} s, {len(rows)} requests")
    worst = max((r["kl"] for r in same if r["kl"] is not None), default=None)
    print(f"largest per-position KL between the two where tokens agree: {worst}")


if __name__ == "__main__":
    main()
