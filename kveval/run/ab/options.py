"""The settings of one `kveval ab` experiment, checked before anything starts.

Commands are split as a shell splits them (shlex) and run without a shell: what is recorded
is exactly what ran. The secrets they carry are registered at once (kveval/masking.py), so
no header, figure, log or message holds them: the values of environment variables whose
names look like secrets (HF_TOKEN, VLLM_API_KEY), the value of a command-line flag whose name
does (`--api-key KEY`, `--hf-token=TOKEN`), and any word shaped like a credential.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kveval.errors import UsageError

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TEACHER_FORCE = ("auto", "on", "off")
Env = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Side:
    """One setup: the extra arguments and environment the server command gets."""

    name: str  # baseline or candidate
    args: tuple[str, ...]
    env: Env


@dataclass(frozen=True)
class AbOptions:
    serve: tuple[str, ...]  # the server command, `{port}` where the port goes
    baseline: Side
    candidate: Side
    noise_runs: int
    suite: str
    data: str | None
    teacher_force: str  # auto, on or off
    speed: bool
    output: Path
    ready_timeout: float
    concurrency: int
    model: str | None
    dry_run: bool = False
    grace: float = 30.0  # --stop-grace: SIGTERM to SIGKILL

    def command(self, side: Side) -> tuple[str, ...]:
        return (*self.serve, *side.args)


def split(text: str, flag: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise UsageError(f"{flag} {text!r}: cannot split it as a shell would ({exc})") from None


def parse_env(pairs: tuple[str, ...], flag: str) -> Env:
    found: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not ENV_NAME.fullmatch(key):
            raise UsageError(f"{flag} {pair!r}: expected NAME=VALUE, e.g. {flag} "
                             "VLLM_ATTENTION_BACKEND=FLASHINFER")
        found[key] = value
    return tuple(found.items())


def secrets(argv: tuple[str, ...], env: Env) -> list[str]:
    """The secrets a command line and its environment carry (see the module's docstring)."""
    from kveval.masking import SECRET_NAME, looks_like_credential, named_secrets

    found = named_secrets(dict(env))
    for at, word in enumerate(argv):
        name, sep, value = word.lstrip("-").partition("=")
        if word.startswith("-") and SECRET_NAME.search(name):
            found += [value] if sep else list(argv[at + 1:at + 2])
        elif looks_like_credential(word):
            found.append(word)
    return [s for s in found if s]


def from_cli(o: dict[str, Any]) -> AbOptions:
    from kveval.masking import register_secrets

    serve = split(o["serve"], "--serve")
    sides = [Side(name, split(o[name] or "", f"--{name}"),
                  parse_env(tuple(o[f"{name}_env"]), f"--{name}-env"))
             for name in ("baseline", "candidate")]
    for side in sides:
        register_secrets(secrets((*serve, *side.args), side.env))
    if sides[0].args == sides[1].args and sides[0].env == sides[1].env:
        raise UsageError("--candidate (and --candidate-env) must change something against "
                         "--baseline: the two setups are the same")
    return AbOptions(serve, sides[0], sides[1], o["noise_runs"], o["suite"], o["data"],
                     o["teacher_force"], o["speed"], Path(o["output"]), o["ready_timeout"],
                     o["concurrency"], o["model"], o["dry_run"], o["stop_grace"])
