"""The schema of task and suite files: every key known, every value of the right type and range.

A typo (`max_token = 5`) is an error naming the nearest known key, not a setting silently
ignored; `stop = "Question:"` is one stop string, not nine one-character ones.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from typing import Any

from kveval.errors import UsageError

SUITE_KEYS = ("task", "setup", "extra_body", "speed", "timeout")
NAME = re.compile(r"[A-Za-z0-9._-]+")

Check = Callable[[Any], str | None]  # None when the value is fine, else what it should be


def _int(low: int | None = None, high: int | None = None) -> Check:
    def check(value: Any) -> str | None:
        ok = isinstance(value, int) and not isinstance(value, bool)
        ok = ok and (low is None or value >= low) and (high is None or value <= high)
        if ok:
            return None
        if high is None:
            return "an integer" + (f" >= {low}" if low is not None else "")
        return f"an integer from {low} to {high}"
    return check


def _choice(*options: str) -> Check:
    return lambda v: None if v in options else "one of " + ", ".join(map(repr, options))


def _string(value: Any) -> str | None:
    return None if isinstance(value, str) and value.strip() else "a non-empty string"


def _name(value: Any) -> str | None:
    ok = isinstance(value, str) and NAME.fullmatch(value)
    return None if ok else "a name of letters, digits, '.', '_' and '-'"


def _strings(value: Any) -> str | None:
    ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    return None if ok else "a list of strings"


def _stop(value: Any) -> str | None:
    if isinstance(value, str) or _strings(value) is None:
        return None
    return "a string or a list of strings"


def _zero(value: Any) -> str | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0
    return None if ok else "0 (kveval runs at temperature 0; sampled answers are noise)"


def _lengths(value: Any) -> str | None:
    ok = isinstance(value, list) and value and all(
        (isinstance(v, int) and not isinstance(v, bool) and v > 0) or isinstance(v, str)
        for v in value)
    return None if ok else "a list of token lengths, e.g. [1024, 4096] or [\"4k\", \"16k\"]"


def _percents(value: Any) -> str | None:
    ok = isinstance(value, list) and value and all(_int(0, 100)(v) is None for v in value)
    return None if ok else "a list of percents from 0 to 100"


def _points(value: Any) -> str | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return None if ok and 0 <= value <= 100 else "a number of points from 0 to 100"


def _seconds(value: Any) -> str | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return None if ok and 0.1 <= value <= 1e6 else "seconds from 0.1 to 1000000 (each request " \
        "attempt's bound)"


def _table(value: Any) -> str | None:
    return None if isinstance(value, dict) else "a table"


TASK_KEYS: dict[str, Check] = {
    "name": _string, "adapter": _string, "label": _name, "version": _int(1),
    "api": _choice("completions", "chat"), "max_tokens": _int(1), "stop": _stop,
    "temperature": _zero, "limit": _int(1), "data": _string, "params": _table,
}
# Adapter parameters: in a [params] table or directly in the task's table.
PARAM_KEYS: dict[str, Check] = {
    "shots": _int(0), "shot_seed": _int(), "split": _choice("train", "test"),
    "fewshot": _choice("first", "lm-eval"), "fewshot_seed": _int(),
    "lengths": _lengths, "depths": _percents, "trials": _int(1), "seed": _int(),
    "distractors": _int(1, 50), "records": _int(2), "ask": _strings,
    "logprobs": _int(0, 100),  # top-K log-probabilities per answer token (0: off)
    "copy_lengths": _lengths, "needles": _int(1, 16),
    "margin": _points,  # the gate's --policy paired margin for this task (points)
}


def unknown(key: str, known: Iterable[str], where: str) -> UsageError:
    known = sorted(known)
    near = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean `{near[0]}`?" if near else f"known keys: {', '.join(known)}"
    return UsageError(f"{where}: unknown key `{key}`; {hint}")


def _check(key: str, value: Any, check: Check, where: str) -> None:
    wanted = check(value)
    if wanted is not None:
        raise UsageError(f"{where}: `{key} = {value!r}` must be {wanted}")


def check_task_table(table: dict[str, Any], where: str) -> None:
    """Raise UsageError for an unknown key or a bad value in a task's table."""
    for key, value in table.items():
        if key in TASK_KEYS:
            _check(key, value, TASK_KEYS[key], where)
        elif key in PARAM_KEYS:
            _check(key, value, PARAM_KEYS[key], where)
        else:
            raise unknown(key, [*TASK_KEYS, *PARAM_KEYS], where)
    for key, value in (table.get("params") or {}).items():
        if key not in PARAM_KEYS:
            raise unknown(key, PARAM_KEYS, f"{where} [params]")
        _check(key, value, PARAM_KEYS[key], where)


def _users(value: Any) -> str | None:
    ok = isinstance(value, list) and value and all(_int(1, 4096)(v) is None for v in value)
    return None if ok else "a list of concurrent users from 1 to 4096, e.g. [1, 32]"


# `kveval ab --speed`: the fixed streaming load's size (the usual serving benchmark's)
# bounded so that a load fits in memory and time: a prompt of 10**12 tokens was a MemoryError
SPEED_KEYS: dict[str, Check] = {"prompt_tokens": _int(1, 1 << 20),
                                "output_tokens": _int(1, 1 << 17),
                                "requests": _int(1, 100_000), "concurrency": _users}


def check_speed(table: Any, where: str) -> None:
    if not isinstance(table, dict):
        raise UsageError(f"{where}: [speed] must be a table")
    for key, value in table.items():
        if key not in SPEED_KEYS:
            raise unknown(key, SPEED_KEYS, f"{where} [speed]")
        _check(key, value, SPEED_KEYS[key], f"{where} [speed]")


def check_suite(data: dict[str, Any], where: str) -> None:
    """The top level of a suite file: [[task]] tables, a [setup] table, an [extra_body]
    table, a [speed] table."""
    for key in data:
        if key not in SUITE_KEYS:
            raise unknown(key, SUITE_KEYS, where)
    check_speed(data.get("speed", {}), where)
    setup = data.get("setup", {})
    if not isinstance(setup, dict) or not all(
            NAME.fullmatch(k) and isinstance(v, str) for k, v in setup.items()):
        raise UsageError(f"{where}: [setup] must be a table of names to strings, "
                         "e.g. kv_cache = \"q8_0\"")
    if not isinstance(data.get("extra_body", {}), dict):
        raise UsageError(f"{where}: extra_body must be a table")
    if "timeout" in data:
        _check("timeout", data["timeout"], _seconds, where)


def check_unique(names: list[str], where: str) -> None:
    """The same task twice would write colliding items: each entry needs its own label."""
    seen = set()
    for name in names:
        if name in seen:
            raise UsageError(f"{where}: task `{name}` appears twice; give each entry its own "
                             "`label` (e.g. label = \"gsm8k-chat\")")
        seen.add(name)
