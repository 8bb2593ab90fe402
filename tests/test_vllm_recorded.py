"""Teacher forcing of a chat item against a real vLLM's recorded replies.

tests/fixtures/vllm/chat_exchange.json holds every request kveval sent to vLLM 0.32 (CPU
build, SmolLM2-135M in bf16) for a one-item chat baseline and its teacher-forced run, with
the server's replies (README.md beside it says how it was made). The replay server answers a
request only where it matches a recorded one in what decides the answer (the messages or
text tokenized, the prompt's token ids, prompt_logprobs' K); anything else gets vLLM's 400.
Beside the recording, it answers /tokenize of each answer token's own text alone with that
token's id (the id and text of the recorded prompt_logprobs rows, as the recorded "Hello" ->
[19556] shows vLLM's tokenizer does for a text that is one token).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from kveval.formats.reader import read_run
from tests.clirun import kveval
from tests.local_server import LocalServer

FIXTURE = Path(__file__).parent / "fixtures" / "vllm" / "chat_exchange.json"
K = 5  # the recorded prompt_logprobs
POSITIONS = 7  # "The capital of Australia is Canberra." in SmolLM2's tokens
# per path, the request keys that decide vLLM's answer
DECIDING = {"/tokenize": ("prompt", "messages", "add_special_tokens", "add_generation_prompt",
                          "content"),
            "/v1/completions": ("prompt", "prompt_logprobs"),
            "/v1/chat/completions": ("messages", "max_tokens", "logprobs", "top_logprobs")}


def exchanges() -> list[dict[str, Any]]:
    return list(json.loads(FIXTURE.read_text())["exchanges"])


def recorded(path: str) -> dict[str, Any]:
    """The first answered POST to `path`."""
    return next(e for e in exchanges() if e["path"] == path and e["status"] == 200)


def tokenized(key: str) -> list[int]:
    """The ids /tokenize answered for the item's `prompt` (its answer text) or `messages`
    (its chat prompt), not for the pre-flight's "Hello" probes."""
    return next(e["reply"]["tokens"] for e in exchanges()
                if e["path"] == "/tokenize" and e["status"] == 200 and key in e["request"]
                and "Hello" not in json.dumps(e["request"][key]))


def singles() -> list[dict[str, Any]]:
    """/tokenize of each answer token's text alone, answered with its id."""
    ids, rows = answer_rows()
    found = {row[str(i)]["decoded_token"]: i for i, row in zip(ids, rows, strict=True)}
    return [{"method": "POST", "path": "/tokenize", "status": 200,
             "request": {"model": "smol", "prompt": text, "add_special_tokens": False},
             "reply": {"count": 1, "max_model_len": 8192, "tokens": [i], "token_strs": None}}
            for text, i in found.items()]


def deciding(path: str, body: dict[str, Any] | None) -> Any:
    return None if body is None else [body.get(k) for k in DECIDING.get(path, ())]


class Replay(LocalServer):
    """Answers each request with the reply recorded for it; `unmatched` lists the others."""

    def __init__(self, recorded: list[dict[str, Any]]) -> None:
        self.recorded = recorded
        self.sent: list[tuple[str, Any]] = []
        self.unmatched: list[tuple[str, Any]] = []
        super().__init__(self._handler())

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        self.sent.append((path, body))
        for e in self.recorded:
            if (e["method"], e["path"]) == (method, path) and (
                    deciding(path, e["request"]) == deciding(path, body)):
                return e["status"], e["reply"]
        self.unmatched.append((path, body))
        return 400, {"error": {"message": "no recorded exchange for this request",
                               "type": "BadRequestError", "param": None, "code": 400}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        replay = self

        class Handler(BaseHTTPRequestHandler):

            disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, method: str, body: Any) -> None:
                status, reply = replay.answer(method, self.path, body)
                text = reply if isinstance(reply, str) else json.dumps(reply)
                data = text.encode()
                self.send_response(status)
                kind = "text/plain" if isinstance(reply, str) else "application/json"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                self._reply("GET", None)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                self._reply("POST", json.loads(self.rfile.read(length) or b"{}"))

        return Handler


@pytest.fixture
def replay() -> Iterator[Replay]:
    with Replay(exchanges() + singles()) as server:
        yield server


@pytest.fixture
def baseline(capsys: Any, replay: Replay, tmp_path: Path) -> Path:
    """The one-item chat baseline, made from the recorded chat completion."""
    question = recorded("/v1/chat/completions")["request"]["messages"][-1]["content"]
    prompts = tmp_path / "one.txt"
    prompts.write_text(question + "\n")
    out = tmp_path / "base.jsonl"
    code, _, err = kveval(capsys, "run", "--endpoint", replay.base_url, "--task", "prompts",
                          "--prompts", str(prompts), "--logprobs", str(K), "-o", str(out))
    assert code == 0, err
    return out


def force(capsys: Any, server: LocalServer, base: Path, out: Path, *extra: str) -> tuple:
    return kveval(capsys, "run", "--endpoint", server.base_url, "--teacher-force", str(base),
                  "-o", str(out), *extra)


def answer_rows() -> tuple[list[int], list[dict[str, Any]]]:
    """The answer's token ids (vLLM's /tokenize of its text) and their prompt_logprobs rows."""
    ids = tokenized("prompt")
    rows = recorded("/v1/completions")["reply"]["choices"][0]["prompt_logprobs"]
    return ids, rows[-len(ids):]


def test_a_chat_item_is_forced_exactly_at_the_recorded_positions(
        capsys: Any, replay: Replay, baseline: Path, tmp_path: Path) -> None:
    out = tmp_path / "tf.jsonl"
    code, _, err = force(capsys, replay, baseline, out)
    assert code == 0, err
    run = read_run(out)
    assert run.header.teacher_force is not None
    assert {k: run.header.teacher_force[k] for k in ("method", "chat_template", "unforced")} == {
        "method": "prompt_logprobs", "chat_template": "/tokenize with messages",
        "unforced": None}
    [item] = run.items
    assert item.meta["teacher_forced"] == {"method": "prompt_logprobs", "tokens": "exact",
                                           "positions": POSITIONS, "requests": 1}
    ids, rows = answer_rows()
    assert len(ids) == POSITIONS
    own = [row[str(i)] for i, row in zip(ids, rows, strict=True)]
    assert item.logprobs["tokens"] == [entry["decoded_token"] for entry in own]
    assert item.logprobs["logprobs"] == [entry["logprob"] for entry in own]
    assert "".join(item.logprobs["tokens"]) == item.output == read_run(baseline).items[0].output
    assert replay.unmatched == []


def test_kveval_sends_the_recorded_forced_request(
        capsys: Any, replay: Replay, baseline: Path, tmp_path: Path) -> None:
    assert force(capsys, replay, baseline, tmp_path / "tf.jsonl")[0] == 0
    want = recorded("/v1/completions")["request"]
    sent = [body for path, body in replay.sent if path == "/v1/completions"]
    assert sent and all(b["prompt"] == want["prompt"] and b["prompt_logprobs"] == K
                        for b in sent)
    assert want["prompt"] == tokenized("messages") + answer_rows()[0]


def test_a_request_other_than_the_recorded_one_is_refused(
        capsys: Any, replay: Replay, baseline: Path, tmp_path: Path) -> None:
    """The replay's check can fail: another K is another request, and so is another prompt
    (here the chat template's tokens altered in the /tokenize reply)."""
    code, _, err = force(capsys, replay, baseline, tmp_path / "k3.jsonl", "--logprobs", "3")
    assert code == 2 and "cannot teacher-force" in err
    assert [b["prompt_logprobs"] for p, b in replay.unmatched if p == "/v1/completions"] == [3]
    altered = exchanges()
    for e in altered:
        if e["path"] == "/tokenize" and "messages" in (e["request"] or {}):
            e["reply"] = {**e["reply"], "tokens": e["reply"]["tokens"][1:]}
    with Replay(altered + singles()) as other:
        code, _, err = force(capsys, other, baseline, tmp_path / "other.jsonl")
    assert code == 2 and "cannot teacher-force" in err
    assert [p for p, _ in other.unmatched] == ["/v1/completions"]
