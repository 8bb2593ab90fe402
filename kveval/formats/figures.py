"""What `kveval ab` measured of a server while it was up: `DIR/servers/LABEL.json`.

One small JSON file per server label (baseline, noise1, ..., candidate), rewritten whole
after every step (atomic.py) through the one door out (secrets masked): how it was started,
each start's port and seconds to ready, the KV pool its log told, how fast its run went, and
the `--speed` load. The gate's trade (judge/trade.py) reads it beside the run headers.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import msgspec

from kveval.errors import RunFileError

FIGURES_VERSION = 1


class KvPool(msgspec.Struct, frozen=True, omit_defaults=True):
    """The KV cache as the server's log tells it."""

    tokens: int | None = None  # tokens the whole pool holds
    bytes_per_token: float | None = None
    cache_type: str | None = None  # e.g. q8_0, or "K q8_0, V f16"
    max_concurrency: float | None = None  # vLLM: requests of `at_tokens` that fit at once
    at_tokens: int | None = None
    said: tuple[str, ...] = ()  # the log lines (or model facts) the figures come from
    source: str = "server log"  # or "model file", "config.json": where the bytes came from


class Sending(msgspec.Struct, frozen=True):
    """One stretch of a run's sending (a resumed run has several)."""

    items: int  # records written
    output_tokens: int  # completion tokens of its answered items
    wall_s: float
    load_1m: tuple[float, float] | None = None  # the host's 1-minute load, at start and end
    cpus: int | None = None  # the host's CPU count


class RunFigures(msgspec.Struct, frozen=True):
    """The free-running run on this server: its pace and latency."""

    concurrency: int
    sent: tuple[Sending, ...] = ()
    items: int = 0  # answered items on file
    latency_p50_s: float | None = None
    latency_p95_s: float | None = None

    @property
    def output_tokens_per_s(self) -> float | None:
        wall = sum(s.wall_s for s in self.sent)
        tokens = sum(s.output_tokens for s in self.sent)
        return tokens / wall if wall > 0 and tokens > 0 else None

    @property
    def host_load(self) -> float | None:
        """The host's mean 1-minute load average over the stretches that recorded it."""
        loads = [x for s in self.sent if s.load_1m for x in s.load_1m]
        return sum(loads) / len(loads) if loads else None

    @property
    def cpus(self) -> int | None:
        return next((s.cpus for s in self.sent if s.cpus), None)


class Load(msgspec.Struct, frozen=True):
    """The `--speed` load at one concurrency: streamed requests of random prompts."""

    concurrency: int
    requests: int
    errors: int
    wall_s: float
    prompt_tokens: float | None = None  # mean, as the server counted them
    output_tokens: float | None = None  # mean
    output_tokens_per_s: float | None = None
    ttft_p50_s: float | None = None  # time to first token
    ttft_p95_s: float | None = None
    tpot_p50_s: float | None = None  # time per output token after the first
    tpot_p95_s: float | None = None
    error: str | None = None  # the first error's message


class Start(msgspec.Struct, frozen=True):
    port: int
    ready_s: float
    at: str  # ISO time


class ServerFigures(msgspec.Struct, frozen=True):
    label: str
    command: tuple[str, ...]  # as given, `{port}` kept
    env: dict[str, str] = {}
    starts: tuple[Start, ...] = ()
    kv: KvPool | None = None
    run: RunFigures | None = None
    speed: tuple[Load, ...] = ()
    version: int = FIGURES_VERSION


def write_figures(path: Path, figures: ServerFigures) -> None:
    from kveval.atomic import write_bytes
    from kveval.formats.limits import writable
    from kveval.sink import json_text

    # msgspec's builtins, NaN and the infinities as null (as msgspec.json writes them)
    text = json_text(writable(msgspec.to_builtins(figures)))
    try:
        write_bytes(path, text.encode("utf-8") + b"\n")
    except OSError as exc:
        raise RunFileError(f"{path}: cannot write ({exc.strerror or exc})") from None


def read_figures(path: Path) -> ServerFigures:
    """One line naming the file and what is wrong with it, never a traceback."""
    from kveval.formats.limits import read_whole

    try:
        data = read_whole(path, 1 << 20)
    except FileNotFoundError:
        raise RunFileError(f"{path}: no such file") from None
    except OSError as exc:
        raise RunFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        figures = msgspec.json.decode(data, type=ServerFigures)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise RunFileError(f"{path}: not a kveval ab figures file ({exc})") from None
    if figures.version != FIGURES_VERSION:
        raise RunFileError(f"{path}: figures version {figures.version}; this kveval reads "
                           f"{FIGURES_VERSION}")
    for start in figures.starts:
        if timestamp(start.at) is None:
            raise RunFileError(f"{path}: not a kveval ab figures file (a start's `at`, "
                               f"{start.at[:40]!r}, is no ISO time)")
    return figures


def timestamp(at: str) -> float | None:
    """A start's `at` (ISO time) as seconds since the epoch, or None where it is not one."""
    try:
        return datetime.fromisoformat(at).timestamp()
    except (ValueError, OverflowError, OSError):
        return None


def read_optional(path: Path) -> ServerFigures | None:
    return read_figures(path) if path.exists() else None


class _Timed(msgspec.Struct):
    """The fields of a run file's line that its timing needs (the rest is skipped)."""

    type: str = ""
    status: str = ""
    latency_s: float | None = None
    finish_reason: str | None = None


class Answered(NamedTuple):
    """A run's answered items as its speed figures need them."""

    latencies: list[float]  # of the answered items that hold one
    items: int = 0  # answered items
    cut: int = 0  # of them, those that stopped at max_tokens (finish_reason "length")


def answered(path: Path) -> Answered:
    """Each answered item's latency in a run file and how many were cut at max_tokens, read
    without the rest of its records (judging reads runs lean, without them); nothing where
    the file cannot be read."""
    decoder = msgspec.json.Decoder(_Timed)
    found, items, cut = [], 0, 0
    try:
        with path.open("rb") as fh:
            for line in fh:
                try:
                    item = decoder.decode(line)
                except (msgspec.ValidationError, msgspec.DecodeError):
                    continue
                if item.type == "item" and item.status == "ok":
                    items += 1
                    cut += item.finish_reason == "length"
                    found.extend([item.latency_s] if item.latency_s is not None else [])
    except OSError:
        return Answered([])
    return Answered(found, items, cut)
