"""Fuzz: teacher forcing by every method (llama-server's forced decoding, vLLM's
prompt_logprobs, SGLang's /generate, echo), and `kveval check` against the same servers, each
a fake in its server's shape (tests/fake_engines.py) whose replies hypothesis makes hostile:
any field of any reply (/tokenize, /completion, /generate, /v1/completions, /props) replaced
by a hostile value (tests/fuzz.py), on every reply or only some. Beside the property of
tests/fuzz.py: a bad position is an error item, never a traceback, and what `run` writes,
kveval reads back."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_engines import ToyModel, llama_server, sglang, vllm
from fake_server import Behaviour, FakeServer
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kveval.formats.reader import read_run
from tests.clirun import kveval
from tests.fuzz import SECRET, check, dumps, hostile, spellings

TOKENS = ["red", " green"]
ANSWER = "".join(TOKENS)
TOP = {"x": 0.6, "y": 0.3}


def baseline(path: Path) -> Path:
    """Three completions answers with their tokens' log-probabilities, as a run records."""
    lp = {"k": 2, "tokens": TOKENS, "logprobs": [math.log(0.6)] * 2,
          "top_tokens": [[t, "y"] for t in TOKENS],
          "top_logprobs": [[math.log(0.6), math.log(0.3)]] * 2}
    head = {"type": "run", "schema_version": 1, "label": "base", "endpoint": "http://h/v1",
            "model": "m", "tasks": [{"name": "prompts", "adapter": "prompts",
                                     "api": "completions", "max_tokens": 8, "stop": [],
                                     "temperature": 0.0, "limit": None, "params": {}}],
            "sampling": {"temperature": 0.0, "seed": 1}, "concurrency": 2, "fingerprint": {},
            "created": "2026-01-01T00:00:00+00:00", "kveval_version": "0.1.0"}
    items = [{"type": "item", "task": "prompts", "item_id": f"p{i}", "prompt_sha256": f"h{i}",
              "request": {"prompt": f"Say {i}.", "max_tokens": 8}, "status": "ok",
              "output": ANSWER, "finish_reason": "stop", "logprobs": lp} for i in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in [head, *items]))
    return path


BESIDE = {"index", "created", "usage", "tokens_cached", "meta_info.prompt_tokens",
          "finish_reason", "length"}  # numbers no method reads a position from


def nodes(value: Any, numbers: bool, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value, in a fixed order: each dict value and list element; with
    `numbers`, those holding a number a position is read from (a log-probability, a rank,
    an id) only."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    found = [path] if path and (number or not numbers) else []
    if isinstance(value, dict):
        for key in value:
            if numbers and key in BESIDE:
                continue
            found += nodes(value[key], numbers, (*path, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            found += nodes(inner, numbers, (*path, i))
    return found


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = replaced(value[path[0]], path[1:], new)
    return copy


# which place (modulo the reply's places, its numbers' only or any), the hostile value
Change = tuple[int, bool, Any]


def hostile_route(route: Callable[[dict[str, Any]], Any], changes: list[Change],
                  every: int) -> Callable[[dict[str, Any]], Any]:
    """The route's replies with `changes` planted in every `every`-th one (JSON text:
    NaN, lone surrogates and 100,000-deep nesting as a server may send them)."""
    count = [0]

    def answer(body: dict[str, Any]) -> Any:
        try:
            reply = route(body)
        except Exception:  # noqa: BLE001 - ids the toy model never made: answer, never hang
            return {"error": {"message": "unknown token id"}}
        count[0] += 1
        if count[0] % every == 0:
            for at, numbers, value in changes:
                places = nodes(reply, numbers) or nodes(reply, False)
                if places:  # numbers: one of the last 8, where the answer's positions are
                    at = len(places) - 1 - at % min(8, len(places)) if numbers else at
                    reply = replaced(reply, places[at % len(places)], value)
        return dumps(reply).encode("utf-8", "surrogatepass")
    return answer


def echo_logprobs(body: dict[str, Any], text: str) -> Any:
    """An echo server's legacy log-probabilities: the prompt's token, the answer's, one more."""
    alts = [{t: math.log(0.6), "y": math.log(0.3)} for t in TOKENS]
    if not body.get("echo"):
        return {"tokens": TOKENS, "token_logprobs": [math.log(0.6)] * 2, "top_logprobs": alts,
                "text_offset": [0, 3]}
    start = len(body["prompt"]) - len(ANSWER)
    return {"tokens": ["P", *TOKENS, "!"], "token_logprobs": [None, *[math.log(0.6)] * 2, 0.0],
            "top_logprobs": [None, *alts, {"!": 0.0}],
            "text_offset": [0, start, start + 3, len(body["prompt"])]}


def echo_server(**kw: Any) -> FakeServer:
    return FakeServer(Behaviour(
        answer=lambda body: body["prompt"] + "!" if body.get("echo") else ANSWER,
        logprobs=echo_logprobs, **kw))


def engine(method: str, path: str, changes: list[Change], every: int) -> FakeServer:
    """A fake of the method's server whose replies on `path` are hostile."""
    model = ToyModel(list(TOKENS), dict(TOP))
    if method == "echo":
        server = echo_server()
        logprobs = server.behaviour.logprobs
        assert logprobs is not None
        server.behaviour.logprobs = lambda body, text: json.loads(
            hostile_route(lambda b: logprobs(b, text), changes, every)(body))
    else:
        make = {"forced_decoding": llama_server, "prompt_logprobs": vllm,
                "sglang_generate": sglang}[method]
        server = make(model)
        routes = server.behaviour.post_routes
        routes[path] = hostile_route(routes[path], changes, every)
    server._httpd.handle_error = lambda *args: None  # type: ignore[method-assign]
    return server


PATHS = {"forced_decoding": ["/completion", "/tokenize"],
         "prompt_logprobs": ["/v1/completions", "/tokenize"],
         "sglang_generate": ["/generate", "/tokenize"], "echo": ["/v1/completions"]}
# what a reply's field holds where the fuzz puts it: mostly a value one step from a valid
# one (NaN, +inf, +5.0, a rank of 'first', an id of 'abc', a piece of [104, 'x', 3]), else
# anything
NEAR_VALID = st.sampled_from([math.nan, math.inf, -math.inf, 5.0, 1e308, -1e308, -0.0,
                              "first", "abc", "", None, True, [104, "x", 3], {}, [], -1,
                              2**64, 10**9, SECRET, f"Bearer {SECRET}"])
CHANGES = st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from([True, True, False]),
                             st.one_of(NEAR_VALID, NEAR_VALID, hostile())),
                   min_size=1, max_size=3)


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVEVAL_API_KEY", SECRET)


@pytest.mark.parametrize("method", list(PATHS))
def test_fuzz_teacher_forcing_by_every_method(capsys: Any, method: str) -> None:
    """`run --teacher-force` and `check --json` on a hostile server of the method's kind."""
    @settings(max_examples=max(5, settings.default.max_examples // 4))
    @given(path=st.sampled_from(PATHS[method]), changes=CHANGES,
           every=st.sampled_from([1, 2, 3]), command=st.sampled_from(["run", "check"]))
    def fuzz(path: str, changes: list[Change], every: int, command: str) -> None:
        with tempfile.TemporaryDirectory() as tmp, engine(method, path, changes,
                                                          every) as server:
            base, out = baseline(Path(tmp) / "base.jsonl"), Path(tmp) / "tf.jsonl"
            if command == "check":
                code, stdout, stderr = kveval(capsys, "check", "--endpoint", server.base_url,
                                              "--json")
                check("check", code, stdout, stderr, secrets=spellings(SECRET),
                      json_out=True)
                event(f"{method} check exit {code}")
                return
            code, stdout, stderr = kveval(
                capsys, "run", "--endpoint", server.base_url, "--teacher-force", str(base),
                "--logprobs", "2", "-o", str(out), "--retries", "0", "--timeout", "5")
            check("run", code, stdout, stderr, written=[out], secrets=spellings(SECRET))
            event(f"{method} {path} run exit {code}")
            if out.exists():
                on_file = read_run(out)  # what kveval writes, kveval reads back
                assert all(item.ok or item.error for item in on_file.items)
            else:
                assert code == 2

    fuzz()
