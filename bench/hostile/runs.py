"""The cases of bench/hostile/inputs.py that need a server on 127.0.0.1: a server that quotes
credentials back or lists the key as its model, an echo server for teacher forcing, slow
servers for two writers and for signals, and `kveval run` given a named pipe."""

from __future__ import annotations

import base64
import json
import math
import os
import subprocess
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from kit import (
    Outcome,
    Result,
    finish,
    first_failing,
    header,
    item,
    judged,
    kveval,
    leaks,
    message_lines,
    prompt_item,
    read,
    run_file_valid,
    spliced,
    start,
    task,
    write_run,
)

from tests.fake_server import Behaviour, FakeServer
from tests.hostile_server import HostileServer
from tests.local_server import LocalServer

KEY = "sk-very-secret-key-1234"
USER, PASSWORD = "alice", "pa55-word-9x"
FORMS = {"the key": KEY, "the password": PASSWORD, "user:password": f"{USER}:{PASSWORD}",
         "base64 Basic": base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}
ANSWER, TOKENS = "red green blue", ["red", " green", " blue"]
TOP = {"x": math.log(0.6), "y": math.log(0.3)}  # "x": the answer's own token


def fake(behaviour: Behaviour | None = None) -> FakeServer:
    """tests/fake_server.py's server, silent when a killed client breaks a connection."""
    server = FakeServer(behaviour)
    server._httpd.handle_error = lambda *args: None  # type: ignore[method-assign]
    return server


def prompt_file(folder: Path, count: int = 3, name: str = "p.txt") -> Path:
    path = folder / name
    path.write_text("".join(f"Say the number {i}.\n" for i in range(count)))
    return path


def run_args(url: str, prompts: Path | str, out: Path | str, *extra: str) -> list[str]:
    return ["run", "--endpoint", url, "--task", "prompts", "--prompts", str(prompts),
            "-o", str(out), "--retries", "0", *extra]


# ---------------------------------------------------------------- secrets


def with_password(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{PASSWORD}@")


def secret_run(mode: str, codes: tuple[int, ...], key: bool = False,
               models: list[str] | None = None) -> Callable[[Path, Path], Outcome]:
    """`kveval run` against a hostile server; no form of the credentials anywhere."""
    def case(tree: Path, folder: Path) -> Outcome:
        out = folder / "r.jsonl"
        with HostileServer(mode, models=models) as server:
            url = server.base_url if key else with_password(server.base_url)
            r = kveval(tree, folder, *run_args(url, prompt_file(folder), out), timeout=40,
                       env={"KVEVAL_API_KEY": KEY} if key else None)
        places = {"stdout": r.out, "stderr": r.err, "the run file": read(out)}
        return judged(r, codes, leaks(FORMS, places))
    return case


# ---------------------------------------------------------------- pipes and deep files


def with_fake(folder: Path, tree: Path, args: Callable[[str], list[str]]) -> Result:
    with fake() as server:
        return kveval(tree, folder, *args(server.base_url))


def fifo_prompts(tree: Path, folder: Path) -> Outcome:
    os.mkfifo(folder / "pipe.txt")
    return judged(with_fake(folder, tree, lambda url: run_args(url, "pipe.txt", "r.jsonl")))


def fifo_resume(tree: Path, folder: Path) -> Outcome:
    os.mkfifo(folder / "pipe.jsonl")
    prompts = prompt_file(folder)
    return judged(with_fake(folder, tree, lambda url: run_args(url, prompts, "pipe.jsonl",
                                                               "--resume")))


def resume_deep(tree: Path, folder: Path) -> Outcome:
    """`--resume` on a run file whose last line nests 1,000 arrays in its meta."""
    path = folder / "r.jsonl"
    write_run(path, header("r", [task("prompts", api="chat")]),
              [prompt_item(i, "one") for i in range(4)])
    with path.open("a") as f:
        f.write(spliced(prompt_item(9, "x", meta={"x": "DEEP"}), 1000) + "\n")
    prompts = prompt_file(folder)
    return judged(with_fake(folder, tree, lambda url: run_args(url, prompts, path, "--resume")))


# ---------------------------------------------------------------- teacher forcing


class EchoServer(LocalServer):
    """Answers ANSWER with log-probabilities; a teacher-forcing request (`echo: true`,
    max_tokens 1) is echoed with one generated token and `finish_reason: "length"`."""

    def __init__(self) -> None:
        super().__init__(_echo_handler())


def _echo_reply(body: dict[str, Any]) -> dict[str, Any]:
    tops = [{tok: TOP["x"], "y": TOP["y"]} for tok in TOKENS]
    if not body.get("echo"):
        logprobs = {"tokens": TOKENS, "token_logprobs": [TOP["x"]] * 3, "top_logprobs": tops,
                    "text_offset": [0, 3, 9]}
        return {"text": ANSWER, "finish_reason": "stop", "logprobs": logprobs}
    prompt = body["prompt"]
    start_at = len(prompt) - len(ANSWER)
    logprobs = {"tokens": ["P", *TOKENS, "!"], "token_logprobs": [None, *[TOP["x"]] * 3, 0.0],
                "top_logprobs": [None, *tops, {"!": 0.0}],
                "text_offset": [0, *(start_at + o for o in (0, 3, 9)), len(prompt)]}
    return {"text": prompt + "!", "finish_reason": "length", "logprobs": logprobs}


def _echo_handler() -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/v1/models":
                return self._send(200, {"object": "list", "data": [{"id": "m"}]})
            self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if self.path != "/v1/completions":
                return self._send(404, {"error": {"message": "not found"}})
            choice = {"index": 0, **_echo_reply(body)}
            usage = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
            self._send(200, {"id": "c", "object": "text_completion", "model": body["model"],
                             "choices": [choice], "usage": usage})

    return Handler


def logprob_baseline(tree: Path, folder: Path, url: str) -> tuple[Path, Result]:
    base = folder / "base.jsonl"
    return base, kveval(tree, folder, *run_args(url, prompt_file(folder, 10), base, "--api",
                                                "completions", "--logprobs", "2"))


def teacher_forced_gate(tree: Path, folder: Path) -> Outcome:
    """A teacher-forced run of a baseline's own answers, gated against that baseline."""
    forced = folder / "tf.jsonl"
    with EchoServer() as server:
        base, made = logprob_baseline(tree, folder, server.base_url)
        if made.code != 0:
            return judged(made, (0,), note="the baseline run")
        tf = kveval(tree, folder, "run", "--endpoint", server.base_url, "--teacher-force",
                    str(base), "--logprobs", "2", "-o", str(forced))
    if tf.code != 0:
        return judged(tf, (0,), note="the teacher-forced run")
    noise = folder / "noise.jsonl"  # the baseline's noise floor: a copy of it
    noise.write_bytes(base.read_bytes())
    r = kveval(tree, folder, "gate", "--baseline", str(base), "--candidate", str(forced),
               "--noise", str(noise))
    said = next((w for w in ("COLLAPSE", "REGRESSION", "PASS") if w in r.out), "no verdict")
    return judged(r, (0,), "judged COLLAPSE" if said == "COLLAPSE" else None,
                  note="" if said == "COLLAPSE" else said)


def teacher_force_onto_itself(tree: Path, folder: Path) -> Outcome:
    with EchoServer() as server:
        base, made = logprob_baseline(tree, folder, server.base_url)
        if made.code != 0:
            return judged(made, (0,), note="the baseline run")
        kept = base.read_bytes()
        r = kveval(tree, folder, "run", "--endpoint", server.base_url, "--teacher-force",
                   str(base), "-o", str(base), "--overwrite")
    return judged(r, (2,), "the baseline was replaced" if base.read_bytes() != kept else None)


def prompts_onto_itself(tree: Path, folder: Path) -> Outcome:
    prompts = prompt_file(folder)
    kept = prompts.read_text()
    r = with_fake(folder, tree, lambda url: run_args(url, prompts, prompts, "--overwrite"))
    return judged(r, (2,), "the prompt file was replaced" if read(prompts) != kept else None)


def page_onto_input(tree: Path, folder: Path) -> Outcome:
    """`report -o BASELINE.jsonl` and `gate --html CANDIDATE.jsonl`: the page over a run."""
    outcomes = []
    for flag, name in (("-o", "a.jsonl"), ("--html", "b.jsonl")):
        command = "report" if flag == "-o" else "gate"
        base, cand = (write_run(folder / n, header(n[0]), [item(i) for i in range(4)])
                      for n in ("a.jsonl", "b.jsonl"))
        kept = read(folder / name)
        r = kveval(tree, folder, command, "--baseline", base, "--candidate", cand, flag, name)
        lost = f"{name} was replaced by the page" if read(folder / name) != kept else None
        outcomes.append((f"{command} {flag} {name}", judged(r, (2,), lost)))
    return first_failing(outcomes)


# ---------------------------------------------------------------- writers and signals


def wait_for_lines(path: Path, count: int, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and sum(1 for _ in path.open()) > count:
            return True
        time.sleep(0.05)
    return False


def writer_args(folder: Path, url: str, *extra: str) -> list[str]:
    """A run of 40 prompts, one at a time, to r.jsonl."""
    prompts = folder / "p.txt"
    if not prompts.exists():
        prompt_file(folder, 40)
    return run_args(url, prompts, "r.jsonl", "--concurrency", "1", *extra)


def first_writer(tree: Path, folder: Path, url: str) -> subprocess.Popen[str]:
    return start(tree, folder, writer_args(folder, url))


def two_writers(tree: Path, folder: Path) -> Outcome:
    """`run -o X` against a slow server, then `run -o X --resume` while it writes."""
    out = folder / "r.jsonl"
    with fake(Behaviour(latency_s=0.1)) as server:
        started = time.monotonic()
        first = first_writer(tree, folder, server.base_url)
        wait_for_lines(out, 3)
        second = kveval(tree, folder, *writer_args(folder, server.base_url, "--resume"),
                        timeout=60)
        done = finish(first, 60, started)
        sent = len(server.requests)
    valid, held = run_file_valid(out)
    lost = None if done.code == 0 and valid and held == 40 else f"file holds {held} of 40"
    note = f"first writer exit {done.code}; {sent} requests for 40 prompts"
    return judged(second, (2,), lost, note=note)


def interrupted(signum: int) -> Callable[[Path, Path], Outcome]:
    """Ctrl-C or SIGTERM while a run writes: the last line says what the file holds."""
    def case(tree: Path, folder: Path) -> Outcome:
        out = folder / "r.jsonl"
        with fake(Behaviour(latency_s=0.2)) as server:
            started = time.monotonic()
            proc = first_writer(tree, folder, server.base_url)
            wait_for_lines(out, 3)
            proc.send_signal(signum)
            r = finish(proc, 60, started)
        valid, held = run_file_valid(out)
        last = (message_lines(r.err) or [""])[-1]
        said = f"holds {held} item" in last and "--resume" in last
        problems = ["the file is not valid" if not valid else None,
                    None if said else "does not say what the file holds"]
        return judged(r, (128 + signum,), *problems)
    return case


def extra_body(text: str) -> Callable[[Path, Path], Outcome]:
    """--extra-body that JSON cannot carry: a usage error before anything is sent."""
    def case(tree: Path, folder: Path) -> Outcome:
        with fake() as server:
            r = kveval(tree, folder, *run_args(server.base_url, prompt_file(folder), "r.jsonl",
                                               "--extra-body", text))
            sent = len(server.requests)
        blames = "blames the server" if "server" in r.err or "not JSON" in r.err else None
        return judged(r, (2,), blames, f"{sent} requests sent" if sent else None)
    return case
