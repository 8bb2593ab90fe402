"""How `kveval ab` launches a server process (run/serve.py supervises it): its log opened
under the regular-file rules (atomic.py: never a named pipe to hang on, nor a device to write
through), and the command that runs it in a process group of its own under its watchdog
(run/watchdog.py), tied to this process's life by a pipe only this process can write.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO

from kveval.errors import RunFileError

WATCHDOG = str(Path(__file__).with_name("watchdog.py"))


def launcher(argv: list[str], watch_fd: int, grace: float) -> list[str]:
    """The command that runs `argv` under its watchdog, tied to this process's life."""
    return [sys.executable, WATCHDOG, str(os.getpid()), str(watch_fd), f"{grace:g}", *argv]


def open_log(log: Path, record: Path) -> BinaryIO:
    """The log opened for appending, and its record's path checked: one line where either
    is a named pipe, a device or a folder."""
    from kveval.atomic import NotRegular, open_append, regular_target

    try:
        regular_target(record)
    except NotRegular as exc:
        raise RunFileError(f"{record}: {exc}") from None
    try:
        return open_append(log)
    except NotRegular as exc:
        raise RunFileError(f"{exc.filename or log}: {exc}") from None
    except OSError as exc:
        raise RunFileError(f"{exc.filename or log}: cannot write "
                           f"({exc.strerror or exc})") from None


def spawn(argv: list[str], env: dict[str, str], grace: float,
          ) -> tuple[subprocess.Popen[bytes], int]:
    """The server process, its output on a pipe, and the write end of its watchdog's pipe
    (closed: the watchdog ends the server's group)."""
    read_end, write_end = os.pipe()
    try:
        process = subprocess.Popen(
            launcher(argv, read_end, grace), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, **env},
            start_new_session=True, pass_fds=(read_end,))
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return process, write_end


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
