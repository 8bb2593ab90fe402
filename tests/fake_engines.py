"""Fake servers in the shapes of llama.cpp's llama-server, vLLM and SGLang, over one toy
language model, for teacher forcing and `kveval check`.

The toy tokenizer splits text into words with their leading space (`"red green"` ->
`["red", " green"]`); `<s>` is BOS, added where a request asks for special tokens. The toy
model knows one answer: after any prefix that ends with the first j of its tokens, the next
is token j with the probability `top` gives "x", the rest as `top` says; after the whole
answer it is "!". So every position of a forced answer has a known distribution, and two
fakes with different `top`s differ by a known KL. A name in `top` ending in DUP ("y@dup") is
a token id of its own whose text is the name without it ("y"): two ids of one text, as
byte-level tokenizers have, which each server lists apart.

Shapes, as the servers document them:
- llama-server: POST /tokenize {content, add_special, parse_special, with_pieces},
  /apply-template {messages} -> {prompt}, /completion {prompt: ids, n_predict, n_probs,
  id_slot, cache_prompt} -> completion_probabilities and timings.cache_n; GET /props with
  total_slots. Its slots and prompt cache follow tools/server/server-context.cpp in what
  run/forcing/idle_slots.py reads: with `idle_cache`, a task's start saves every other slot's
  prompt; a slot given a prompt sharing under half of its own saves its own and loads the
  longest saved prefix of the new one.
- vLLM: POST /tokenize {model, prompt | messages} -> {tokens, count, max_model_len};
  /v1/completions with token ids and prompt_logprobs -> choices[0].prompt_logprobs, one
  {id: {logprob, rank, decoded_token}} per prompt token (None first).
- SGLang: GET /get_model_info; POST /tokenize as vLLM's (prompt only); POST /generate
  {input_ids, return_logprob, logprob_start_len, top_logprobs_num, return_text_in_logprobs}
  -> meta_info.input_token_logprobs [[logprob, id, text]] and input_top_logprobs.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fake_server import Behaviour, FakeServer

TEMPLATE = "<|user|> {} <|assistant|>"
DUP = "@dup"
BOS = "<s>"
_WORDS = re.compile(r"<\|\w+\|>|<s>| ?[^ ]+| +")


@dataclass
class ToyModel:
    answer: list[str]  # the answer's tokens
    top: dict[str, float]  # probabilities: "x" is the answer token's, the others as named
    vocab: dict[str, int] = field(default_factory=lambda: {BOS: 1})
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    names: dict[int, str] = field(default_factory=lambda: {1: BOS})  # id -> name

    def id(self, piece: str) -> int:
        with self.lock:
            token = self.vocab.setdefault(piece, len(self.vocab) + 10)
            self.names[token] = piece
            return token

    def piece(self, token: int) -> str:
        return shown(self.names[token])

    def tokenize(self, text: str, special: bool) -> list[int]:
        return ([self.id(BOS)] if special else []) + [self.id(w) for w in _WORDS.findall(text)]

    def text(self, ids: list[int]) -> str:
        return "".join(self.piece(i) for i in ids if i != self.vocab[BOS])

    def next_dist(self, ids: list[int]) -> list[tuple[str, float]]:
        """(piece, log-probability) of the next token, best first."""
        prefix = self.text(ids)
        done = next(j for j in range(len(self.answer), -1, -1)
                    if prefix.endswith("".join(self.answer[:j])))
        best = self.answer[done] if done < len(self.answer) else "!"
        dist = [(best if tok == "x" else tok, math.log(p)) for tok, p in self.top.items()]
        return sorted(dist, key=lambda tp: -tp[1])

    def record(self, path: str, body: dict[str, Any]) -> None:
        with self.lock:
            self.calls.append((path, body))


def shown(name: str) -> str:
    """A token's text: a DUP name's without the suffix."""
    return name.removesuffix(DUP)


def openai_logprobs(max_k: int = 20) -> Callable[[dict[str, Any], str], Any]:
    """Log-probabilities of a /v1 answer in both OpenAI shapes, at most `max_k` of them (vLLM
    refuses more; here they are cut, as a server that ignores the rest would)."""
    def logprobs(body: dict[str, Any], text: str) -> Any:
        k = min(int(body.get("top_logprobs") or body.get("logprobs") or 0), max_k)
        alts = [(f"t{i}", math.log(0.5 ** (i + 1))) for i in range(k)]  # summing below 1
        if "messages" in body:
            return {"content": [{"token": text, "logprob": alts[0][1] if alts else 0.0,
                                 "top_logprobs": [{"token": t, "logprob": v} for t, v in alts]}]}
        return {"tokens": [text], "token_logprobs": [alts[0][1] if alts else 0.0],
                "top_logprobs": [dict(alts)], "text_offset": [0]}
    return logprobs


def _record(model: ToyModel, path: str, fn: Callable[[dict[str, Any]], Any]
            ) -> Callable[[dict[str, Any]], Any]:
    def route(body: dict[str, Any]) -> Any:
        model.record(path, body)
        return fn(body)
    return route


# ---------------------------------------------------------------- llama-server


@dataclass
class PromptCache:
    """llama-server's slots (each holding a prompt) and its host-memory prompt cache."""

    idle_cache: bool
    slots: dict[int, list[int]] = field(default_factory=dict)
    saved: list[list[int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, slot: int, prompt: list[int]) -> int:
        """A task on `slot`: the tokens it finds cached (timings.cache_n)."""
        with self.lock:
            own = self.slots.get(slot, [])
            shared = _prefix(own, prompt)
            if own and shared < len(own) / 2:
                self.saved.append(own)
                shared = max((len(p) for p in self.saved if _prefix(p, prompt) == len(p)),
                             default=0)
            if self.idle_cache:
                self.saved += [p for s, p in self.slots.items() if s != slot and p]
            self.slots[slot] = list(prompt)
            return shared


def _prefix(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


def llama_server(model: ToyModel, slots: int = 4, idle_cache: bool = False,
                 **kw: Any) -> FakeServer:
    cache = PromptCache(idle_cache)

    def tokenize(body: dict[str, Any]) -> Any:
        if not isinstance(body.get("content"), str):
            return {"error": {"code": 400, "message": "\"content\" must be provided"}}
        ids = model.tokenize(body["content"], bool(body.get("add_special")))
        if body.get("with_pieces"):
            return {"tokens": [{"id": i, "piece": model.piece(i)} for i in ids]}
        return {"tokens": ids}

    def completion(body: dict[str, Any]) -> Any:
        dist = model.next_dist(body["prompt"])[: body.get("n_probs") or 0]
        tops = [{"id": model.id(t), "token": shown(t), "bytes": list(shown(t).encode()),
                 "logprob": lp} for t, lp in dist]
        first = {**tops[0], "top_logprobs": tops} if tops else {}
        cached = cache.start(int(body.get("id_slot", 0)), body["prompt"])
        return {"content": shown(dist[0][0]) if dist else "", "stop_type": "limit",
                "completion_probabilities": [first] if tops else [],
                "tokens_cached": len(body["prompt"]) - 1,
                "timings": {"cache_n": cached, "prompt_n": len(body["prompt"]) - cached}}

    def apply_template(body: dict[str, Any]) -> Any:
        return {"prompt": TEMPLATE.format(body["messages"][-1]["content"])}

    routes = {"/tokenize": tokenize, "/completion": completion, "/apply-template": apply_template,
              "/detokenize": lambda b: {"content": model.text(b["tokens"])}}
    props = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": slots,
             "build_info": "b1-toy", "model_path": "toy.gguf"}
    return FakeServer(Behaviour(
        post_routes={p: _record(model, p, f) for p, f in routes.items()},
        extra_routes={"/props": props}, **{"logprobs": openai_logprobs(), **kw}))


# ---------------------------------------------------------------- vLLM


def _openai_tokenize(model: ToyModel, chat: bool) -> Callable[[dict[str, Any]], Any]:
    def tokenize(body: dict[str, Any]) -> Any:
        if "messages" not in body and not isinstance(body.get("prompt"), str):
            return {"detail": "prompt or messages must be provided"}
        if "messages" in body:
            if not chat:
                return {"error": "messages are not supported"}
            ids = model.tokenize(TEMPLATE.format(body["messages"][-1]["content"]), True)
        else:
            ids = model.tokenize(body["prompt"], body.get("add_special_tokens", True))
        return {"tokens": ids, "count": len(ids), "max_model_len": 4096}
    return tokenize


def _prompt_logprobs(model: ToyModel, ids: list[int], k: int) -> list[Any]:
    rows: list[Any] = [None]
    for p in range(1, len(ids)):
        dist = model.next_dist(ids[:p])
        row = {str(model.id(t)): {"logprob": lp, "rank": r + 1, "decoded_token": shown(t)}
               for r, (t, lp) in enumerate(dist[:k])}
        own = model.piece(ids[p])
        if str(ids[p]) not in row:
            rank = next((r + 1 for r, (t, _) in enumerate(dist) if t == own), len(dist) + 1)
            lp = dict(dist).get(own, math.log(1e-4))
            row[str(ids[p])] = {"logprob": lp, "rank": rank, "decoded_token": own}
        rows.append(row)
    return rows


def vllm(model: ToyModel, **kw: Any) -> FakeServer:
    def completions(body: dict[str, Any]) -> Any:
        prompt = body["prompt"]
        if not isinstance(prompt, list):
            lp = openai_logprobs()(body, "Paris") if body.get("logprobs") else None
            return {"id": "c", "object": "text_completion", "model": body["model"],
                    "choices": [{"index": 0, "text": "Paris", "finish_reason": "length",
                                 "logprobs": lp}]}
        rows = _prompt_logprobs(model, prompt, int(body.get("prompt_logprobs") or 0))
        choice = {"index": 0, "text": "!", "finish_reason": "length", "logprobs": None,
                  "prompt_logprobs": rows if body.get("prompt_logprobs") else None}
        return {"id": "c", "object": "text_completion", "model": body["model"],
                "choices": [choice], "usage": {"prompt_tokens": len(prompt)}}

    routes = {"/tokenize": _openai_tokenize(model, chat=True), "/v1/completions": completions}
    return FakeServer(Behaviour(
        post_routes={p: _record(model, p, f) for p, f in routes.items()},
        extra_routes={"/version": {"version": "0.0-toy"},
                      "/metrics": 'vllm:cache_config_info{cache_dtype="fp8",block_size="16"} 1\n'},
        models=[{"id": "fake-model", "max_model_len": 4096}],
        **{"logprobs": openai_logprobs(), **kw}))


# ---------------------------------------------------------------- SGLang


def sglang(model: ToyModel, chat: bool = False, **kw: Any) -> FakeServer:
    def generate(body: dict[str, Any]) -> Any:
        ids, start = body["input_ids"], int(body.get("logprob_start_len", -1))
        k = int(body.get("top_logprobs_num") or 0)
        own: list[Any] = [[None, ids[0], model.piece(ids[0])]] if start == 0 else []
        tops: list[Any] = [None] if start == 0 else []
        for p in range(max(start, 1), len(ids)):
            dist = dict(model.next_dist(ids[:p]))
            piece = model.piece(ids[p])
            own.append([dist.get(piece, math.log(1e-4)), ids[p], piece])
            tops.append([[lp, model.id(t), shown(t)] for t, lp in model.next_dist(ids[:p])[:k]])
        meta = {"input_token_logprobs": own, "input_top_logprobs": tops,
                "finish_reason": {"type": "length", "length": 1}, "prompt_tokens": len(ids)}
        return {"text": "!", "output_ids": [model.id("!")], "meta_info": meta}

    routes = {"/tokenize": _openai_tokenize(model, chat=chat), "/generate": generate}
    return FakeServer(Behaviour(
        post_routes={p: _record(model, p, f) for p, f in routes.items()},
        extra_routes={"/get_model_info": {"model_path": "toy/SmolLM2", "is_generation": True}},
        **{"logprobs": openai_logprobs(), **kw}))
