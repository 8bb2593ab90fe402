"""What kveval writes goes to regular files or new paths only (a device, a named pipe, a
socket or a symlink to one is refused in one line, and left as it was); a run-file lock the
filesystem cannot take is one line and exit 2; every float option of every command refuses
NaN and infinity; SIGTERM and SIGHUP stop any command with one line."""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import socket
import stat
from pathlib import Path
from typing import Any

import click
import pytest

from kveval.atomic import NotRegular, regular_target, write_text
from kveval.cli.cli import cli
from kveval.cli.options import Finite
from kveval.run.interrupt import exit_code, how, signals_as_interrupt
from tests.clirun import kveval
from tests.test_cli_verdicts import header, prompt_items, write


def device(tmp_path: Path) -> Path:
    """A character device node like /dev/null's, made in the test's own folder; without root,
    which alone may make one (and replace /dev/null), /dev/null itself."""
    if os.geteuid() != 0:
        return Path("/dev/null")
    path = tmp_path / "dev"
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return path


def fifo(tmp_path: Path) -> Path:
    os.mkfifo(tmp_path / "pipe")
    return tmp_path / "pipe"


def unix_socket(tmp_path: Path) -> Path:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(tmp_path / "sock"))
    sock.close()
    return tmp_path / "sock"


def link_to_device(tmp_path: Path) -> Path:
    (tmp_path / "link").symlink_to(device(tmp_path))
    return tmp_path / "link"


NODES = {"a named pipe": fifo, "a socket": unix_socket, "a character device": device,
         "a character device (through a symlink)": link_to_device}


@pytest.mark.parametrize("what", list(NODES))
def test_a_write_never_replaces_what_is_not_a_regular_file(tmp_path: Path, what: str) -> None:
    node = NODES[what](tmp_path)
    kept = os.stat(node).st_mode
    with pytest.raises(NotRegular, match=f"is {what.replace('(', '.').replace(')', '.')}"):
        write_text(node, "<html></html>")
    assert os.stat(node).st_mode == kept and not stat.S_ISREG(os.stat(node).st_mode)


def test_regular_files_and_new_paths_are_written(tmp_path: Path) -> None:
    (tmp_path / "old.html").write_text("old")
    (tmp_path / "to-old").symlink_to(tmp_path / "old.html")
    assert regular_target(tmp_path / "new.html") == tmp_path / "new.html"
    write_text(tmp_path / "to-old", "new")
    assert (tmp_path / "old.html").read_text() == "new" and (tmp_path / "to-old").is_symlink()


def runs(tmp_path: Path) -> tuple[str, str]:
    return (write(tmp_path / "a.jsonl", header("a"), prompt_items(6, set())),
            write(tmp_path / "b.jsonl", header("b"), prompt_items(6, set())))


@pytest.mark.parametrize("what", list(NODES))
@pytest.mark.parametrize("command", ["report -o", "gate --html", "run -o"])
def test_every_output_option_refuses_it_in_one_line(capsys: Any, tmp_path: Path, what: str,
                                                    command: str, fake_server: Any) -> None:
    node = NODES[what](tmp_path)
    kept = os.stat(node).st_mode
    a, b = runs(tmp_path)
    prompts = tmp_path / "p.txt"
    prompts.write_text("Say one.\n")
    args = {"report -o": ["report", "--baseline", a, "--candidate", b, "-o", str(node)],
            "gate --html": ["gate", "--baseline", a, "--candidate", b, "--html", str(node)],
            "run -o": ["run", "--endpoint", fake_server.base_url, "--task", "prompts",
                       "--prompts", str(prompts), "-o", str(node), "--overwrite"]}[command]
    code, out, err = kveval(capsys, *args)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "not a regular file" in err and os.stat(node).st_mode == kept
    assert fake_server.requests == []


@pytest.mark.parametrize("failure", [errno.ENOLCK, errno.EOPNOTSUPP])
@pytest.mark.parametrize("how", ["new", "--overwrite", "--resume"])
def test_a_lock_the_filesystem_cannot_take_is_one_line(capsys: Any, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       fake_server: Any, failure: int,
                                                       how: str) -> None:
    prompts = tmp_path / "p.txt"
    prompts.write_text("Say one.\nSay two.\n")
    args = ["run", "--endpoint", fake_server.base_url, "--task", "prompts", "--prompts",
            str(prompts), "--retries", "0"]
    assert kveval(capsys, *args, "-o", str(tmp_path / "old.jsonl"))[0] == 0
    kept = (tmp_path / "old.jsonl").read_bytes()

    def flock(fd: int, operation: int) -> None:
        raise OSError(failure, os.strerror(failure))

    monkeypatch.setattr(fcntl, "flock", flock)
    out = tmp_path / ("new.jsonl" if how == "new" else "old.jsonl")
    code, _, err = kveval(capsys, *args, "-o", str(out), *([] if how == "new" else [how]))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "cannot be locked here" in err and os.strerror(failure) in err
    assert (tmp_path / "old.jsonl").read_bytes() == kept
    assert how != "new" or not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def float_options() -> list[tuple[str, click.Option]]:
    found = []
    for name, command in cli.commands.items():
        found += [(name, p) for p in command.params if isinstance(p, click.Option)
                  and isinstance(p.type, (click.FloatRange, click.types.FloatParamType))]
    return found


def test_every_float_option_of_every_command_is_finite() -> None:
    found = float_options()
    assert len(found) >= 15  # plan's five, the family's, the gate's, run's --timeout
    assert all(isinstance(p.type, Finite) for _, p in found), [
        f"{name} {p.opts[0]}" for name, p in found if not isinstance(p.type, Finite)]


@pytest.mark.parametrize(("command", "flag"), [(c, p.opts[0]) for c, p in float_options()])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_nan_and_infinity_are_one_line_naming_the_range(capsys: Any, command: str, flag: str,
                                                        value: str) -> None:
    code, out, err = kveval(capsys, command, flag, value)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert f"Invalid value for '{flag}'" in err and "x" in err  # the range, as [0<x<1]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_a_command_as_ctrl_c_does(signum: int) -> None:
    with signals_as_interrupt(), pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signum)
        signal.sigtimedwait([], 0.5) if hasattr(signal, "sigtimedwait") else None
    assert exit_code() == 128 + signum and how() == signal.Signals(signum).name
