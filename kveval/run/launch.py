"""How `kveval ab` launches a server process (run/serve.py supervises it): the launcher that
ties the server's life to kveval's, and the relay of its output into its log.

The launcher is a tiny Python program run as `python -c LAUNCHER PARENT_PID ARGV...`: it asks
Linux to kill it when kveval dies (PR_SET_PDEATHSIG), checks kveval did not die meanwhile,
then execs the server command, so the server is the process kveval started, in its group.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO

TAIL_BYTES = 64 << 10  # a line longer than this is written as it comes

LAUNCHER = """\
import os, signal, sys
try:
    import ctypes
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except Exception:
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    print(f"cannot run {sys.argv[2]}: {exc.strerror}", file=sys.stderr, flush=True)
    sys.exit(127)
"""



def copy_output(source: IO[bytes], log: Path) -> None:
    """The server's output into its log, whole lines at a time, masked; a long run without
    a newline is written as it comes past TAIL_BYTES."""
    from kveval.sink import file_text

    held = b""
    with source, log.open("ab") as out:
        while chunk := source.read1(TAIL_BYTES):  # type: ignore[attr-defined]
            held += chunk
            end = max(held.rfind(b"\n"), held.rfind(b"\r")) + 1
            if not end and len(held) > TAIL_BYTES:
                end = len(held)
            if end:
                out.write(file_text(held[:end].decode("utf-8", "replace")).encode("utf-8"))
                out.flush()
                held = held[end:]
        out.write(file_text(held.decode("utf-8", "replace")).encode("utf-8"))
