"""`kveval check`: what a server offers kveval, found in a few seconds, before any long run.

Probes, each bounded in time: the model list and the fingerprint a run would record, a
one-token completions and chat request at temperature 0, the largest `--logprobs K` each API
returns (from a short ladder), the teacher-forcing method `run --teacher-force` would
choose (run/forcing/method.py) tried on one tiny item, whether a llama-server copies its idle
slots at every task start (run/forcing/idle_slots.py), whether one request's log-probabilities
are the same alone and in a batch (run/invariance.py), and the tokenizer and chat-template
endpoints. What the server does
not tell (its KV cache type, its attention backend, its version) is named as `--setup` keys
to state. Nothing here writes a file.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from kveval.run.client import ClientConfig, Connection, asked_k, checked, make_client, send
from kveval.run.endpoint import ServerInfo, server_root
from kveval.run.forcing.idle_slots import idle_cache
from kveval.run.forcing.method import LACKS, Method, Probe, select, server_slots
from kveval.run.interrupt import run as run_async
from kveval.run.invariance import Invariance, batch_invariance

LADDER = (1, 5, 10, 20)  # --logprobs K tried, each as one one-token request
CHECK_TIMEOUT_S = 5.0  # each request
# each request of the probes a loaded CPU takes longest on: a forced item, the idle-slot
# cache's and the batch's requests (several at once against a server of few slots)
SLOW_TIMEOUT_S = 30.0
EMBEDDED_TIMEOUT_S = 60.0  # each request to the embedded engine: a CPU, its first answers cold
HELLO = "The capital of France is"


@dataclass(frozen=True)
class Check:
    """Everything `kveval check` reports; `runnable` is its exit status."""

    endpoint: str
    models: list[str]
    model: str | None
    fingerprint: dict[str, Any]
    apis: dict[str, str | None] = field(default_factory=dict)  # api -> None (works) or why not
    max_logprobs: dict[str, int | None] = field(default_factory=dict)  # api -> largest K seen
    teacher_force: dict[str, Any] = field(default_factory=dict)
    endpoints: dict[str, str | None] = field(default_factory=dict)  # tokenizer, chat template
    setup_to_state: list[str] = field(default_factory=list)
    seconds: float = 0.0
    batch_invariance: dict[str, Any] | None = None
    advice: list[str] = field(default_factory=list)  # what to change before a forced run
    proxy: dict[str, Any] | None = None  # the proxy every request passes, and what it sees

    @property
    def problems(self) -> list[str]:
        """Why a rollout suite (completions and chat items) cannot run; empty: it can."""
        if self.model is None:
            return ["no model to run (the server lists several: pass --model)"]
        return [f"{api} at temperature 0: {why}" for api, why in self.apis.items() if why]

    def to_json(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "models": self.models, "model": self.model,
                "fingerprint": self.fingerprint, "apis": self.apis,
                "max_logprobs": self.max_logprobs, "teacher_force": self.teacher_force,
                "endpoints": self.endpoints, "setup_to_state": self.setup_to_state,
                "batch_invariance": self.batch_invariance, "advice": self.advice,
                "runnable": not self.problems, "problems": self.problems,
                "seconds": round(self.seconds, 2), "proxy": self.proxy}


def summary(info: ServerInfo, model: str | None) -> dict[str, Any]:
    """The fingerprint's parts a user reads: engine and version, KV cache, context length."""
    fp = info.fingerprint
    props, version, engine = _dict(fp, "props"), _dict(fp, "version"), _dict(fp, "engine")
    cache = _dict(_dict(fp, "metrics"), "cache_config_info")
    found = {
        "engine": engine.get("engine") or _engine_name(fp),
        "engine_version": (engine.get("engine_version") or version.get("version")
                           or _build(props.get("build_info"))),
        "kv_cache": engine.get("kv_cache_type") or cache.get("cache_dtype"),
        **(_context(info, model) if model else {}),
    }
    return {k: v for k, v in found.items() if v is not None}


def _context(info: ServerInfo, model: str) -> dict[str, Any]:
    """The context a request may fill; llama-server's `n_ctx` is each slot's (`-c 16384
    -np 4`: 4096 a slot), so its slots and their total beside it."""
    size = info.max_context(model)
    settings = _dict(_dict(info.fingerprint, "props"), "default_generation_settings")
    slots = server_slots(info.fingerprint)
    if size is None or slots is None or settings.get("n_ctx") != size:
        return {"context_length": size}
    return {"context_length_per_slot": size, "slots": slots,
            "context_length_total": size * slots}


def _build(info: Any) -> Any:
    """llama-server's build_info, unless a build without git metadata made it "b0-..." (a
    version that names nothing, to be stated with --setup instead)."""
    return None if isinstance(info, str) and info.startswith("b0-") else info


def _dict(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _engine_name(fp: dict[str, Any]) -> str | None:
    if isinstance(fp.get("props"), dict) and "build_info" in fp["props"]:
        return "llama.cpp llama-server"
    if (fp.get("metrics") or {}).get("cache_config_info") is not None:
        return "vLLM"
    return None


def setup_keys(found: dict[str, Any], embedded: bool) -> list[str]:
    """`--setup` keys whose value the server did not tell."""
    wanted = [key for key in ("kv_cache", "engine_version") if key not in found]
    return wanted if embedded else [*wanted, "attention"]


# ---------------------------------------------------------------- the requests


def _body(api: str, model: str, k: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": 1, "temperature": 0.0}
    if api == "chat":
        body["messages"] = [{"role": "user", "content": HELLO}]
        if k:
            body.update({"logprobs": True, "top_logprobs": k})
    else:
        body["prompt"] = HELLO
        if k:
            body["logprobs"] = k
    return body


async def _api(conn: Connection, api: str, model: str) -> str | None:
    reply = checked(await send(conn, _body(api, model)))
    if reply.error is not None:
        return reply.error
    return None if reply.text is not None else "the answer held no text"


async def _max_k(conn: Connection, api: str, model: str) -> int | None:
    """The largest K of the ladder returned in full; None when none is."""
    best = None
    for k in LADDER:
        body = _body(api, model, k)
        reply = checked(await send(conn, body))
        lp = reply.logprobs
        if reply.error or not lp or not lp["top_tokens"] or len(lp["top_tokens"][0]) < asked_k(
                body):
            break
        best = k
    return best


async def _forced(conn: Connection, method: Method, base_url: str, model: str) -> str | None:
    """One tiny completions item forced by the method; None when it works (a run by it
    would keep the reply: client.checked), else why not."""
    from kveval.run.forcing.item import probe
    from kveval.run.forcing.plan import Context, plan_forced

    run = _tiny_run(model)
    ctx = Context(method, base_url, model, 5)
    reply = checked(await probe(plan_forced(run, ctx).jobs[0].forced, conn))
    if reply.error is None and reply.logprobs and reply.logprobs["tokens"]:
        return None
    why = reply.error or "the reply held no log-probabilities"
    return f"{why}; {LACKS}" if method.name == "echo" else why


def forcing_method(base_url: str, model: str, api_key: str | None,
                   fingerprint: dict[str, Any]) -> tuple[Method, str | None]:
    """The method `run --teacher-force` would choose, and, tried on one tiny item as `check`
    tries it, None when it works, else why not (`kveval ab --teacher-force auto`)."""
    method = select(Probe(base_url, model, api_key), fingerprint)

    async def tried() -> str | None:
        conn = make_client(ClientConfig(base_url, api_key, SLOW_TIMEOUT_S, retries=0))
        try:
            return await _forced(conn, method, base_url, model)
        finally:
            await conn.close()

    return method, run_async(tried())


def _tiny_run(model: str) -> Any:
    from pathlib import Path

    from kveval.formats.records import ItemRecord, Run, RunHeader

    header = RunHeader(label="check", endpoint="", model=model,
                       tasks=[{"name": "check", "adapter": "prompts", "version": "1"}],
                       sampling={}, concurrency=1, fingerprint={}, created="", kveval_version="")
    item = ItemRecord(task="check", item_id="check/0", prompt_sha256="", status="ok",
                      request={"prompt": HELLO}, output=" Paris.")
    return Run(header, [item], Path("check"))


QUIET = ("a quiet floor: forced restarts agree bit for bit, so one forced noise run "
         "shows it")
NOISY = ("the floor moves with batching: three forced noise runs or more measure its spread "
         "(kveval plan --detect-kl)")
EMBEDDED_INVARIANT = Invariance(True, 0, 0.0, "the embedded engine answers one request at a "
                                              "time")


async def _invariance(conn: Connection, apis: dict[str, str | None],
                      ks: dict[str, int | None], model: str) -> Invariance | None:
    api = next((a for a in ("chat", "completions") if apis[a] is None and ks[a]), None)
    return None if api is None else await batch_invariance(conn, api, model, min(ks[api] or 1, 5))


def invariance_json(found: Invariance | None) -> dict[str, Any] | None:
    if found is None:
        return None
    meaning = QUIET if found.identical else NOISY if found.identical is False else None
    return {"identical": found.identical, "positions": found.positions,
            "largest_change": found.largest, "summary": found.why, "floor": meaning}


async def _probe_all(config: ClientConfig, slow_s: float, model: str, method: Method,
                     embedded: bool) -> dict[str, Any]:
    """Every probe; the slow ones (SLOW_TIMEOUT_S) each within `slow_s` seconds."""
    conn = make_client(config)
    slow = make_client(dataclasses.replace(config, timeout=slow_s))
    try:
        apis = {api: await _api(conn, api, model) for api in ("completions", "chat")}
        ks = {api: (await _max_k(conn, api, model)) if apis[api] is None else None
              for api in apis}
        forced = await _forced(slow, method, config.base_url, model)
        idle = (await idle_cache(slow, server_root(config.base_url), method.slots)
                if method.name == "forced_decoding" else None)
        same = EMBEDDED_INVARIANT if embedded else await _invariance(slow, apis, ks, model)
    finally:
        await conn.close()
        await slow.close()
    return {"apis": apis, "max_logprobs": ks, "forced": forced, "idle": idle,
            "invariance": same}


def through_proxy(base_url: str, api_key: str | None) -> dict[str, Any] | None:
    """The proxy the environment sends every request through, and whether it receives the
    credentials (the key, the URL's user:password): it sees them as the server does."""
    from kveval.run.credentials import proxy
    from kveval.secret_sources import url_secrets

    found = proxy(base_url)
    if found is None:
        return None
    return {"url": found[0], "variable": found[1],
            "receives_credentials": bool(api_key or url_secrets(base_url))}


def check(base_url: str, label: str, info: ServerInfo, model: str | None,
          api_key: str | None, embedded: bool = False, timeout: float | None = None) -> Check:
    """Probe the server (already listed by `probe`); every request within `timeout` seconds
    (None: CHECK_TIMEOUT_S, the slow probes SLOW_TIMEOUT_S, EMBEDDED_TIMEOUT_S for the
    embedded engine)."""
    started = time.perf_counter()
    found = summary(info, model)
    proxy = None if embedded else through_proxy(base_url, api_key)
    if model is None:
        return Check(label, info.model_ids, None, found,
                     setup_to_state=setup_keys(found, embedded), proxy=proxy)
    method = select(Probe(base_url, model, api_key), info.fingerprint, embedded)
    if "engine" not in found and not method.server.startswith("unknown"):
        found["engine"] = method.server
    bound = timeout or (EMBEDDED_TIMEOUT_S if embedded else CHECK_TIMEOUT_S)
    config = ClientConfig(base_url, api_key, bound, retries=0)
    seen = run_async(_probe_all(config, timeout or max(bound, SLOW_TIMEOUT_S), model, method,
                                embedded))
    idle = seen["idle"]
    forced = {"method": method.name if seen["forced"] is None else None,
              "server": method.server, "chat_items": method.template,
              "why_not": seen["forced"],
              "idle_slot_cache": None if idle is None else {"caches": idle.caches,
                                                           "summary": idle.why}}
    endpoints = {"tokenizer": _tokenizer(method, embedded), "chat_template": method.template}
    advice = [idle.advice] if idle is not None and idle.advice else []
    return Check(label, info.model_ids, model, found, seen["apis"], seen["max_logprobs"],
                 forced, endpoints, setup_keys(found, embedded), time.perf_counter() - started,
                 invariance_json(seen["invariance"]), advice, proxy)


def _tokenizer(method: Method, embedded: bool) -> str | None:
    if embedded:
        return "llama-cpp-python /extras/tokenize"
    return {"forced_decoding": "llama.cpp /tokenize", "sglang_generate": "SGLang /tokenize",
            "prompt_logprobs": "vLLM /tokenize"}.get(method.name)
