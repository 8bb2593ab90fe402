"""The server supervisor of `kveval ab`: start a server command on a free port of 127.0.0.1,
wait until it answers, stop it and everything it started. Nothing else: what is sent to it
is session.py's, when a server starts is run/ab's.

- start: `{port}` in the command and in its environment becomes a free port of 127.0.0.1.
  The command runs without a shell, in a process group of its own; should kveval itself be
  killed, Linux kills the server too (a launcher sets PR_SET_PDEATHSIG, then execs the
  command). Its output is appended to its log file line by line through the one door out
  (every registered secret masked: vLLM logs its own arguments, `--api-key` among them).
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
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kveval.errors import ServerError, UsageError
from kveval.run.launch import LAUNCHER, TAIL_BYTES, copy_output
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
        put = str(port)
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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_free(port: int) -> bool:
    """Nothing listens on the port (a socket in TIME_WAIT does not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _spawn(command: Command, port: int, log: Path) -> Server:
    argv, extra = command.at(port)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        start = out.tell()
        out.write(f"--- kveval ab: {command.label} on port {port} ---\n".encode())
    process = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(os.getpid()), *argv],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, **extra}, start_new_session=True)
    assert process.stdout is not None
    relay = threading.Thread(target=copy_output, args=(process.stdout, log), daemon=True)
    relay.start()
    return Server(command, port, process, log, start, time.monotonic(), relay)


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


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _wait_gone(server: Server, until: float) -> bool:
    """Reap the leader; True once the whole group is gone (before `until`)."""
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.process.wait(timeout=POLL_S)
        if server.exited() is not None and not _group_alive(server.process.pid):
            return True
        if time.monotonic() > until:
            return False


def _end_group(server: Server, grace: float) -> None:
    pgid = server.process.pid
    _signal(pgid, signal.SIGTERM)
    try:
        if _wait_gone(server, time.monotonic() + grace):
            return
    except KeyboardInterrupt:
        _signal(pgid, signal.SIGKILL)
        _wait_gone(server, time.monotonic() + GONE_S)
        raise
    _signal(pgid, signal.SIGKILL)
    _wait_gone(server, time.monotonic() + GONE_S)  # a zombie left to init holds nothing


def stop(server: Server, grace: float = GRACE_S) -> None:
    """SIGTERM to the group, SIGKILL after `grace`, then wait for the port; ServerError when
    something still holds it."""
    _end_group(server, grace)
    if server.process.poll() is None:  # not even SIGKILL reaped it: wait for it
        server.process.wait()
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
    """A server that answers, and the seconds it took; stopped again when it does not."""
    for _ in range(PORT_TRIES):
        server = _spawn(command, free_port(), log)
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
