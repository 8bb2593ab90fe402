"""The cases of bench/hostile/inputs.py on teacher forcing (issue 26): `run --teacher-force`
and `check` against fakes in llama-server's, vLLM's and SGLang's shapes
(tests/fake_engines.py) whose replies are made hostile one field at a time: NaN, infinity,
+5.0, a rank that is not a number, an id that is not one, pieces of the wrong type,
thousands of extra candidates, a billion slots."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit import (
    ROOT,
    Outcome,
    first_failing,
    header,
    judged,
    kveval,
    prompt_item,
    task,
    write_run,
)

sys.path.insert(0, str(ROOT / "tests"))  # fake_engines imports its neighbours by name

from fake_engines import ToyModel, llama_server, sglang, vllm  # noqa: E402

TOKENS = ["red", " green"]
ANSWER = "".join(TOKENS)
P = {"x": 0.6, "y": 0.3}
Edit = Callable[[Any], Any]


def baseline(folder: Path) -> str:
    """Four completions answers with their tokens' log-probabilities, as a run records."""
    lp = {"k": 2, "tokens": TOKENS, "logprobs": [math.log(0.6)] * 2,
          "top_tokens": [[t, "y"] for t in TOKENS], "top_logprobs": [[math.log(0.6),
                                                                      math.log(0.3)]] * 2}
    rows = [prompt_item(i, ANSWER, logprobs=lp, request={"prompt": f"Say {i}.",
                                                        "max_tokens": 8}) for i in range(4)]
    return write_run(folder / "base.jsonl", header("base", [task("prompts")]), rows)


def hostile(make: Callable[..., Any], path: str, edit: Edit, **kw: Any) -> Any:
    """A fake engine whose POST `path` replies pass through `edit` first."""
    server = make(ToyModel(list(TOKENS), dict(P)), **kw)
    routes = server.behaviour.post_routes
    route = routes[path]
    routes[path] = lambda body: edit(route(body))
    server._httpd.handle_error = lambda *args: None
    return server


def kept(path: Path, bad: bool) -> str | None:
    """Every item of a wholly bad exchange an error naming its reason; of a good one, ok."""
    rows = [json.loads(line) for line in path.read_text().splitlines()[1:] if line.strip()]
    ok = sum(row.get("status") == "ok" for row in rows)
    unsaid = sum(row.get("status") == "error" and not row.get("error") for row in rows)
    if bad and ok:
        return f"{ok} of {len(rows)} items kept as answers"
    if unsaid or (not bad and ok < len(rows)):
        return f"{len(rows) - ok} of {len(rows)} items failed"
    return None


def forced_run(tree: Path, folder: Path, server: Any, bad: bool = True) -> Outcome:
    """`run --teacher-force`: no traceback, each item an error with its reason where every
    reply is bad, and a file kveval reads back (`score`)."""
    base = baseline(folder)
    r = kveval(tree, folder, "run", "--endpoint", server.base_url, "--teacher-force", base,
               "--logprobs", "2", "-o", "tf.jsonl", "--retries", "0", timeout=40)
    out = folder / "tf.jsonl"
    outcomes = [("run", judged(r, (1, 2) if bad else (0,),
                               kept(out, bad) if r.code in (0, 1) and out.exists() else None))]
    if out.exists():
        read = kveval(tree, folder, "score", "tf.jsonl")
        outcomes.append(("score tf.jsonl", judged(read, (0,), note="kveval reads it back")))
    return first_failing(outcomes)


def forced_case(make: Callable[..., Any], path: str, edit: Edit, bad: bool = True,
                **kw: Any) -> Callable[[Path, Path], Outcome]:
    def case(tree: Path, folder: Path) -> Outcome:
        with hostile(make, path, edit, **kw) as server:
            return forced_run(tree, folder, server, bad)
    return case


def method_reported(tree: Path, folder: Path, server: Any) -> Outcome:
    """`check --json` must not name a method whose replies a run cannot keep."""
    r = kveval(tree, folder, "check", "--endpoint", server.base_url, "--json", timeout=40)
    try:
        method = json.loads(r.out)["teacher_force"]["method"]
    except (ValueError, KeyError, TypeError):
        method = "?"
    said = f"method {method}" if method else "no method (why_not given)"
    return judged(r, (0, 2), f"reports {method} as working" if method else None, note=said)


def checked_case(make: Callable[..., Any], path: str, edit: Edit
                 ) -> Callable[[Path, Path], Outcome]:
    def case(tree: Path, folder: Path) -> Outcome:
        outcomes = []
        with hostile(make, path, edit) as server:
            outcomes.append(("check", method_reported(tree, folder, server)))
            outcomes.append(("run", forced_run(tree, folder, server)))
        return first_failing(outcomes)
    return case


# ---------------------------------------------------------------- the edits


def vllm_rows(change: Callable[[dict[str, Any]], None]) -> Edit:
    """Every prompt_logprobs entry of a vLLM reply passed through `change`."""
    def edit(reply: Any) -> Any:
        rows = reply["choices"][0].get("prompt_logprobs") or []
        for row in rows:
            for entry in (row or {}).values():
                change(entry)
        return reply
    return edit


def vllm_extra(reply: Any) -> Any:
    """3,000 extra candidates of rank 1 in every row."""
    for row in reply["choices"][0].get("prompt_logprobs") or []:
        if row:
            row.update({str(5000 + j): {"logprob": -0.01, "rank": 1, "decoded_token": f"t{j}"}
                        for j in range(3000)})
    return reply


def llama_tops(change: Callable[[dict[str, Any]], None]) -> Edit:
    def edit(reply: Any) -> Any:
        for first in reply.get("completion_probabilities") or []:
            for entry in first.get("top_logprobs") or []:
                change(entry)
        return reply
    return edit


def llama_extra(reply: Any) -> Any:
    for first in reply.get("completion_probabilities") or []:
        first["top_logprobs"] = first["top_logprobs"] + [
            {"id": 5000 + j, "token": f"t{j}", "logprob": -0.01} for j in range(3000)]
    return reply


def sglang_id(reply: Any) -> Any:
    for entry in reply["meta_info"]["input_token_logprobs"]:
        entry[1] = "abc"
    return reply


def odd_pieces(reply: Any) -> Any:
    tokens = reply.get("tokens")
    if isinstance(tokens, list):
        for entry in tokens:
            if isinstance(entry, dict):
                entry["piece"] = [104, "x", 3]
    return reply


def setter(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda entry: entry.__setitem__(key, value)


NAN, INF = float("nan"), float("inf")

CASES: list[tuple[str, str, Callable[[Path, Path], Outcome]]] = [
    ("D1", "vLLM `prompt_logprobs`: a log-probability of NaN",
     forced_case(vllm, "/v1/completions", vllm_rows(setter("logprob", NAN)))),
    ("D2", "vLLM `prompt_logprobs`: a rank of `'first'`",
     forced_case(vllm, "/v1/completions", vllm_rows(setter("rank", "first")))),
    ("D3", "vLLM `prompt_logprobs`: a rank of Infinity",
     forced_case(vllm, "/v1/completions", vllm_rows(setter("rank", INF)))),
    ("D4", "llama-server `/completion`: a log-probability of NaN",
     forced_case(llama_server, "/completion", llama_tops(setter("logprob", NAN)))),
    ("D5", "llama-server `/completion`: a log-probability of Infinity",
     forced_case(llama_server, "/completion", llama_tops(setter("logprob", INF)))),
    ("D6", "SGLang `/generate`: a token id of `'abc'`",
     forced_case(sglang, "/generate", sglang_id)),
    ("D7", "llama-server `/tokenize`: pieces `[104, 'x', 3]`",
     forced_case(llama_server, "/tokenize", odd_pieces)),
    ("D8", "vLLM `prompt_logprobs` of +5.0 (`check`, then `run`)",
     checked_case(vllm, "/v1/completions", vllm_rows(setter("logprob", 5.0)))),
    ("D9", "llama-server `/completion` of +5.0 (`check`, then `run`)",
     checked_case(llama_server, "/completion", llama_tops(setter("logprob", 5.0)))),
    ("D10", "vLLM: 3,000 extra candidates of rank 1 per row (`check`, then `run`)",
     checked_case(vllm, "/v1/completions", vllm_extra)),
    ("D11", "llama-server: 3,000 extra candidates per position (`check`, then `run`)",
     checked_case(llama_server, "/completion", llama_extra)),
    ("D12", "llama-server `/props` with `total_slots = 10**9`",
     forced_case(llama_server, "/completion", lambda reply: reply, False, slots=10**9)),
    ("D13", "vLLM `/tokenize` answering 100,000-deep JSON (found by the fuzz suite)",
     forced_case(vllm, "/tokenize", lambda reply: b"[" * 100_000 + b"]" * 100_000)),
]
