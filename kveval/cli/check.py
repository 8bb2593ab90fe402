"""`kveval check`: what a server offers kveval, in a few seconds, with no run file."""

from __future__ import annotations

from typing import Any

import click

from kveval.cli import options
from kveval.cli.run import ENV_ENDPOINT

KV_TYPES = ("f16", "q8_0", "q4_0")


@click.command()
@click.option("--endpoint", envvar=ENV_ENDPOINT, metavar="URL", type=options.Endpoint(),
              help="OpenAI-compatible base URL incl. /v1 (env KVEVAL_ENDPOINT). Unset: check "
                   "the embedded llama.cpp engine as `kveval run` would start it.")
@click.option("--model", help="Model id to check. Default: the one model /v1/models lists.")
@click.option("--kv-cache-type", type=click.Choice(KV_TYPES), default="f16", show_default=True,
              help="Embedded engine only: its KV cache type.")
@click.option("--ctx", type=click.IntRange(min=256), default=4096, show_default=True,
              help="Embedded engine only: its context size.")
@click.option("--timeout", type=options.Finite(min=0.1), default=None, metavar="SECONDS",
              help="Each probe request's limit: more for a slow or loaded server (a CPU). "
                   "Default: 5, 30 for the forced, idle-slot and batch probes, the embedded "
                   "engine 60.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def check(endpoint: str | None, model: str | None, kv_cache_type: str, ctx: int,
          timeout: float | None, as_json: bool) -> int:
    """What kveval can do against a server: models, fingerprint, completions and chat at
    temperature 0, the largest --logprobs K, the teacher-forcing method, tokenizer and chat
    template, and the --setup keys to state. Exit 0 when a rollout suite can run, 2 (with the
    reason) when it cannot."""
    from kveval.errors import EndpointError
    from kveval.run.check import check as probe_server
    from kveval.run.credentials import api_key
    from kveval.run.endpoint import check_url, choose_model, probe, redact

    if endpoint:
        check_url(endpoint)
        info = _probed(probe, endpoint, api_key())
        chosen = _chosen(choose_model, model, info.model_ids)
        result = probe_server(endpoint, redact(endpoint), info, chosen, api_key(),
                              timeout=timeout)
    else:
        result = _embedded(model, kv_cache_type, ctx, timeout)
    from kveval.sink import echo_json, json_text

    if as_json:
        echo_json(json_text(result.to_json(), indent=1))
    else:
        click.echo(render(result.to_json()))
    if result.problems:
        raise EndpointError("a rollout suite cannot run here: " + "; ".join(result.problems))
    return 0


def _probed(probe: Any, endpoint: str, key: str | None) -> Any:
    """The model list and fingerprint; a failure says so, and through which proxy (that
    proxy saw the request, and the key with it)."""
    from kveval.errors import EndpointError
    from kveval.run.check import through_proxy

    try:
        return probe(endpoint, key)
    except EndpointError as exc:
        found = through_proxy(endpoint, key)
        if found is None:
            raise
        raise EndpointError(f"{exc} (through the proxy {_proxy(found)})") from None


def _chosen(choose: Any, model: str | None, ids: list[str]) -> str | None:
    from kveval.errors import EndpointError

    try:
        return str(choose(model, ids))
    except EndpointError:
        if model:
            raise
        return None


def _embedded(model: str | None, kv_cache_type: str, ctx: int, timeout: float | None) -> Any:
    from kveval.run.check import check as probe_server
    from kveval.run.endpoint import ServerInfo, probe
    from kveval.run.engine_setup import EngineConfig
    from kveval.run.local import serve

    config = EngineConfig(kv_cache_type=kv_cache_type, ctx=ctx, logits_all=True)
    with serve(config) as engine:
        info = probe(engine.base_url, None)
        info = ServerInfo(info.models, {**info.fingerprint, "engine": engine.fingerprint})
        return probe_server(engine.base_url, "embedded", info, model or engine.model, None,
                            embedded=True, timeout=timeout)


def _cell(value: Any) -> str:
    from kveval.safe import one_line

    if value is None:
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_cell(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ", ".join(map(_cell, value)) or "-"
    return one_line(str(value))


def _idle(found: dict[str, Any] | None) -> str | None:
    if not found:
        return None
    caches = found.get("caches")
    said = ("copies idle slots at every task start" if caches is True
            else "does not copy idle slots" if caches is False else "cannot tell")
    return f"{said} ({found.get('summary')})"


def _invariance(found: dict[str, Any] | None) -> str | None:
    if not found:
        return None
    return "; ".join(str(part) for part in (found.get("summary"), found.get("floor")) if part)


def _proxy(found: dict[str, Any] | None) -> str:
    if not found:
        return "none: requests go to the endpoint directly"
    sees = ("the API key and the URL's credentials with them" if found["receives_credentials"]
            else "no credentials: none are set")
    return f"{found['url']} ({found['variable']}): every request passes it, {sees}"


def render(data: dict[str, Any]) -> str:
    """The table: one line per finding; every server string stripped for the terminal."""
    apis = {api: "works" if why is None else f"fails: {why}" for api, why in data["apis"].items()}
    tf = data["teacher_force"]
    method = tf.get("method") or f"none ({tf.get('why_not')})" if tf else "-"
    rows = [
        ("endpoint", data["endpoint"]), ("models", data["models"]), ("model", data["model"]),
        ("fingerprint", data["fingerprint"]), ("completions", apis.get("completions")),
        ("chat", apis.get("chat")), ("max --logprobs K", data["max_logprobs"]),
        ("teacher forcing", method), ("  server taken for", tf.get("server")),
        ("  chat items", tf.get("chat_items") or ("cannot be forced" if tf else None)),
        ("  idle-slot cache", _idle(tf.get("idle_slot_cache"))),
        ("batch invariance", _invariance(data.get("batch_invariance"))),
        ("tokenizer", data["endpoints"].get("tokenizer")),
        ("chat template", data["endpoints"].get("chat_template")),
        ("state with --setup", data["setup_to_state"]),
        ("proxy", _proxy(data.get("proxy"))),
        ("verdict", "a rollout suite can run" if data["runnable"] else
         "cannot run: " + "; ".join(data["problems"])),
        ("took", f"{data['seconds']:.1f} s"),
    ]
    rows[-1:-1] = [("advice", advice) for advice in data.get("advice") or ()]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {_cell(value)}" for name, value in rows)
