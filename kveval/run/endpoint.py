"""What the server says about itself: /v1/models, /metrics, /props, /version.

Everything here is best effort but the model list: a missing endpoint is normal. Uses the
standard library only, so the pre-flight check costs no heavy imports.
"""

from __future__ import annotations

import json
import re
import urllib.error
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from kveval.errors import EndpointError, UsageError
from kveval.formats.limits import writable
from kveval.run.http import TooLarge, fetch, parsed
from kveval.safe import redact_url

PROBE_TIMEOUT_S = 3.0  # each best-effort probe, whole answer included
MAX_CONTEXT = 1 << 24  # tokens: a context size a server reports above it is not believed
MAX_PROBE_BYTES = 16 << 20  # /metrics, /props, /version: a larger answer is not read
MAX_MODELS_BYTES = 64 << 20  # /v1/models
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class ServerInfo:
    models: list[dict[str, Any]]
    fingerprint: dict[str, Any]

    @property
    def model_ids(self) -> list[str]:
        return [str(m.get("id")) for m in self.models]

    def max_context(self, model: str) -> int | None:
        """The server's context limit in tokens, where it says (vLLM, llama.cpp)."""
        found = [entry.get("max_model_len") for entry in self.models if entry.get("id") == model]
        props = _table(self.fingerprint.get("props"))  # a server's own words: any JSON
        settings = _table(props.get("default_generation_settings"))
        engine = _table(self.fingerprint.get("engine"))
        found += [settings.get("n_ctx"), props.get("n_ctx"), engine.get("n_ctx")]
        return next((size for size in map(_tokens, found) if size is not None), None)


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _tokens(value: Any) -> int | None:
    """A context size: a positive integer (a bool is not one) up to MAX_CONTEXT; else None
    (a server's figure is bounded before anything is sized by it)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_CONTEXT
    return int(value) if ok else None


def redact(url: str) -> str:
    """The URL without user:password, so it can be written to a run file."""
    return redact_url(url)


def check_url(url: str) -> None:
    """Refuse a base URL that no request could use, before any work: an http(s) scheme,
    a host, a port from 1 to 65535."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"--endpoint {redact(url)}: not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--endpoint {redact(url)}: expected http(s)://HOST[:PORT]/v1")
    if port == 0:
        raise UsageError(f"--endpoint {redact(url)}: port 0 is not a port")


def server_root(base_url: str) -> str:
    """http://host:8000/v1 -> http://host:8000"""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def _get(url: str, api_key: str | None, timeout: float,
         cap: int = MAX_PROBE_BYTES) -> tuple[int, bytes]:
    return fetch(url, api_key, timeout, cap=cap)


def list_models(base_url: str, api_key: str | None, timeout: float = 8.0) -> list[dict[str, Any]]:
    """GET /v1/models; raise EndpointError in one line when the server cannot be reached."""
    url = base_url.rstrip("/") + "/models"
    try:
        status, body = _get(url, api_key, timeout, MAX_MODELS_BYTES)
    except TooLarge as exc:
        raise EndpointError(f"{redact(url)}: {exc}, not a model list") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EndpointError(f"cannot reach {redact(base_url)}: {reason}") from None
    if status in (401, 403):
        raise EndpointError(f"{redact(base_url)} refused the API key (HTTP {status}); "
                            "set KVEVAL_API_KEY or OPENAI_API_KEY")
    if status != 200:
        raise EndpointError(f"{redact(url)} answered HTTP {status}; is this an "
                            "OpenAI-compatible base URL ending in /v1?")
    try:
        data = json.loads(body).get("data")
    except (ValueError, AttributeError, RecursionError):  # not JSON, not an object, too deep
        data = None
    if not isinstance(data, list):
        raise EndpointError(f"{redact(url)} did not return an OpenAI model list")
    return [writable(m) for m in data if isinstance(m, dict)]


def choose_model(requested: str | None, available: list[str]) -> str:
    """The requested model if served; else the only model; else stop and list them."""
    if requested:
        if available and requested not in available:
            raise EndpointError(f"model {requested!r} is not served here; "
                                f"the server lists: {', '.join(available)}")
        return requested
    if len(available) == 1:
        return available[0]
    if not available:
        raise EndpointError("the server lists no models; pass --model")
    raise EndpointError(f"the server serves {len(available)} models; pick one with --model: "
                        f"{', '.join(available)}")


def parse_metrics(text: str) -> dict[str, Any]:
    """Prometheus text -> the labels of vLLM's *_info gauges, e.g. cache_config_info."""
    found: dict[str, Any] = {}
    for line in text.splitlines():
        if line.startswith("#") or "_info{" not in line:
            continue
        name, _, rest = line.partition("{")
        key = name.split(":")[-1]
        found[key] = dict(_LABEL.findall(rest.rsplit("}", 1)[0]))
    return found


def _body_or_none(root: str, path: str, api_key: str | None) -> bytes | None:
    """The body of a best-effort GET: None when the server has no such endpoint."""
    try:
        status, body = _get(root + path, api_key, PROBE_TIMEOUT_S)
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return body if status == 200 else None


def _json_or_none(root: str, path: str, api_key: str | None) -> Any:
    body = _body_or_none(root, path, api_key)
    try:
        return parsed(body) if body is not None else None
    except ValueError:
        return None


def _metrics(root: str, api_key: str | None) -> dict[str, Any] | None:
    body = _body_or_none(root, "/metrics", api_key)
    if body is None:
        return None
    return parse_metrics(body.decode("utf-8", "replace")) or None


def fingerprint(base_url: str, models: list[dict[str, Any]], api_key: str | None) -> dict[str, Any]:
    """Everything /v1/models, /metrics, /props and /version reveal; missing parts are left out."""
    root = server_root(base_url)
    found: dict[str, Any] = {"models": models}
    for key, value in (
        ("metrics", _metrics(root, api_key)),
        ("props", _json_or_none(root, "/props", api_key)),
        ("version", _json_or_none(root, "/version", api_key)),
    ):
        if value:
            found[key] = _trim_props(value) if key == "props" else value
    return writable(found)  # what a server sends, as a run file can hold it


def _trim_props(props: Any) -> Any:
    """llama.cpp's /props carries the whole chat template; keep the settings, not the text."""
    if not isinstance(props, dict):
        return props
    return {k: v for k, v in props.items() if k not in {"chat_template", "chat_template_tool_use"}}


def probe(base_url: str, api_key: str | None) -> ServerInfo:
    models = list_models(base_url, api_key)
    return ServerInfo(models=models, fingerprint=fingerprint(base_url, models, api_key))
