"""A server's environment as `kveval ab` records it: every value passed into it is a secret
unless its name is plainly a setting, and is recorded as a fingerprint, so no header, figure,
log or message holds it while a changed value still shows as a difference between runs.

Passed into the environment: `--baseline-env` and `--candidate-env` values, and the `K=V`
words of an `env K=V ... PROGRAM` prefix in `--serve`. Recorded in clear: the names of
`--record-env NAME`, and the settings of SAFE_NAMES and SAFE_PREFIXES (device selection,
thread counts, offline switches, the engines' own `VLLM_`, `SGLANG_`, `LLAMA_ARG_`, `OLLAMA_`
and `NCCL_` settings) unless the name looks like a secret (VLLM_API_KEY, HF_TOKEN: never).
A secret is recorded as `sha256:` and the first 12 hex digits of the SHA-256 of the
experiment's salt and the value: the salt is the folder's own, so the fingerprints of two
experiments are not linked.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SAFE_NAMES = frozenset({
    "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TOKENIZERS_PARALLELISM", "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "PYTORCH_CUDA_ALLOC_CONF",
    "CUDA_LAUNCH_BLOCKING", "PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG",
})
SAFE_PREFIXES = ("VLLM_", "SGLANG_", "LLAMA_ARG_", "OLLAMA_", "NCCL_", "TORCH_", "CUDA_")


def is_setting(name: str, recorded: Iterable[str] = ()) -> bool:
    """A name whose value is recorded in clear."""
    from kveval.masking import SECRET_NAME

    if name in set(recorded):
        return True
    if SECRET_NAME.search(name):
        return False
    return name in SAFE_NAMES or name.startswith(SAFE_PREFIXES)


def fingerprint(value: str, salt: str) -> str:
    digest = hashlib.sha256(f"{salt}\0{value}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"sha256:{digest[:12]}"


def shown(name: str, value: str, salt: str, recorded: Iterable[str] = ()) -> str:
    """The value as records hold it: itself for a setting, else its fingerprint."""
    return value if is_setting(name, recorded) else fingerprint(value, salt)


ENV_ARGUMENT = frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"})


def prefix_pairs(argv: Sequence[str]) -> list[tuple[int, str, str]]:
    """The `K=V` words before the program: an `env [OPTIONS] K=V ... PROGRAM` prefix (an
    option's own argument skipped), or `K=V ... PROGRAM` as a shell would read it:
    (position, name, value)."""
    found: list[tuple[int, str, str]] = []
    at = 1 if argv and argv[0].rsplit("/", 1)[-1] == "env" else 0
    while at < len(argv):
        word = argv[at]
        if at and word.startswith("-") and argv[0].rsplit("/", 1)[-1] == "env":
            at += 2 if word in ENV_ARGUMENT else 1
            continue
        name, sep, value = word.partition("=")
        if not sep or not ENV_NAME.fullmatch(name):
            break
        found.append((at, name, value))
        at += 1
    return found


def recorded_argv(argv: Sequence[str], salt: str, recorded: Iterable[str] = ()) -> list[str]:
    """The command line as records hold it: an env prefix's secret values fingerprinted."""
    words = list(argv)
    for at, name, value in prefix_pairs(argv):
        words[at] = f"{name}={shown(name, value, salt, recorded)}"
    return words


def secret_values(env: Iterable[tuple[str, str]], argv: Sequence[str],
                  recorded: Iterable[str] = ()) -> list[str]:
    """Every value passed into the environment that is not a setting."""
    pairs = [*env, *((name, value) for _, name, value in prefix_pairs(argv))]
    return [value for name, value in pairs if value and not is_setting(name, recorded)]
