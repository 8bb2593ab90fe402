"""The embedded engine: llama-cpp-python's OpenAI-compatible server on a bundled small model.

`serve` starts `python -m llama_cpp.server` as a child process on 127.0.0.1 at a free port,
waits until /v1/models answers, yields an `Engine` (base URL, model id, fingerprint) and
stops the server however the with-block ends: normally, by an exception, or by Ctrl+C.
The child runs in its own process group; it is also stopped at interpreter exit, on
SIGTERM/SIGHUP to this process, and (on Linux) killed by the kernel if this process dies.
What the server runs (config checks, model, fingerprint) is settled beforehand by
`kveval.run.engine_setup.prepare`.
"""

from __future__ import annotations

import atexit
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
from kveval.run.engine_setup import EngineConfig, ServerPlan, prepare

STARTUP_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 10.0
PORT_ATTEMPTS = 3
LOG_TAIL_LINES = 8

Log = Callable[[str], None]


@dataclass(frozen=True)
class Engine:
    base_url: str  # "http://127.0.0.1:PORT/v1"
    model: str  # the model id the server serves (what /v1/models lists)
    fingerprint: dict[str, Any]


class _PortInUse(Exception):
    pass


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
from kveval.run.engine_topk import install
install()  # the top-K log-probabilities by numpy, the same to the last bit
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
