"""An asyncio OpenAI-compatible stub for benchmarks: fixed latency, GSM8K-shaped answers.

A separate process on 127.0.0.1 at a free port; prints its base URL on the first line.
With --slots N it also answers in llama-server's shapes for forced decoding: /props
(total_slots), /tokenize (a token per word, with pieces) and /completion (n_probs top-K).

    python bench/stub_server.py --latency-ms 50 [--slots 64]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import socket

from aiohttp import web

ANSWER = "Adding them up gives 18.\n#### 18"
USAGE = {"prompt_tokens": 900, "completion_tokens": 12, "total_tokens": 912}


WORDS = re.compile(r" ?[^ ]+| +")
TOP = [{"id": i, "token": t, "bytes": [], "logprob": math.log(p)}
       for i, (t, p) in enumerate([(" the", 0.5), (" a", 0.2), (" 4", 0.1), ("2", 0.05),
                                   (".", 0.05)])]


def llama_routes(application: web.Application, latency_s: float, slots: int) -> None:
    """llama-server's /props, /tokenize and /completion, enough for forced decoding."""
    async def props(request: web.Request) -> web.Response:
        return web.json_response({"total_slots": slots, "build_info": "stub",
                                  "default_generation_settings": {"n_ctx": 8192}})

    async def tokenize(request: web.Request) -> web.Response:
        body = await request.json()
        words = WORDS.findall(body.get("content", ""))
        if body.get("with_pieces"):
            return web.json_response({"tokens": [{"id": 100 + len(w), "piece": w}
                                                 for w in words]})
        return web.json_response({"tokens": [100 + len(w) for w in words]})

    async def completion(request: web.Request) -> web.Response:
        body = await request.json()
        await asyncio.sleep(latency_s)
        top = TOP[: int(body.get("n_probs") or 0)]
        return web.json_response({"content": " the", "stop_type": "limit", "completion_"
                                  "probabilities": [{**TOP[0], "top_logprobs": top}],
                                  "tokens_cached": len(body.get("prompt") or ()) - 1})

    application.router.add_get("/props", props)
    application.router.add_post("/tokenize", tokenize)
    application.router.add_post("/completion", completion)


def app(latency_s: float, slots: int = 0) -> web.Application:
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "stub"}]})

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        await asyncio.sleep(latency_s)
        choice = {"index": 0, "finish_reason": "stop", "text": ANSWER, "logprobs": None}
        return web.json_response({"id": "s", "object": "text_completion", "created": 0,
                                  "model": body.get("model"), "choices": [choice],
                                  "usage": USAGE})

    application = web.Application(client_max_size=64 * 1024 * 1024)
    application.router.add_get("/v1/models", models)
    application.router.add_post("/v1/completions", completions)
    if slots:
        llama_routes(application, latency_s, slots)
    return application


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--slots", type=int, default=0, help="answer as llama-server too")
    args = parser.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)
    web.run_app(app(args.latency_ms / 1000, args.slots), sock=sock, print=None, access_log=None,
                backlog=1024)


if __name__ == "__main__":
    main()
