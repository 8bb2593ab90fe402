"""The cases of bench/hostile/inputs.py on what kveval writes and prints (issue 26): outputs
that are devices, pipes, sockets or links to them; locks a filesystem cannot take; numeric
options of NaN and infinity; a pilot whose header names a pipe or /dev/zero; C1 controls
on a terminal; plan's commands in a shell; signals that stopped `report` and `run`."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import stat
import time
from collections.abc import Callable
from pathlib import Path

from kit import (
    Outcome,
    Result,
    finish,
    first_failing,
    header,
    item,
    judged,
    kveval,
    prompt_item,
    start,
    task,
    write_run,
)
from runs import fake, prompt_file, run_args

C1_RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
CSI = "\x9b"
GSM = [task("gsm8k")]
PROMPTS = [task("prompts", api="chat")]


def pair(folder: Path, n: int = 8) -> tuple[str, str]:
    rows = [item(i) for i in range(n)]
    return (write_run(folder / "a.jsonl", header("a", GSM), rows),
            write_run(folder / "b.jsonl", header("b", GSM), rows))


# ---------------------------------------------------------------- outputs


def char_device(folder: Path, name: str = "full") -> Path:
    """A character device node of the kind of /dev/full, made in the case's folder (never
    the machine's own): writing to it fails with ENOSPC."""
    path = folder / name
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    return path


def fifo_node(folder: Path) -> Path:
    os.mkfifo(folder / "pipe.html")
    return folder / "pipe.html"


def socket_node(folder: Path) -> tuple[Path, socket.socket]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(folder / "sock.html"))
    return folder / "sock.html", sock


def bound_socket(folder: Path) -> Path:
    """A socket's node left where a socket was bound (the run's output, say)."""
    path, sock = socket_node(folder)
    sock.close()
    return path


def still(path: Path, test: Callable[[int], bool]) -> str | None:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return f"{path.name} is gone"
    return None if test(mode) else f"{path.name} was replaced by a regular file"


def onto(make: Callable[[Path], Path], test: Callable[[int], bool],
         args: Callable[[str, str, str], list[str]]) -> Callable[[Path, Path], Outcome]:
    """A command whose output is the node `make` made (through a link: the node it names):
    exit 2, one line, the node kept."""
    def case(tree: Path, folder: Path) -> Outcome:
        node = make(folder)
        base, cand = pair(folder)
        with fake() as server:
            argv = [a.replace("@URL", server.base_url) for a in args(str(node), base, cand)]
            r = kveval(tree, folder, *argv)
        target = Path(os.path.realpath(node)) if node.is_symlink() else node
        return judged(r, (2,), still(target, test),
                      None if not node.is_symlink() or os.path.islink(node) else "link gone")
    return case


def report_to(node: str, base: str, cand: str) -> list[str]:
    return ["report", "--baseline", base, "--candidate", cand, "-o", node]


def gate_html(node: str, base: str, cand: str) -> list[str]:
    return ["gate", "--baseline", base, "--candidate", cand, "--html", node]


def run_to(node: str, base: str, cand: str) -> list[str]:
    prompts = Path(node).parent / "p.txt"
    prompts.write_text("Say one.\n")
    return run_args("@URL", prompts, node, "--overwrite")


def link_to_device(folder: Path) -> Path:
    link = folder / "page.html"
    link.symlink_to(char_device(folder))
    return link


def onto_socket(tree: Path, folder: Path) -> Outcome:
    node, sock = socket_node(folder)
    try:
        base, cand = pair(folder)
        r = kveval(tree, folder, *gate_html(str(node), base, cand))
    finally:
        sock.close()
    return judged(r, (2,), still(node, stat.S_ISSOCK))


# ---------------------------------------------------------------- locks


SHIM = """import errno, fcntl, os
_real = fcntl.flock
def flock(fd, op):
    raise OSError(errno.{name}, os.strerror(errno.{name}))
fcntl.flock = flock
"""


def failing_lock(name: str) -> Callable[[Path, Path], Outcome]:
    """`fcntl.flock` failing as on a network filesystem (a sitecustomize in the case's
    folder patches it): `run -o NEW`, `run -o OLD --overwrite` and `--resume` are each one
    line and exit 2, and the file on disk is kept."""
    def case(tree: Path, folder: Path) -> Outcome:
        shim = folder / "shim"
        shim.mkdir()
        (shim / "sitecustomize.py").write_text(SHIM.format(name=name))
        env = {"PYTHONPATH": f"{tree}:{shim}"}
        prompts = prompt_file(folder)
        outcomes = []
        with fake() as server:
            kveval(tree, folder, *run_args(server.base_url, prompts, "old.jsonl"))
            kept = (folder / "old.jsonl").read_bytes()
            for label, out, extra in (("run -o NEW", "new.jsonl", ()),
                                      ("--overwrite", "old.jsonl", ("--overwrite",)),
                                      ("--resume", "old.jsonl", ("--resume",))):
                r = kveval(tree, folder, *run_args(server.base_url, prompts, out, *extra),
                           env=env)
                lost = "old.jsonl changed" if (folder / "old.jsonl").read_bytes() != kept \
                    else None
                outcomes.append((label, judged(r, (2,), lost, None if "lock" in r.err.lower()
                                               else "does not say it is the lock")))
        return first_failing(outcomes)
    return case


# ---------------------------------------------------------------- numbers and pilots


def plan_option(flag: str, value: str) -> Callable[[Path, Path], Outcome]:
    def case(tree: Path, folder: Path) -> Outcome:
        base, _ = pair(folder)
        return judged(kveval(tree, folder, "plan", base, flag, value))
    return case


def each_nan(runs: dict[str, Callable[[Path, str, str], list[str]]]
             ) -> Callable[[Path, Path], Outcome]:
    """Each option of NaN or infinity: exit 2, one line."""
    def case(tree: Path, folder: Path) -> Outcome:
        base, cand = pair(folder)
        return first_failing((name, judged(kveval(tree, folder, *make(folder, base, cand))))
                             for name, make in runs.items())
    return case


def _plan_nan(flag: str) -> Callable[[Path, str, str], list[str]]:
    return lambda folder, base, cand: ["plan", base, flag, "nan"]


PLAN_NANS = {f"plan {flag} nan": _plan_nan(flag)
             for flag in ("--detect", "--alpha", "--power", "--detect-drift", "--detect-kl")}
OTHER_NANS = {
    "gate --alpha nan": lambda f, b, c: ["gate", "--baseline", b, "--candidate", c,
                                         "--alpha", "nan"],
    "gate --margin inf": lambda f, b, c: ["gate", "--baseline", b, "--candidate", c,
                                          "--policy", "paired", "--margin", "inf"],
    "gate --max-error-rate nan": lambda f, b, c: ["gate", "--baseline", b, "--candidate", c,
                                                  "--max-error-rate", "nan"],
    "compare --max-kl nan": lambda f, b, c: ["compare", b, c, "--max-kl", "nan"],
    "score --min-recovery nan": lambda f, b, c: ["score", c, "--min-recovery", "nan"],
    "run --timeout inf": lambda f, b, c: run_args("http://127.0.0.1:9/v1", "p.txt", "r.jsonl",
                                                  "--timeout", "inf"),
}


def pilot_naming(data: Callable[[Path], str], adapter: str = "gsm8k",
                 ulimits: str = "") -> Callable[[Path, Path], Outcome]:
    """A pilot whose header's task names its data: `plan` reads it to say what the data can
    supply."""
    def case(tree: Path, folder: Path) -> Outcome:
        spec = task(adapter, api="chat" if adapter == "prompts" else "completions",
                    data=data(folder))
        rows = [item(i) if adapter == "gsm8k" else prompt_item(i, "x") for i in range(8)]
        base = write_run(folder / "pilot.jsonl", header("pilot", [spec]), rows)
        return judged(kveval(tree, folder, "plan", base, ulimits=ulimits), (0, 2))
    return case


def fifo_data(folder: Path) -> str:
    (folder / "gsm8k").mkdir()
    os.mkfifo(folder / "gsm8k" / "test.jsonl")
    return str(folder / "gsm8k")


# ---------------------------------------------------------------- C1 controls


def raw_control(text: str) -> str | None:
    found = C1_RAW.search(text)
    return None if found is None else f"raw {found.group()!r} printed"


def c1_runs(folder: Path) -> tuple[str, str]:
    base = write_run(folder / "a.jsonl", header(f"a{CSI}31m", PROMPTS),
                     [prompt_item(i, f"answer {i}") for i in range(6)])
    cand = write_run(folder / "b.jsonl", header(f"b{CSI}2J", PROMPTS),
                     [prompt_item(i, f"answer {CSI}31m{i}x") for i in range(6)])
    return base, cand


def c1_on_stdout(*commands: Callable[[str, str, str], list[str]]
                 ) -> Callable[[Path, Path], Outcome]:
    """Each command on runs whose labels and answers hold U+009B: no raw C1 printed."""
    def case(tree: Path, folder: Path) -> Outcome:
        base, cand = c1_runs(folder)
        noise = write_run(folder / "n.jsonl", header(f"n{CSI}1m", PROMPTS),
                          [prompt_item(i, f"answer {i}") for i in range(6)])
        outcomes = []
        for args in commands:
            argv = args(base, cand, noise)
            r = kveval(tree, folder, *argv)
            outcomes.append((" ".join(a for a in argv if a.startswith("-") or a.isalpha()),
                             judged(r, (0, 1), raw_control(r.out + r.err))))
        return first_failing(outcomes)
    return case


def resumed_label(tree: Path, folder: Path) -> Outcome:
    """A run file whose header's label holds OSC and CSI, resumed: the progress bar."""
    import json

    label = "x\x1b]0;owned\x07\x9b31m"
    with fake() as server:
        made = kveval(tree, folder, *run_args(server.base_url, prompt_file(folder, 3),
                                              "r.jsonl"))
        if made.code != 0:
            return judged(made, (0,), note="the first run")
        head, *_ = (folder / "r.jsonl").read_text().splitlines()
        (folder / "r.jsonl").write_text(json.dumps({**json.loads(head), "label": label}) + "\n")
        r = kveval(tree, folder, "run", "--endpoint", server.base_url, "-o", "r.jsonl",
                   "--resume", "--retries", "0")
    return judged(r, (0,), raw_control(r.out + r.err.replace("\r", "")))


def page_path_escapes(tree: Path, folder: Path) -> Outcome:
    base, cand = pair(folder)
    r = kveval(tree, folder, "gate", "--baseline", base, "--candidate", cand, "--html",
               "page\x1b[31m\x9b2J.html")
    return judged(r, (0,), raw_control(r.out + r.err))


# ---------------------------------------------------------------- plan, signals


def prompts_pilot(tree: Path, folder: Path) -> Outcome:
    """A prompts-only pilot and one noise run: the plan names the task, or says why not."""
    a = write_run(folder / "p.jsonl", header("p", PROMPTS),
                  [prompt_item(i, f"answer {i}") for i in range(20)])
    b = write_run(folder / "pb.jsonl", header("pb", PROMPTS),
                  [prompt_item(i, f"answer {i}" if i % 3 else "other") for i in range(20)])
    r = kveval(tree, folder, "plan", a, "--noise", b)
    return judged(r, (0, 2), None if "prompts" in r.out else "the task is dropped unsaid")


def quoted_commands(tree: Path, folder: Path) -> Outcome:
    """A pilot named with a space and `$(...)`: each printed `kveval run` line, split as a
    shell splits it, names the file."""
    name = "my pilot $(touch owned).jsonl"
    gsm = [task("gsm8k", limit=30, items=30)]
    rows = [item(i, correct=i % 4 != 0) for i in range(30)]
    base = write_run(folder / name, header("pilot", gsm), rows)
    noise = write_run(folder / "n.jsonl", header("n", gsm),
                      [item(i, correct=i % 4 != 1, output=f"#### {i}x") for i in range(30)])
    r = kveval(tree, folder, "plan", base, "--noise", noise)
    lines = [line.strip() for line in r.out.splitlines() if line.strip().startswith("kveval run")]
    named = [line for line in lines if {str(folder / name), name} & set(_words(line))]
    torn = [line for line in lines if {"my", "$(touch", "owned).jsonl"} & set(_words(line))]
    problems = [None if lines else "no command printed",
                f"not shell-quoted: {torn[0][:70]}" if torn else None,
                None if named or torn else "no command names the pilot"]
    return judged(r, (0,), *problems)


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:
        return []


def report_terminated(tree: Path, folder: Path) -> Outcome:
    """SIGTERM one second into a `report` of two 60,000-item runs: one line, exit 143."""
    rows = [item(i, item_id=f"gsm8k/test/{i:06d}") for i in range(60_000)]
    base = write_run(folder / "a.jsonl", header("a", GSM), rows)
    cand = write_run(folder / "b.jsonl", header("b", GSM), rows)
    started = time.monotonic()
    proc = start(tree, folder, ["report", "--baseline", base, "--candidate", cand,
                                "-o", "page.html"])
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    r: Result = finish(proc, 60, started)
    return judged(r, (143,), None if r.err.strip() else "dies without a word")
