"""Which teacher-forcing method a server offers: probed once, before any item is sent.

Teacher forcing scores the baseline's own answer tokens, position by position, under
another server. Servers offer that in four ways; the best one found is used and recorded
in the run header (`teacher_force.method`):

- `forced_decoding` (llama.cpp's llama-server, which returns log-probabilities of generated
  tokens only): for each answer position, POST /completion with the prompt and the answer so
  far as token ids and `n_predict: 1`, `n_probs: K`; the reply's top-K is that position's
  distribution. An item's positions go in order to one slot (`id_slot`), so each request
  reuses the cached prefix and evaluates one token; items run side by side, one per slot.
- `sglang_generate` (SGLang): POST /generate with the token ids, `return_logprob`,
  `logprob_start_len` and `top_logprobs_num`: the input tokens' log-probabilities, one request.
- `prompt_logprobs` (vLLM): POST /v1/completions with the token ids as the prompt and
  `prompt_logprobs: K`, one request.
- `echo` (llama-cpp-python, the embedded engine, any server that echoes): the prompt text
  with the answer appended, `echo: true`; the answer's tokens are found by their offsets.

Token ids come from the server's own tokenizer (/tokenize), so positions line up with the
baseline's tokens; chat items are rendered by the server's own template (llama-server's
/apply-template, /tokenize with the messages on vLLM and SGLang where it takes them).
"""

from __future__ import annotations

import urllib.error
from dataclasses import dataclass
from typing import Any

from kveval.run.endpoint import server_root
from kveval.run.http import fetch, parsed

PROBE_TIMEOUT_S = 5.0
MAX_SLOTS = 4096  # the largest --concurrency: more slots than requests in flight do nothing
HELLO = [{"role": "user", "content": "Hello"}]
LACKS = ("it offers none of llama.cpp's /tokenize with /completion, SGLang's /generate, "
         "vLLM's /tokenize with prompt_logprobs")


@dataclass(frozen=True)
class Method:
    """A teacher-forcing method and what it needs from the server."""

    name: str  # forced_decoding | sglang_generate | prompt_logprobs | echo
    server: str  # what the server was taken for
    template: str | None  # how chat items are rendered; None: chat items cannot be forced
    slots: int | None = None  # llama-server's parallel slots (forced decoding runs one item each)

    def header(self) -> dict[str, Any]:
        """What the run header records under `teacher_force`."""
        return {"method": self.name, "server": self.server, "chat_template": self.template,
                "slots": self.slots}

    @property
    def token_ids(self) -> bool:
        """Whether the method sends token ids (and so needs the server's /tokenize)."""
        return self.name != "echo"


@dataclass(frozen=True)
class Probe:
    """Plain JSON requests to the server's root (beside /v1), bounded in time."""

    base_url: str
    model: str
    api_key: str | None
    timeout: float = PROBE_TIMEOUT_S

    def call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """The JSON answer, or None for any failure (a missing endpoint is normal here)."""
        try:
            status, answer = fetch(server_root(self.base_url) + path, self.api_key,
                                   self.timeout, body=body)
            return parsed(answer) if status == 200 else None
        except (urllib.error.URLError, OSError, ValueError):
            return None


def _ids(answer: Any) -> list[int] | None:
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    if isinstance(tokens, list) and tokens and all(type(t) is int for t in tokens):
        return tokens
    return None


def llama_server(probe: Probe) -> bool:
    """llama-server's /tokenize takes `content` and answers {id, piece} objects."""
    answer = probe.call("/tokenize", {"content": "Hello", "with_pieces": True})
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    return (isinstance(tokens, list) and bool(tokens)
            and all(isinstance(t, dict) and type(t.get("id")) is int for t in tokens))


def sglang(probe: Probe) -> bool:
    info = probe.call("/get_model_info")
    return isinstance(info, dict) and "model_path" in info and _openai_tokenize(probe)


def _openai_tokenize(probe: Probe) -> bool:
    """vLLM's (and SGLang's) /tokenize: {model, prompt} -> {tokens: [ids], count}."""
    body = {"model": probe.model, "prompt": "Hello", "add_special_tokens": False}
    return _ids(probe.call("/tokenize", body)) is not None


def _messages_tokenize(probe: Probe) -> bool:
    body = {"model": probe.model, "messages": HELLO, "add_generation_prompt": True}
    return _ids(probe.call("/tokenize", body)) is not None


def _apply_template(probe: Probe) -> bool:
    answer = probe.call("/apply-template", {"messages": HELLO})
    return isinstance(answer, dict) and isinstance(answer.get("prompt"), str)


def server_slots(fingerprint: dict[str, Any]) -> int | None:
    """llama-server's slots as /props tells them, believed up to MAX_SLOTS; beyond (a pool
    of 10**9 slots would never be built), None: the server picks a slot per request."""
    props = fingerprint.get("props")
    slots = props.get("total_slots") if isinstance(props, dict) else None
    return slots if type(slots) is int and 0 < slots <= MAX_SLOTS else None


def select(probe: Probe, fingerprint: dict[str, Any], embedded: bool = False) -> Method:
    """The best method the server offers (see the module's docstring)."""
    if embedded:
        return Method("echo", "llama-cpp-python (embedded)", "the GGUF's chat template")
    if llama_server(probe):
        template = "/apply-template" if _apply_template(probe) else None
        return Method("forced_decoding", "llama.cpp llama-server", template,
                      server_slots(fingerprint))
    if sglang(probe):
        template = "/tokenize with messages" if _messages_tokenize(probe) else None
        return Method("sglang_generate", "SGLang", template)
    if _openai_tokenize(probe):
        template = "/tokenize with messages" if _messages_tokenize(probe) else None
        return Method("prompt_logprobs", "vLLM", template)
    return Method("echo", "unknown (no tokenizer endpoint)", None)


def chat_refusal(method: Method) -> str:
    """Why chat items cannot be forced by this method."""
    if method.name == "echo":
        return ("chat items need the server's chat template, and this server offers no "
                f"template endpoint ({LACKS})")
    return (f"chat items need the server's chat template, and {method.server} answered "
            "neither /apply-template nor /tokenize with messages")
