"""How many tokens the served model sees in a chat request, chat template included.

`make_token_counter` probes the server once and picks the best counter it offers:

1. vLLM: POST /tokenize with the messages; the server applies the chat template: exact.
2. llama.cpp server: POST /apply-template, then POST /tokenize of that prompt: exact.
3. llama.cpp without /apply-template, or llama-cpp-python (POST /extras/tokenize): the
   messages' texts are tokenized bare, and the template's overhead is added: measured once
   per sequence of roles as a probe request's usage.prompt_tokens minus its bare count.
4. Anything else: calibration from usage.prompt_tokens of chat requests (max_tokens 1,
   temperature 0). A few probes of kveval's own prose and numbers fit
   tokens = a + b*chars + c*digits; a prompt is then measured exactly once, and prompts
   that share nearly all their text with a measured one (the cells of one length and
   trial share their haystack) are that count plus the fit's change (run/calibration.py).

Every count is cached. HTTP through the standard library (urllib); the fit through numpy.
"""

from __future__ import annotations

import json
import urllib.error
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kveval.adapters.base import Message, TokenCounter
from kveval.errors import EndpointError
from kveval.run.calibration import (
    HELLO,
    Calibrated,
    LinearModel,
    calibration_texts,
    features,
    fit_linear,
    roles_of,
)
from kveval.run.endpoint import server_root
from kveval.run.http import fetch, parsed
from kveval.safe import redact_url

CHAT_PROBE_TIMEOUT_S = 600.0  # a probe request may prefill a whole long prompt


class Unavailable(Exception):
    """An endpoint the server does not offer, or a request it did not answer."""


def _post(url: str, body: dict[str, Any], api_key: str | None, timeout: float) -> Any:
    """POST JSON and parse the answer; every failure is Unavailable naming the URL without
    its credentials."""
    try:
        status, answer = fetch(url, api_key, timeout, body=body)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise Unavailable(f"{redact_url(url)}: {getattr(exc, 'reason', exc)}") from None
    if status != 200:
        raise Unavailable(f"{redact_url(url)}: HTTP {status}")
    try:
        return parsed(answer)
    except ValueError as exc:
        raise Unavailable(f"{redact_url(url)}: {exc}") from None


@dataclass(frozen=True)
class Server:
    base_url: str  # includes /v1
    model: str
    api_key: str | None
    timeout: float

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST to the server's root (beside /v1), where the tokenizer endpoints live."""
        return _post(server_root(self.base_url) + path, body, self.api_key, self.timeout)

    def prompt_tokens(self, messages: Sequence[Message]) -> int:
        """usage.prompt_tokens of a one-token chat request."""
        body = {"model": self.model, "messages": list(messages), "max_tokens": 1,
                "temperature": 0}
        url = self.base_url.rstrip("/") + "/chat/completions"
        data = _post(url, body, self.api_key, max(self.timeout, CHAT_PROBE_TIMEOUT_S))
        usage = data.get("usage") if isinstance(data, dict) else None
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        return _bounded(tokens, f"{url}: the answer carries no usage.prompt_tokens")


# ---------------------------------------------------------------- the counter


class CachedCounter:
    """A TokenCounter that remembers its counts and says where they come from."""

    def __init__(self, source: str, count: TokenCounter) -> None:
        self.source = source
        self._count = count
        self._cache: dict[str, int] = {}

    def __call__(self, messages: Sequence[Message]) -> int:
        key = json.dumps(list(messages), ensure_ascii=False, sort_keys=True)
        if key not in self._cache:
            try:
                self._cache[key] = self._count(messages)
            except Unavailable as exc:
                raise EndpointError(f"cannot count prompt tokens ({self.source}): {exc}") from None
        return self._cache[key]


def _probe_messages(roles: tuple[str, ...]) -> list[Message]:
    return [{"role": role, "content": HELLO} for role in roles]


class _PerRoles:
    """A value measured once per sequence of roles (the chat template's overhead)."""

    def __init__(self, measure: Callable[[tuple[str, ...]], float]) -> None:
        self._measure = measure
        self._known: dict[tuple[str, ...], float] = {}

    def __call__(self, roles: tuple[str, ...]) -> float:
        if roles not in self._known:
            self._known[roles] = self._measure(roles)
        return self._known[roles]


# ---------------------------------------------------------------- the strategies


def _vllm(server: Server) -> TokenCounter | None:
    """vLLM's /tokenize applies the chat template itself and answers a count."""

    def count(messages: Sequence[Message]) -> int:
        body = {"model": server.model, "messages": list(messages), "add_generation_prompt": True}
        data = server.post("/tokenize", body)
        return _bounded(data.get("count") if isinstance(data, dict) else None,
                        "/tokenize answered no count")

    try:
        count(_probe_messages(("user",)))
    except Unavailable:
        return None
    return count


def _bounded(count: Any, missing: str) -> int:
    """A token count a server reports: an integer from 1 to the largest context believed
    (endpoint.MAX_CONTEXT), else Unavailable (`missing` says what was asked)."""
    from kveval.run.endpoint import MAX_CONTEXT

    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        raise Unavailable(missing)
    if count > MAX_CONTEXT:
        raise Unavailable(f"{missing} within {MAX_CONTEXT:,} tokens (it said {count:,})")
    return count


def _token_list(data: Any) -> list[Any]:
    tokens = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(tokens, list):
        raise Unavailable("the tokenizer answered no token list")
    return tokens


def _llamacpp_text(server: Server) -> Callable[[str], int] | None:
    def count(text: str) -> int:
        return len(_token_list(server.post("/tokenize", {"content": text})))

    try:
        return count if count(HELLO) > 0 else None
    except Unavailable:
        return None


def _llamacpp_template(server: Server) -> TokenCounter | None:
    """llama.cpp's /apply-template renders the prompt exactly as a chat request would."""

    def count(messages: Sequence[Message]) -> int:
        rendered = server.post("/apply-template", {"messages": list(messages)})
        prompt = rendered.get("prompt") if isinstance(rendered, dict) else None
        if not isinstance(prompt, str):
            raise Unavailable("/apply-template answered no prompt")
        body = {"content": prompt, "add_special": True}
        return len(_token_list(server.post("/tokenize", body)))

    try:
        count(_probe_messages(("user",)))
    except Unavailable:
        return None
    return count


def _llama_cpp_python_text(server: Server) -> Callable[[str], int] | None:
    def count(text: str) -> int:
        body = {"input": text, "model": server.model}
        return len(_token_list(server.post("/extras/tokenize", body)))

    try:
        return count if count(HELLO) > 0 else None
    except Unavailable:
        return None


def with_template_overhead(server: Server, text_count: Callable[[str], int]) -> TokenCounter:
    """Bare text counts plus the template's overhead, measured once per sequence of roles."""

    def overhead(roles: tuple[str, ...]) -> float:
        probe = _probe_messages(roles)
        return server.prompt_tokens(probe) - sum(text_count(m["content"]) for m in probe)

    overheads = _PerRoles(overhead)

    def count(messages: Sequence[Message]) -> int:
        bare = sum(text_count(m.get("content", "")) for m in messages)
        return bare + round(overheads(roles_of(messages)))

    return count


# ---------------------------------------------------------------- calibration


def calibrate(server: Server) -> LinearModel:
    """Fit tokens = a + b*chars + c*digits from probe requests' usage.prompt_tokens. Probes
    that fail after the first (a small server context) are left out."""
    points: list[tuple[int, int, int]] = []
    for text in calibration_texts():
        probe = [{"role": "user", "content": text}]
        try:
            points.append((*features(probe), server.prompt_tokens(probe)))
        except Unavailable as exc:
            if not points:
                raise EndpointError(f"cannot size prompts: no tokenizer endpoint, and a probe "
                                    f"request failed ({exc})") from None
    return fit_linear(points)


# ---------------------------------------------------------------- the entry point


def make_token_counter(base_url: str, model: str, api_key: str | None,
                       timeout: float = 10.0) -> TokenCounter:
    """The best token counter the server offers (see the module's docstring); its
    `source` attribute names it. Raises EndpointError when none can be made."""
    server = Server(base_url, model, api_key, timeout)
    counter = _vllm(server)
    if counter is not None:
        return CachedCounter("vLLM /tokenize", counter)
    text = _llamacpp_text(server)
    if text is not None:
        counter = _llamacpp_template(server)
        if counter is not None:
            return CachedCounter("llama.cpp /apply-template + /tokenize", counter)
        return CachedCounter("llama.cpp /tokenize + template overhead",
                             with_template_overhead(server, text))
    text = _llama_cpp_python_text(server)
    if text is not None:
        return CachedCounter("llama-cpp-python /extras/tokenize + template overhead",
                             with_template_overhead(server, text))
    return CachedCounter("calibrated from usage.prompt_tokens",
                         Calibrated(server.prompt_tokens, calibrate(server)))
