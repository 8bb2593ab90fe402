"""One setup of an `ab` experiment (the baseline's, or a candidate's): its name, the
arguments its server command gets and its environment, and how each is read from text."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from kveval.errors import UsageError
from kveval.run.ab.env import ENV_NAME

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
RESERVED = re.compile(r"(?i)(baseline|noise\d+|gate|report|ab|servers|suite|.*-forced)")
Env = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Side:
    """One setup: the extra arguments and environment the server command gets."""

    name: str  # baseline, or the candidate's name (its label and file name)
    args: tuple[str, ...]
    env: Env


def split(text: str, flag: str) -> tuple[str, ...]:
    if "\0" in text:
        raise UsageError(f"{flag}: a NUL character cannot be passed to a program")
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise UsageError(f"{flag} {text!r}: cannot split it as a shell would ({exc})") from None


def parse_env(pairs: tuple[str, ...], flag: str) -> Env:
    found: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not ENV_NAME.fullmatch(key) or "\0" in value:
            raise UsageError(f"{flag} {pair!r}: expected NAME=VALUE, e.g. {flag} "
                             "VLLM_ATTENTION_BACKEND=FLASHINFER")
        found[key] = value
    return tuple(found.items())


def check_name(name: str, flag: str) -> str:
    if not NAME.fullmatch(name) or RESERVED.fullmatch(name):
        raise UsageError(f"{flag} {name!r}: a candidate's name is its file name: letters, "
                         "digits, '_', '.', '-', at most 64, and not baseline, noiseN, gate, "
                         "report or a name ending in -forced")
    return name
