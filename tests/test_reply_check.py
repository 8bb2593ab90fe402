"""One check in: every reply, free-running or forced, by any method, passes the check reading
a run file applies before anything is written. A hostile position (NaN, +inf, +5.0, a rank
of 'first', an id of 'abc', pieces of the wrong type, thousands of extra candidates) is an
error item naming the reason, never a traceback and never a record kveval refuses to read;
`check` names no method whose replies a run could not keep; server-reported sizes are
bounded before use."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_engines import ToyModel, llama_server, sglang, vllm
from fake_server import FakeServer

from kveval.formats.reader import read_run
from kveval.run.client import Reply, checked
from kveval.run.forcing.method import MAX_SLOTS, server_slots
from tests.clirun import kveval
from tests.test_fuzz_forcing import ANSWER, TOKENS, TOP, baseline

GOOD = {"k": 2, "tokens": ["a"], "logprobs": [-0.5], "top_tokens": [["a", "b"]],
        "top_logprobs": [[-0.5, -1.5]]}


def test_a_reply_the_reader_would_refuse_becomes_an_error_naming_it() -> None:
    assert checked(Reply(text="a", logprobs=GOOD)).logprobs == GOOD
    for bad, why in (({**GOOD, "logprobs": [5.0]}, "at most 0"),
                     ({**GOOD, "top_logprobs": [[-0.01, -0.01]]}, "sum to 1.98"),
                     ({**GOOD, "top_tokens": [["a", "a"]]}, "listed twice"),
                     ({**GOOD, "tokens": ["a", "b"]}, "differ in length")):
        reply = checked(Reply(text="a", logprobs=bad, latency_s=0.3))
        assert reply.text is None and reply.latency_s == 0.3
        assert reply.error is not None and why in reply.error
    assert "meta.depth" in (checked(Reply(text="a", meta={"depth": "deep"})).error or "")


def rows(reply: Any) -> list[dict[str, Any]]:
    return [entry for row in reply["choices"][0].get("prompt_logprobs") or [] if row
            for entry in row.values()]


def set_all(entries: list[dict[str, Any]], key: str, value: Any) -> None:
    for entry in entries:
        entry[key] = value


def llama_tops(reply: Any) -> list[dict[str, Any]]:
    return [entry for first in reply.get("completion_probabilities") or []
            for entry in first.get("top_logprobs") or []]


CASES: dict[str, tuple[Callable[..., FakeServer], str, Callable[[Any], None], str]] = {
    "vLLM rank 'first'": (vllm, "/v1/completions",
                          lambda r: set_all(rows(r), "rank", "first"), "ValueError"),
    "vLLM rank Infinity": (vllm, "/v1/completions",
                           lambda r: set_all(rows(r), "rank", math.inf), "OverflowError"),
    "vLLM log-probability NaN": (vllm, "/v1/completions",
                                 lambda r: set_all(rows(r), "logprob", math.nan), "nan"),
    "vLLM log-probability +5.0": (vllm, "/v1/completions",
                                  lambda r: set_all(rows(r), "logprob", 5.0), "at most 0"),
    "vLLM 3,000 extra candidates": (vllm, "/v1/completions", lambda r: [
        row.update({str(9000 + j): {"logprob": -0.01, "rank": 1, "decoded_token": f"t{j}"}
                    for j in range(3000)}) for row in r["choices"][0]["prompt_logprobs"]
        if row], "sum to"),
    "llama-server log-probability +inf": (llama_server, "/completion",
                                          lambda r: set_all(llama_tops(r), "logprob",
                                                            math.inf), "inf"),
    "llama-server log-probability +5.0": (llama_server, "/completion",
                                          lambda r: set_all(llama_tops(r), "logprob", 5.0),
                                          "at most 0"),
    "SGLang id 'abc'": (sglang, "/generate", lambda r: [
        entry.__setitem__(1, "abc") for entry in r["meta_info"]["input_token_logprobs"]],
                        "ValueError"),
}


def hostile_for(make: Callable[..., FakeServer], path: str, change: Callable[[Any], None],
                which: str) -> FakeServer:
    """A fake whose replies on `path` are hostile for the item asked with `which` only."""
    model = ToyModel(list(TOKENS), dict(TOP))
    server = make(model)
    route = server.behaviour.post_routes[path]
    wanted = model.tokenize(which, True)[1:]  # the prompt's own ids, BOS left out

    def answer(body: dict[str, Any]) -> Any:
        reply = route(body)
        ids = body.get("prompt") or body.get("input_ids") or []
        if isinstance(ids, list) and any(ids[i:i + len(wanted)] == wanted
                                         for i in range(len(ids))):
            change(reply)
        return reply

    server.behaviour.post_routes[path] = answer
    return server


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_position_is_an_error_item_and_the_file_reads_back(
        capsys: Any, tmp_path: Path, case: str) -> None:
    make, path, change, why = CASES[case]
    base = baseline(tmp_path / "base.jsonl")
    out = tmp_path / "tf.jsonl"
    with hostile_for(make, path, change, "Say 2.") as server:  # the pre-flight asks p0
        code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--teacher-force",
                              str(base), "--logprobs", "2", "-o", str(out), "--retries", "0")
    assert code == 1 and "Traceback" not in err, err
    items = {item.item_id: item for item in read_run(out).items}  # kveval reads it back
    assert not items["p2"].ok and why in (items["p2"].error or "")
    assert items["p0"].ok and items["p1"].ok and items["p1"].output == ANSWER


@pytest.mark.parametrize("case", ["vLLM log-probability +5.0", "vLLM 3,000 extra candidates",
                                  "llama-server log-probability +5.0"])
def test_check_names_no_method_a_run_could_not_keep(capsys: Any, case: str) -> None:
    make, path, change, why = CASES[case]
    with hostile_for(make, path, change, "The capital") as server:
        code, out, err = kveval(capsys, "check", "--endpoint", server.base_url, "--json")
    found = json.loads(out)["teacher_force"]
    assert code == 0 and found["method"] is None and why in found["why_not"], err


def test_a_billion_slots_are_not_believed(capsys: Any, tmp_path: Path) -> None:
    assert server_slots({"props": {"total_slots": 10**9}}) is None
    assert server_slots({"props": {"total_slots": MAX_SLOTS}}) == MAX_SLOTS
    base, out = baseline(tmp_path / "base.jsonl"), tmp_path / "tf.jsonl"
    with llama_server(ToyModel(list(TOKENS), dict(TOP)), slots=10**9) as server:
        code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--teacher-force",
                              str(base), "--logprobs", "2", "-o", str(out))
    assert code == 0, err
    assert read_run(out).header.teacher_force["slots"] is None


def test_a_context_size_past_the_bound_is_not_believed() -> None:
    from kveval.run.endpoint import MAX_CONTEXT, ServerInfo

    info = ServerInfo([{"id": "m", "max_model_len": 10**18}], {"props": {"n_ctx": MAX_CONTEXT}})
    assert info.max_context("m") == MAX_CONTEXT
    assert ServerInfo([{"id": "m", "max_model_len": 10**18}], {}).max_context("m") is None


def test_a_token_count_past_the_bound_is_not_believed() -> None:
    from kveval.run.tokens import Unavailable, _bounded

    assert _bounded(512, "no count") == 512
    for bad in (0, -5, True, "12", 10**18):
        with pytest.raises(Unavailable):
            _bounded(bad, "no count")
