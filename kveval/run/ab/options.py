"""The settings of one `kveval ab` experiment, checked before anything starts.

Commands are split as a shell splits them (shlex) and run without a shell: what is recorded
is exactly what ran. The secrets they carry are registered at once (kveval/masking.py), so
no header, figure, log or message holds them: what is secret by its name, by its form or by
`--secret-env NAME` (run/ab/env.py says which, the one place that does); every other value
is a setting, recorded in clear. A secret too short to mask inside a server's log is named
in one line (`short_note`).

Candidates: `--candidate ARGS` (named `candidate`), `--candidate NAME=ARGS` (repeatable), and
`--sweep FILE.toml`, one table per candidate (`[q8]` with `args` and `env`); each
`--candidate-env NAME:K=V` (or `K=V` where there is one candidate). Each candidate is its own
server start, run and gate against the one pool of the baseline and its restarts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kveval.errors import UsageError
from kveval.run.ab.env import Found, Names, named_values
from kveval.run.ab.side import NAME, Side, check_name, parse_env, split

TEACHER_FORCE = ("auto", "on", "off")
CANDIDATE = "candidate"  # a bare --candidate's name


@dataclass(frozen=True)
class Sizing:
    """--detect POINTS: the loss to show at 80%, the pilot's items, the budget."""

    detect: float
    pilot: int = 100
    starts: int | None = None  # server starts at most
    seconds: float | None = None  # no growth begins after this long


@dataclass(frozen=True)
class AbOptions:
    serve: tuple[str, ...]  # the server command, `{port}` where the port goes
    baseline: Side
    candidates: tuple[Side, ...]
    noise_runs: int
    suite: str
    data: str | None
    teacher_force: str  # auto, on or off
    speed: bool
    output: Path
    ready_timeout: float
    concurrency: int | None  # None: each run's own default (the server's slots)
    model: str | None
    dry_run: bool = False
    grace: float = 30.0  # --stop-grace: SIGTERM to SIGKILL
    record_env: tuple[str, ...] = ()  # names whose values are recorded in clear
    secret_env: tuple[str, ...] = ()  # names whose values are secrets
    salt: str = ""  # the experiment's own (ab.json): secrets' fingerprints
    parallel: int = 1  # servers up at once
    limit: int | None = None  # items a task in this pass (--detect sizes it), else the suite's
    sizing: Sizing | None = None  # --detect: the experiment sizes itself
    timeout: float | None = None  # --timeout: each request attempt's, else the suite's

    def command(self, side: Side) -> tuple[str, ...]:
        return (*self.serve, *side.args)

    @property
    def sides(self) -> tuple[Side, ...]:
        return (self.baseline, *self.candidates)

    @property
    def names(self) -> Names:
        return Names(self.record_env, self.secret_env)

    def secrets(self) -> Found:
        """The secrets the servers are given, each with the variable or flag holding it."""
        return [found for side in self.sides
                for found in named_values(side.env, self.command(side), self.names)]


def short_note(opts: AbOptions) -> str | None:
    """One line naming each secret too short to mask in the servers' logs, if any."""
    from kveval.masking import too_short

    return too_short(opts.secrets(), "the servers' logs")


def named(value: str) -> tuple[str, str]:
    """`NAME=ARGS` -> (NAME, ARGS); a bare `ARGS` -> ("candidate", ARGS)."""
    name, sep, rest = value.partition("=")
    if sep and not value.startswith("-") and not any(c.isspace() for c in name):
        return check_name(name, "--candidate"), rest  # a NAME=, valid or refused
    return CANDIDATE, value


def _env_of(pairs: tuple[str, ...], names: list[str]) -> dict[str, tuple[str, ...]]:
    """--candidate-env NAME:K=V per candidate; a plain K=V where there is one candidate."""
    found: dict[str, list[str]] = {name: [] for name in names}
    for pair in pairs:
        owner, sep, rest = pair.partition(":")
        if sep and owner in found and "=" not in owner:
            found[owner].append(rest)
        elif sep and "=" not in owner and NAME.fullmatch(owner):
            raise UsageError(f"--candidate-env {pair!r}: no candidate {owner!r} (candidates: "
                             f"{', '.join(names)})")
        elif len(names) == 1:
            found[names[0]].append(pair)
        else:
            raise UsageError(f"--candidate-env {pair!r}: name the candidate, e.g. "
                             f"--candidate-env {names[0]}:K=V (candidates: {', '.join(names)})")
    return {name: tuple(values) for name, values in found.items()}


def candidates(o: dict[str, Any]) -> list[Side]:
    """Every candidate: --candidate (bare or named), then the --sweep file's tables."""
    from kveval.run.ab.sweep import read_sweep

    given = [named(value) for value in o.get("candidate") or ()]
    swept = read_sweep(o["sweep"]) if o.get("sweep") else []
    names = [name for name, _ in given] + [side.name for side in swept]
    if not names:
        raise UsageError("give the candidate: --candidate ARGS, --candidate NAME=ARGS "
                         "(repeatable) or --sweep FILE.toml")
    folded = [n.lower() for n in names]  # file names: case apart on no filesystem
    twice = sorted({n for n in names if folded.count(n.lower()) > 1})
    if twice:
        raise UsageError(f"candidate {twice[0]!r} is given twice: each needs its own name "
                         "(--candidate NAME=ARGS)")
    envs = _env_of(tuple(o.get("candidate_env") or ()), names)
    sides = [Side(name, split(args, f"--candidate {name}"),
                  parse_env(envs[name], "--candidate-env")) for name, args in given]
    return sides + [replace(s, env=(*s.env, *parse_env(envs[s.name], "--candidate-env")))
                    for s in swept]


def check_distinct(baseline: Side, sides: list[Side]) -> None:
    setups = [(baseline.args, baseline.env)]
    for side in sides:
        if (side.args, side.env) in setups:
            twin = "--baseline" if (side.args, side.env) == setups[0] else "another candidate"
            raise UsageError(f"candidate {side.name!r} must change something against {twin}: "
                             "the two setups are the same")
        setups.append((side.args, side.env))


def from_cli(o: dict[str, Any]) -> AbOptions:
    from kveval.masking import register_secrets

    serve = split(o["serve"], "--serve")
    baseline = Side("baseline", split(o["baseline"] or "", "--baseline"),
                    parse_env(tuple(o["baseline_env"]), "--baseline-env"))
    found = candidates(o)
    check_distinct(baseline, found)
    names = Names(tuple(o.get("record_env") or ()), tuple(o.get("secret_env") or ()))
    opts = AbOptions(serve, baseline, tuple(found), o["noise_runs"], o["suite"], o["data"],
                     o["teacher_force"], o["speed"], Path(o["output"]), o["ready_timeout"],
                     o["concurrency"], o["model"], o["dry_run"], o["stop_grace"], names.record,
                     names.secret, parallel=o.get("parallel") or 1,
                     timeout=o.get("timeout"))
    register_secrets(secret for _, secret in opts.secrets())
    return opts
