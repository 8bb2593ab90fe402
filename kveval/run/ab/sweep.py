"""`kveval ab --sweep FILE.toml`: the candidates a user chooses between, one table each.

    [q8]
    args = "--cache-type-k q8_0 --cache-type-v q8_0"

    [q4-flash]
    args = ["--cache-type-k", "q4_0", "--cache-type-v", "q4_0"]
    env = { LLAMA_ARG_FLASH_ATTN = "on" }

A table's name is the candidate's name (its run file's name); `args` is a string split as a
shell would split it, or a list of words; `env` a table of strings. Anything else is one line
and exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kveval.errors import UsageError
from kveval.run.ab.env import ENV_NAME
from kveval.run.ab.side import Side, check_name, split

KEYS = {"args", "env"}
MAX_BYTES = 1 << 20


def _load(path: str) -> dict[str, Any]:
    from kveval.formats.limits import read_whole
    from kveval.run.tasks import tomllib

    try:
        data = read_whole(Path(path), MAX_BYTES, UsageError)
    except OSError as exc:
        raise UsageError(f"--sweep {path}: cannot read ({exc.strerror or exc})") from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except RecursionError:
        raise UsageError(f"--sweep {path}: nested too deeply to be a sweep") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"--sweep {path}: not a TOML file ({exc})") from None


def _args(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return split(value, where)
    if isinstance(value, list) and all(isinstance(w, str) and "\0" not in w for w in value):
        return tuple(value)
    raise UsageError(f"{where}: `args` is a string or a list of strings")


def _env(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and ENV_NAME.fullmatch(k) and isinstance(v, str) and "\0" not in v
            for k, v in value.items()):
        raise UsageError(f"{where}: `env` is a table of NAME = \"value\" strings")
    return tuple(value.items())


def read_sweep(path: str) -> list[Side]:
    """The candidates of a sweep file, in its order (options.Side)."""
    found = []
    for name, table in _load(path).items():
        where = f"--sweep {path} [{name}]"
        check_name(name, f"--sweep {path}: table")
        if not isinstance(table, dict) or set(table) - KEYS or not table:
            raise UsageError(f"{where}: a candidate's table holds `args` and `env`, nothing "
                             "else")
        found.append(Side(name, _args(table.get("args", ""), where),
                          _env(table.get("env", {}), where)))
    if not found:
        raise UsageError(f"--sweep {path}: no candidate table (e.g. [q8] with args = \"...\")")
    return found
