"""`kveval check`: against fakes in llama-server's, vLLM's and SGLang's shapes, a server that
offers no teacher forcing, the hostile server's modes (bounded time, nothing secret or raw
printed) and the embedded engine."""

from __future__ import annotations

import importlib.util
import itertools
import json
import threading
import time
from typing import Any

import pytest
from fake_engines import ToyModel, llama_server, sglang, vllm
from fake_server import Behaviour, FakeServer
from hostile_server import HOSTILE, HostileServer

from kveval.run import engine_setup
from kveval.run.invariance import ASKED, BATCH, OTHERS
from tests.clirun import kveval

KEY = "sk-check-SECRET-0123456789"


def toy() -> ToyModel:
    return ToyModel(["red", " green"], {"x": 0.6, "y": 0.3})


def checked(capsys: Any, url: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = kveval(capsys, "check", "--endpoint", url, "--json", *extra)
    return code, json.loads(out) if out.strip() else {}, err


@pytest.mark.parametrize(("make", "method", "tokenizer", "chat"), [
    (llama_server, "forced_decoding", "llama.cpp /tokenize", "/apply-template"),
    (vllm, "prompt_logprobs", "vLLM /tokenize", "/tokenize with messages"),
    (sglang, "sglang_generate", "SGLang /tokenize", None),
])
def test_each_server_kind_gets_its_method(capsys: Any, make: Any, method: str, tokenizer: str,
                                          chat: str | None) -> None:
    with make(toy()) as server:
        code, data, err = checked(capsys, server.base_url)
    assert code == 0, err
    assert data["runnable"] and data["problems"] == []
    assert data["apis"] == {"completions": None, "chat": None}
    assert data["max_logprobs"] == {"completions": 20, "chat": 20}
    assert data["teacher_force"]["method"] == method
    assert data["teacher_force"]["chat_items"] == chat
    assert data["endpoints"] == {"tokenizer": tokenizer, "chat_template": chat}
    assert "attention" in data["setup_to_state"]


def test_what_the_server_tells_is_not_asked_for(capsys: Any) -> None:
    with vllm(toy()) as server:
        code, data, _ = checked(capsys, server.base_url)
    assert code == 0
    assert data["fingerprint"]["kv_cache"] == "fp8"
    assert data["fingerprint"]["context_length"] == 4096
    assert "kv_cache" not in data["setup_to_state"]


def test_the_table_names_each_finding(capsys: Any) -> None:
    with llama_server(toy()) as server:
        code, out, _ = kveval(capsys, "check", "--endpoint", server.base_url)
    assert code == 0
    for line in ("teacher forcing     forced_decoding", "max --logprobs K    completions 20, "
                 "chat 20", "verdict             a rollout suite can run"):
        assert line in out


@pytest.mark.parametrize("caches", [True, False])
def test_a_llama_server_that_copies_idle_slots_is_told_to_stop(capsys: Any,
                                                               caches: bool) -> None:
    with llama_server(toy(), slots=2, idle_cache=caches) as server:
        code, data, err = checked(capsys, server.base_url)
        _, table, _ = kveval(capsys, "check", "--endpoint", server.base_url)
    assert code == 0, err
    assert data["teacher_force"]["idle_slot_cache"]["caches"] is caches
    advised = any("--no-cache-idle-slots" in line for line in data["advice"])
    assert advised is caches
    assert ("restart it with --no-cache-idle-slots" in table) is caches


def test_a_build_without_git_metadata_has_no_version(capsys: Any) -> None:
    with llama_server(toy()) as server:
        server.behaviour.extra_routes["/props"] = {
            **server.behaviour.extra_routes["/props"], "build_info": "b0-unknown"}
        code, data, _ = checked(capsys, server.base_url)
    assert code == 0
    assert "engine_version" not in data["fingerprint"]
    assert "engine_version" in data["setup_to_state"]


def test_one_slot_has_no_idle_slot_to_copy(capsys: Any) -> None:
    with llama_server(toy(), slots=1, idle_cache=True) as server:
        code, data, _ = checked(capsys, server.base_url)
    assert code == 0 and data["advice"] == []
    assert data["teacher_force"]["idle_slot_cache"]["caches"] is None


HOLD_S = 60.0  # a safety net: the batch's four requests are sent together


def batch_dependent(broken: list[str]) -> FakeServer:
    """Log-probabilities that move by 1e-6 inside a batch, as a server's kernels change with
    its batch. The probe's batch (its asked request once it was sent alone twice, and the
    others) is held at a barrier until all BATCH of them arrived, so they are answered
    together however loaded the machine; a batch that never fills is named in `broken`."""
    gate = threading.Barrier(BATCH, timeout=HOLD_S)
    asked = itertools.count(1)
    batched: set[int] = set()

    def answer(body: dict[str, Any]) -> str:
        text = body.get("prompt") or body["messages"][-1]["content"]
        if text in OTHERS[: BATCH - 1] or (text == ASKED and next(asked) > 2):
            try:
                gate.wait()
            except threading.BrokenBarrierError:
                broken.append(f"the batch of {BATCH} never filled within {HOLD_S} s")
            batched.add(threading.get_ident())  # each request on a thread of its own
        return "Paris"

    def logprobs(body: dict[str, Any], text: str) -> Any:
        shift = 1e-6 * (threading.get_ident() in batched)
        batched.discard(threading.get_ident())
        return {"tokens": [text], "token_logprobs": [-0.5 - shift],
                "top_logprobs": [{text: -0.5 - shift, " Rome": -1.5}], "text_offset": [0]}

    return FakeServer(Behaviour(answer=answer, logprobs=logprobs))


def test_batch_invariance_is_seen_either_way(capsys: Any) -> None:
    with vllm(toy()) as server:
        code, data, err = checked(capsys, server.base_url)
    assert code == 0, err
    found = data["batch_invariance"]
    assert found["identical"] is True and "inside a batch of 4" in found["summary"]
    assert "one forced noise run" in found["floor"]
    broken: list[str] = []
    with batch_dependent(broken) as server:
        code, data, err = checked(capsys, server.base_url)
    assert not broken and code == 0, broken or err
    found = data["batch_invariance"]
    assert found["identical"] is False and found["largest_change"] == pytest.approx(1e-6)
    assert "three forced noise runs" in found["floor"]


def test_a_server_without_teacher_forcing_says_what_it_lacks(capsys: Any) -> None:
    with FakeServer(Behaviour()) as server:
        code, data, _ = checked(capsys, server.base_url)
    assert code == 0  # a rollout suite still runs
    assert data["teacher_force"]["method"] is None
    assert "offers none of" in data["teacher_force"]["why_not"]
    assert data["max_logprobs"] == {"completions": None, "chat": None}


def test_a_server_whose_chat_fails_cannot_run_a_rollout_suite(capsys: Any) -> None:
    behaviour = Behaviour(status_for=lambda body: 400 if "messages" in body else None,
                          error_message="chat is disabled")
    with FakeServer(behaviour) as server:
        code, data, err = checked(capsys, server.base_url)
    assert code == 2 and not data["runnable"]
    assert "chat at temperature 0" in err and "chat is disabled" in err
    assert len(err.strip().splitlines()) == 1


def test_several_models_need_a_choice(capsys: Any) -> None:
    with FakeServer(Behaviour(models=[{"id": "a"}, {"id": "b"}])) as server:
        code, data, err = checked(capsys, server.base_url)
        assert code == 2 and data["models"] == ["a", "b"] and "--model" in err
        code, data, _ = checked(capsys, server.base_url, "--model", "b")
    assert code == 0 and data["model"] == "b"


def test_an_unreachable_server_is_one_line(capsys: Any) -> None:
    code, out, err = kveval(capsys, "check", "--endpoint", "http://127.0.0.1:9/v1")
    assert code == 2 and out == "" and "cannot reach" in err


@pytest.mark.parametrize("mode", ["echo_key", "trickle_probe", "trickle_body", "invalid_json",
                                  "wrong_types", "hostile_text", "echo_body"])
def test_hostile_servers_in_bounded_time_with_nothing_secret_or_raw(
        capsys: Any, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    monkeypatch.setenv("KVEVAL_API_KEY", KEY)
    started = time.monotonic()
    with HostileServer(mode) as server:
        code, out, err = kveval(capsys, "check", "--endpoint", server.base_url)
    assert time.monotonic() - started < 60
    assert code in (0, 2) and "Traceback" not in err
    assert KEY not in out + err
    assert not any(c in out + err for c in "\x1b\x07\x9b\r")
    if mode in ("echo_key", "invalid_json", "wrong_types"):
        assert code == 2 and "cannot run" in err
    if mode == "hostile_text":
        assert HOSTILE not in out


def test_a_password_in_the_url_is_not_printed(capsys: Any) -> None:
    with HostileServer("echo_key") as server:
        url = server.base_url.replace("http://", "http://user:hunter2pass@")
        code, out, err = kveval(capsys, "check", "--endpoint", url)
    assert code == 2 and "hunter2pass" not in out + err


HAVE_ENGINE = all(importlib.util.find_spec(m) is not None for m in engine_setup.SERVER_MODULES)
HAVE_MODEL = importlib.util.find_spec(engine_setup.BUNDLED_PACKAGE) is not None


@pytest.mark.integration
@pytest.mark.skipif(not (HAVE_ENGINE and HAVE_MODEL), reason="no embedded engine installed")
def test_the_embedded_engine_as_run_would_start_it(capsys: Any) -> None:
    code, out, err = kveval(capsys, "check", "--json", "--kv-cache-type", "q8_0", "--ctx", "1024")
    assert code == 0, err
    data = json.loads(out)
    assert data["endpoint"] == "embedded" and data["runnable"]
    assert data["fingerprint"]["kv_cache"] == "q8_0"
    assert data["fingerprint"]["engine"] == "llama.cpp"
    assert data["teacher_force"]["method"] == "echo"
    assert data["max_logprobs"]["completions"] == 20
    assert "kv_cache" not in data["setup_to_state"]


def test_timeout_gives_a_slow_server_the_time_it_needs(capsys: Any) -> None:
    """Every probe within --timeout: a server taking 0.6 s an answer cannot run a rollout
    suite at a limit of 0.3 s, and can at the default."""
    with FakeServer(Behaviour(latency_s=0.6)) as server:
        short, data, err = checked(capsys, server.base_url, "--timeout", "0.3")
        default, _, _ = checked(capsys, server.base_url)
    assert short == 2 and not data["runnable"] and "within --timeout 0.3 s" in err
    assert default == 0


def test_llama_servers_context_is_said_per_slot_with_the_total(capsys: Any) -> None:
    """-c 16384 -np 4: /props says n_ctx 4096, each slot's."""
    with llama_server(toy(), slots=4) as server:
        code, data, _ = checked(capsys, server.base_url)
        _, out, _ = kveval(capsys, "check", "--endpoint", server.base_url)
    assert code == 0
    found = data["fingerprint"]
    assert "context_length" not in found
    assert (found["context_length_per_slot"], found["slots"],
            found["context_length_total"]) == (4096, 4, 16384)
    assert "context_length_per_slot 4096, slots 4, context_length_total 16384" in out


def test_the_slow_probes_have_a_longer_bound_than_the_quick_ones(capsys: Any,
                                                                 monkeypatch: Any) -> None:
    """A loaded CPU: the batch's requests take longer than the quick probes' bound."""
    from fake_engines import openai_logprobs

    from kveval.run import check

    def answer(body: dict[str, Any]) -> str:
        text = body.get("prompt") or body["messages"][-1]["content"]
        time.sleep(0.6 if text == ASKED or text in OTHERS else 0.0)
        return "Paris"

    monkeypatch.setattr(check, "CHECK_TIMEOUT_S", 0.4)
    with FakeServer(Behaviour(answer=answer, logprobs=openai_logprobs())) as server:
        code, data, err = checked(capsys, server.base_url)
        _, bound, _ = checked(capsys, server.base_url, "--timeout", "0.4")
    assert code == 0, err
    assert data["batch_invariance"]["identical"] is True
    assert bound["batch_invariance"]["identical"] is not True  # --timeout bounds them all
