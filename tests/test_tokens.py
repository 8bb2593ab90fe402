"""Token counting against fake tokenizer endpoints, and sizing prompts to within 2%."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from kveval.adapters import evidence, needle
from kveval.adapters.base import BuildContext, TaskSpec
from kveval.errors import EndpointError
from kveval.run.calibration import Calibrated, LinearModel, features, fit_linear, linear_counter
from kveval.run.tokens import make_token_counter
from tests.local_server import QuietServer

# The fake model's tokenizer: special tags, letter runs, digits in groups of up to three
# (as Llama 3 splits numbers), and each other symbol alone.
_TOKEN = re.compile(r"<\|\w+\|>|[A-Za-z]+|\d{1,3}|[^\w\s]")


def fake_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def render(messages: list[dict[str, str]]) -> str:
    """The fake chat template (ChatML); a default system prompt when none is given."""
    if not messages or messages[0].get("role") != "system":
        messages = [{"role": "system", "content": "You are a helpful assistant."}, *messages]
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


def prompt_tokens(messages: list[dict[str, str]]) -> int:
    return 1 + fake_tokens(render(messages))  # BOS + the rendered template


class FakeTokenizerServer:
    """An OpenAI-compatible chat endpoint with one engine's tokenizer routes (or none).

    kind: "vllm", "llamacpp", "llamacpp-old" (no /apply-template), "llama-cpp-python",
    or "none" (calibration from usage only).
    """

    def __init__(self, kind: str, api_key: str | None = None) -> None:
        self.kind = kind
        self.api_key = api_key
        self.paths: list[str] = []
        self.headers: list[str | None] = []
        self._httpd = QuietServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def route(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        kind = self.kind
        if path == "/v1/chat/completions":
            return 200, {"choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": "1"}}],
                         "usage": {"prompt_tokens": prompt_tokens(body["messages"]),
                                   "completion_tokens": 1}}
        if path == "/tokenize" and kind == "vllm":
            if "messages" in body:
                count = prompt_tokens(body["messages"])
            elif "prompt" in body:
                count = fake_tokens(body["prompt"])
            else:
                return 422, {"detail": "prompt or messages"}
            return 200, {"count": count, "max_model_len": 32768, "tokens": list(range(count))}
        if path == "/tokenize" and kind in ("llamacpp", "llamacpp-old"):
            text = body.get("content")
            count = 0 if text is None else fake_tokens(text) + bool(body.get("add_special"))
            return 200, {"tokens": list(range(count))}
        if path == "/apply-template" and kind == "llamacpp":
            return 200, {"prompt": render(body["messages"])}
        if path == "/extras/tokenize" and kind == "llama-cpp-python":
            count = 1 + fake_tokens(body["input"])
            return 200, {"tokens": list(range(count))}
        return 404, {"error": "not found"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):

            disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.paths.append(self.path)
                server.headers.append(self.headers.get("Authorization"))
                status, payload = server.route(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


@pytest.fixture
def fake_server(request: pytest.FixtureRequest) -> Iterator[FakeTokenizerServer]:
    server = FakeTokenizerServer(request.param)
    yield server
    server.close()


MESSAGES = [{"role": "user", "content": "The quiet river ran past the mill. What is 0.7342?"}]
SOURCES = {
    "vllm": "vLLM /tokenize",
    "llamacpp": "llama.cpp /apply-template + /tokenize",
    "llamacpp-old": "llama.cpp /tokenize + template overhead",
    "llama-cpp-python": "llama-cpp-python /extras/tokenize + template overhead",
    "none": "calibrated from usage.prompt_tokens",
}


@pytest.mark.parametrize("fake_server", list(SOURCES), indirect=True)
def test_picks_the_servers_own_tokenizer(fake_server: FakeTokenizerServer) -> None:
    counter = make_token_counter(fake_server.base_url, "fake", None)
    assert getattr(counter, "source", None) == SOURCES[fake_server.kind]


@pytest.mark.parametrize("fake_server", ["vllm", "llamacpp", "llamacpp-old", "llama-cpp-python"],
                         indirect=True)
def test_tokenizer_counts_match_the_servers_usage(fake_server: FakeTokenizerServer) -> None:
    counter = make_token_counter(fake_server.base_url, "fake", None)
    system = [{"role": "system", "content": "Be brief."}, *MESSAGES]
    assert counter(MESSAGES) == prompt_tokens(MESSAGES)
    assert counter(system) == prompt_tokens(system)  # the overhead differs per roles


@pytest.mark.parametrize("fake_server", ["none"], indirect=True)
def test_calibration_is_close_on_long_prose(fake_server: FakeTokenizerServer) -> None:
    counter = make_token_counter(fake_server.base_url, "fake", None)
    spec = TaskSpec(name="needle", adapter="needle", api="chat", max_tokens=32,
                    params={"lengths": [4096], "depths": [50], "trials": 1})
    item = needle.ADAPTER.build(spec, BuildContext())[0]
    messages = list(item.messages or ())
    assert abs(counter(messages) - prompt_tokens(messages)) <= 0.01 * prompt_tokens(messages)


@pytest.mark.parametrize("fake_server", ["vllm"], indirect=True)
def test_counts_are_cached(fake_server: FakeTokenizerServer) -> None:
    counter = make_token_counter(fake_server.base_url, "fake", None)
    before = len(fake_server.paths)
    counter(MESSAGES)
    counter([dict(m) for m in MESSAGES])
    assert len(fake_server.paths) == before + 1


@pytest.mark.parametrize("fake_server", ["vllm"], indirect=True)
def test_sends_the_api_key(fake_server: FakeTokenizerServer) -> None:
    make_token_counter(fake_server.base_url, "fake", "sk-test")
    assert fake_server.headers and all(h == "Bearer sk-test" for h in fake_server.headers)


def test_unreachable_server_is_an_endpoint_error() -> None:
    server = FakeTokenizerServer("none")
    url = server.base_url
    server.close()
    with pytest.raises(EndpointError):
        make_token_counter(url, "fake", None, timeout=2.0)


def test_fit_linear_recovers_the_coefficients() -> None:
    truth = LinearModel(30.0, 0.2, 0.35)
    points = [(c, d, round(truth.tokens(c, d))) for c, d in
              [(6, 0), (2000, 0), (8000, 0), (9000, 40), (3000, 1500), (4000, 200)]]
    model = fit_linear(points)
    assert model.per_char == pytest.approx(0.2, rel=0.01)
    assert model.per_digit == pytest.approx(0.35, rel=0.05)
    assert model.intercept == pytest.approx(30.0, abs=2)


def test_linear_counter_and_features() -> None:
    messages = [{"role": "user", "content": "ab 12"}, {"role": "user", "content": "c3"}]
    assert features(messages) == (7, 3)
    assert linear_counter(LinearModel(1.0, 1.0, 1.0))(messages) == 11


# ---------------------------------------------------------------- sizing within 2%

GRID = {"lengths": [1024, 2048, 4096, 8192], "depths": [0, 50, 100], "trials": 2}
ADAPTERS = [needle.ADAPTER, needle.MULTIKEY_ADAPTER, evidence.ADAPTER]


def _real_tokens(messages: Any) -> int:
    return prompt_tokens([dict(m) for m in messages])


@pytest.mark.parametrize("fake_server", ["vllm", "llamacpp", "llama-cpp-python"], indirect=True)
@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
def test_sizing_with_a_tokenizer_endpoint(fake_server: FakeTokenizerServer, adapter: Any) -> None:
    counter = make_token_counter(fake_server.base_url, "fake", None)
    spec = TaskSpec(name=adapter.name, adapter=adapter.name, api="chat", max_tokens=32,
                    params=GRID)
    items = adapter.build(spec, BuildContext(count_tokens=counter))
    assert len(items) == 4 * 3 * 2
    for item in items:
        target, measured = item.meta["target_tokens"], item.meta["measured_tokens"]
        assert measured == _real_tokens(item.messages)
        assert 0.98 * target <= measured <= target, item.item_id


@pytest.mark.parametrize("fake_server", ["none"], indirect=True)
@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
def test_sizing_by_calibration_holds_against_the_servers_usage(
        fake_server: FakeTokenizerServer, adapter: Any) -> None:
    counter = make_token_counter(fake_server.base_url, "fake", None)
    spec = TaskSpec(name=adapter.name, adapter=adapter.name, api="chat", max_tokens=32,
                    params=GRID)
    items = adapter.build(spec, BuildContext(count_tokens=counter))
    for item in items:
        target, real = item.meta["target_tokens"], _real_tokens(item.messages)
        assert abs(real - target) <= 0.02 * target, (item.item_id, real, target)


def test_calibrated_measures_new_text_and_anchors_near_copies() -> None:
    calls: list[int] = []

    def measure(messages: Any) -> int:
        calls.append(1)
        return prompt_tokens([dict(m) for m in messages])

    counter = Calibrated(measure, LinearModel(0.0, 0.2, 0.3))
    sentences = [f"The quiet river ran past mill number {i}." for i in range(100)]
    base = [{"role": "user", "content": " ".join(sentences)}]
    near = [{"role": "user", "content": " ".join(sentences[:50] + ["A new line here."]
                                                 + sentences[51:])}]
    other = [{"role": "user", "content": " ".join(s.upper() for s in sentences)}]
    assert counter(base) == prompt_tokens(base) and len(calls) == 1
    assert abs(counter(near) - prompt_tokens(near)) <= 3 and len(calls) == 1
    assert counter(other) == prompt_tokens(other) and len(calls) == 2
    system = [{"role": "system", "content": "Be brief."}, *base]
    assert counter(system) == prompt_tokens(system) and len(calls) == 3  # other roles


@pytest.mark.parametrize("fake_server", ["none"], indirect=True)
def test_calibrated_sizing_measures_about_once_per_length_and_trial(
        fake_server: FakeTokenizerServer) -> None:
    counter = make_token_counter(fake_server.base_url, "fake", None)
    probes = len(fake_server.paths)
    spec = TaskSpec(name="needle", adapter="needle", api="chat", max_tokens=32,
                    params={"lengths": [2048, 4096, 8192], "trials": 2})
    items = needle.ADAPTER.build(spec, BuildContext(count_tokens=counter))
    requests = len(fake_server.paths) - probes
    assert len(items) == 3 * 7 * 2
    assert requests <= 3 * 3 * 2, requests  # at most three per length and trial
