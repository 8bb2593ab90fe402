"""An asyncio OpenAI-compatible stub for benchmarks: fixed latency, GSM8K-shaped answers.

A separate process on 127.0.0.1 at a free port; prints its base URL on the first line.

    python bench/stub_server.py --latency-ms 50
"""

from __future__ import annotations

import argparse
import asyncio
import socket

from aiohttp import web

ANSWER = "Adding them up gives 18.\n#### 18"
USAGE = {"prompt_tokens": 900, "completion_tokens": 12, "total_tokens": 912}


def app(latency_s: float) -> web.Application:
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
    return application


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)
    web.run_app(app(args.latency_ms / 1000), sock=sock, print=None, access_log=None,
                backlog=1024)


if __name__ == "__main__":
    main()
