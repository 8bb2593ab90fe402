"""The server supervisor of `kveval ab`: start a server command on a free port of 127.0.0.1,
wait until it answers, stop it and everything it started. Nothing else: what is sent to it
is session.py's, when a server starts is run/ab's.

- start: `{port}` in the command and in its environment becomes a free port of 127.0.0.1.
  The command runs without a shell, in a process group of its own, under a watchdog
  (run/watchdog.py): should kveval itself be killed, `kill -9` too, the watchdog ends the
  whole group, a wrapper script's children with it. The server is recorded in
  `servers/LABEL.pid` (run/leftover.py) until it is stopped, and a start first stops a
  recorded server an earlier kveval left running. Its output is appended to its log file
  (a regular file or a new path: never a named pipe or a device, atomic.open_append) line by
  line through the one door out (every registered secret masked, also across a line break:
  vLLM logs its own arguments, `--api-key` among them).
- ready: GET /health or /v1/models answers 200. A server that exits first or does not answer
  within the timeout is one ServerError quoting its last log lines, and is stopped.
- stop: SIGTERM to the process group, SIGKILL after the grace period (a second Ctrl-C
  meanwhile: at once), then wait until the group is gone and the port is free, so a GPU's
  memory is released before the next start.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kveval.errors import RunFileError, ServerError, UsageError
from kveval.run import leftover
from kveval.run.interrupt import hurried
from kveval.run.launch import free_port, open_log, port_free, spawn
from kveval.run.relay import TAIL_BYTES, copy_output
from kveval.run.watchdog import members
from kveval.safe import one_line

PORT = "{port}"
GRACE_S = 30.0  # SIGTERM to SIGKILL: vLLM and SGLang release GPU memory on SIGTERM
GONE_S = 10.0  # after SIGKILL: how long the group and the port may take to go
POLL_S = 0.05
PROBE_S = 2.0  # one readiness request
TAIL_LINES = 8
PORT_TRIES = 3  # another process may take the free port before the server binds it

@dataclass(frozen=True)
class Command:
    """A server to start: its label (the log's name), argv and extra environment, with
    `{port}` where the port goes."""

    label: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()

    def at(self, port: int) -> tuple[list[str], dict[str, str]]:
        """The command line and environment with the port in place; a secret that holds
        `{port}` is registered as the server gets it."""
        from kveval.masking import register_filled

        put = str(port)
        register_filled(PORT, put)
        argv = [arg.replace(PORT, put) for arg in self.argv]
        return argv, {key: value.replace(PORT, put) for key, value in self.env}


@dataclass
class Server:
    """A started server: its process (the leader of its group), port and log."""

    command: Command
    port: int
    process: subprocess.Popen[bytes]
    log: Path
    log_start: int  # where this start's output begins in the log
    started: float  # time.monotonic() at start
    relay: threading.Thread | None = None  # copies the output into the log
    watch: int | None = None  # the write end of the watchdog's pipe, until it is stopped

    @property
    def record(self) -> Path:
        return leftover.record_of(self.log)

    def release(self) -> None:
        """The group is gone: the watchdog told to exit, the record removed."""
        if self.watch is not None:
            with contextlib.suppress(OSError):
                os.write(self.watch, b"x")
            with contextlib.suppress(OSError):
                os.close(self.watch)
            self.watch = None
        leftover.remove_record(self.record)

    def settle(self) -> None:
        """The output written so far is in the log (the relay drained, once it exited)."""
        if self.relay is not None and self.exited() is not None:
            self.relay.join(timeout=2.0)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def exited(self) -> int | None:
        return self.process.poll()

    def output(self, first: int | None = None) -> str:
        """This start's output so far: its last TAIL_BYTES, or its `first` bytes."""
        self.settle()
        try:
            with self.log.open("rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(self.log_start if first else max(self.log_start, size - TAIL_BYTES))
                return fh.read(first or -1).decode("utf-8", "replace")
        except OSError:
            return ""

    def tail(self, lines: int = TAIL_LINES) -> str:
        kept = [line.strip() for line in self.output().splitlines() if line.strip()]
        return " | ".join(one_line(line) for line in kept[-lines:]) or "(nothing logged)"


def check_command(command: Command) -> None:
    """The program exists and `{port}` is somewhere: one line before anything starts."""
    if not command.argv:
        raise UsageError("--serve: an empty command")
    if shutil.which(command.argv[0]) is None:
        raise UsageError(f"--serve: {command.argv[0]}: no such program on PATH")
    if not any(PORT in part for part in (*command.argv, *(v for _, v in command.env))):
        raise UsageError("--serve: the command must say where the port goes: {port}, e.g. "
                         "\"llama-server -m MODEL --port {port}\"")


def _record(server: Server) -> None:
    try:
        leftover.write_record(server.record, server.process.pid, server.command.label)
    except OSError as exc:
        stop(server, 0.0)
        raise RunFileError(f"{server.record}: cannot write ({exc.strerror or exc})") from None


def _spawn(command: Command, port: int, log: Path, grace: float) -> Server:
    argv, extra = command.at(port)
    out = open_log(log, leftover.record_of(log))
    start = out.seek(0, os.SEEK_END)
    out.write(f"--- kveval ab: {command.label} on port {port} ---\n".encode())
    out.flush()
    try:
        process, watch = spawn(argv, extra, grace)
    except BaseException:
        out.close()
        raise
    assert process.stdout is not None
    relay = threading.Thread(target=copy_output, args=(process.stdout, out), daemon=True)
    relay.start()
    server = Server(command, port, process, log, start, time.monotonic(), relay, watch)
    _record(server)
    return server


def answers(port: int, api_key: str | None) -> bool:
    """GET /health or /v1/models answers 200."""
    from kveval.run.http import fetch

    for path in ("/health", "/v1/models"):
        with contextlib.suppress(OSError, ValueError):
            if fetch(f"http://127.0.0.1:{port}{path}", api_key, PROBE_S, cap=1 << 20)[0] == 200:
                return True
    return False


def describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


class _PortTaken(Exception):
    pass


def wait_ready(server: Server, timeout: float, api_key: str | None = None) -> float:
    """Seconds until the server answered; ServerError when it exits first or never does."""
    deadline = server.started + timeout
    while not answers(server.port, api_key):
        code = server.exited()
        if code is not None:
            if "address already in use" in server.output().lower():
                raise _PortTaken()
            raise ServerError(f"server {server.command.label} exited before it answered "
                              f"({describe_exit(code)}); last log lines: {server.tail()} "
                              f"({server.log})")
        if time.monotonic() > deadline:
            raise ServerError(f"server {server.command.label} did not answer on port "
                              f"{server.port} within {timeout:g} s (--ready-timeout); last "
                              f"log lines: {server.tail()} ({server.log})")
        time.sleep(POLL_S)
    return time.monotonic() - server.started


def _signal(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _wait_gone(server: Server, until: float, hurry: bool = False) -> bool:
    """Reap the leader; True once the whole group is gone (before `until`, and with `hurry`
    before a second interrupt: run/interrupt.py counts it, raising nothing)."""
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.process.wait(timeout=POLL_S)
        if server.exited() is not None and not members(server.process.pid):
            return True
        if time.monotonic() > until or (hurry and hurried()):
            return False


def _end_group(server: Server, grace: float) -> None:
    pgid = server.process.pid
    _signal(pgid, signal.SIGTERM)
    try:
        if _wait_gone(server, time.monotonic() + grace, hurry=True):
            return
    except KeyboardInterrupt:
        _signal(pgid, signal.SIGKILL)
        _wait_gone(server, time.monotonic() + GONE_S)
        raise
    _signal(pgid, signal.SIGKILL)
    _wait_gone(server, time.monotonic() + GONE_S)  # a zombie left to init holds nothing


def stop(server: Server, grace: float = GRACE_S) -> None:
    """SIGTERM to the group, SIGKILL after `grace`, then wait for the port; ServerError when
    something still holds it. The watchdog and the record go once the group is gone."""
    try:
        _end_group(server, grace)
        if server.process.poll() is None:  # not even SIGKILL reaped it: wait for it
            server.process.wait()
    finally:
        if server.process.poll() is not None and not members(server.process.pid):
            server.release()
    server.settle()
    until = time.monotonic() + GONE_S
    while not port_free(server.port):
        if time.monotonic() > until:
            raise ServerError(f"server {server.command.label} was stopped but port "
                              f"{server.port} is still taken {GONE_S:g} s later: a process "
                              "outside its process group holds it; end it before the next "
                              "start")
        time.sleep(POLL_S)


def start(command: Command, log: Path, ready_timeout: float, api_key: str | None = None,
          grace: float = GRACE_S) -> tuple[Server, float]:
    """A server that answers, and the seconds it took; stopped again when it does not. A
    server of this label an earlier kveval left running is stopped first."""
    leftover.stop_recorded(leftover.record_of(log), grace)
    for _ in range(PORT_TRIES):
        server = _spawn(command, free_port(), log, grace)
        try:
            return server, wait_ready(server, ready_timeout, api_key)
        except _PortTaken:
            stop(server, grace)
        except BaseException:
            stop(server, grace)
            raise
    raise ServerError(f"server {command.label}: another process took its port {PORT_TRIES} "
                      f"times over; last log lines: {server.tail()} ({log})")


@contextlib.contextmanager
def serving(command: Command, log: Path, ready_timeout: float, api_key: str | None = None,
            grace: float = GRACE_S) -> Iterator[tuple[Server, float]]:
    """A started, answering server for the with-block, stopped however the block ends."""
    server, ready_s = start(command, log, ready_timeout, api_key, grace)
    try:
        yield server, ready_s
    finally:
        stop(server, grace)


def check_alive(server: Server) -> None:
    """ServerError when the server died while serving."""
    code = server.exited()
    if code is not None:
        raise ServerError(f"server {server.command.label} died while serving "
                          f"({describe_exit(code)}); last log lines: {server.tail()} "
                          f"({server.log})")
