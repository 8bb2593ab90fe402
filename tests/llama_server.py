"""llama.cpp's own llama-server (`make llama-server`, which `make test` runs: the build that made
the embedded engine's libraries) on 127.0.0.1 at a free port, for the integration tests and
benchmarks: started with a KV cache type, stopped however the with-block ends.

`--no-cache-idle-slots` unless `cache_idle_slots`: by default llama-server copies each idle
slot's KV cache to its host-memory prompt cache whenever a task starts (tools/server/
server-context.cpp). Forced decoding starts one task per answer token, and between two of an
item's requests its slot is idle: on an H200 with 16 slots a forced pass took 4.1 times as
long without the flag (run/forcing/idle_slots.py)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from kveval.run import engine_setup

ROOT = Path(__file__).resolve().parents[1]
BINARY = Path(os.environ.get("KVEVAL_LLAMA_SERVER", ROOT / "build/llama-server/bin/llama-server"))
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def available() -> bool:
    return BINARY.is_file() and os.access(BINARY, os.X_OK)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ready(origin: str) -> bool:
    try:
        with _NO_PROXY.open(origin + "/health", timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


@contextlib.contextmanager
def llama_server(model: Path, kv: str = "f16", slots: int = 2, ctx_per_slot: int = 2048,
                 threads: int | None = None, extra: tuple[str, ...] = (),
                 binary: Path = BINARY, timeout: float = 120.0,
                 cache_idle_slots: bool = False) -> Iterator[str]:
    """Yield the server's base URL (…/v1) once /health answers."""
    port = _free_port()
    args = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "-np", str(slots), "-c", str(slots * ctx_per_slot), "-fa", "on",
            "-ctk", kv, "-ctv", kv, "--no-webui",
            *(() if cache_idle_slots else ("--no-cache-idle-slots",)), *extra]
    args += ["-t", str(threads or engine_setup.available_cpus())]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + timeout
            while not _ready(f"http://127.0.0.1:{port}"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    tail = log.read().decode(errors="replace")[-2000:]
                    raise RuntimeError(f"llama-server did not start:\n{tail}")
                time.sleep(0.2)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
