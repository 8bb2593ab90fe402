"""The cases of bench/hostile/inputs.py on secrets (issue 26): `kveval check` against servers
that echo the key or the URL's credentials (model id, /version, /props, /metrics, chunked
bodies), keys no HTTP header can carry, a proxy, a 300 MB /metrics, and run files holding
the credentials URL-, form- and percent-encoded or as base64 of the whole header."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

from kit import Outcome, first_failing, judged, kveval, leaks, read

from tests.hostile_server import HostileServer, Script
from tests.local_server import LocalServer

KEY = "sk-check/key+9=Z-0123"
USER, PASSWORD = "alice", "p@ss w/rd:X9!"
PAIR = f"{USER}:{PASSWORD}"
BASIC = base64.b64encode(PAIR.encode()).decode()


def every_form(secret: str) -> dict[str, str]:
    """What a server or a proxy can echo of one secret, by name."""
    data = secret.encode()
    found = {
        "raw": secret, "URL-encoded": quote(secret, safe=""),
        "URL-encoded, lower-case hex": _lower_hex(quote(secret, safe="")),
        "form-encoded": quote_plus(secret, safe=""),
        "every byte percent-encoded": "".join(f"%{b:02X}" for b in data),
        "every byte percent-encoded, lower case": "".join(f"%{b:02x}" for b in data),
        "JSON \\u escapes": "".join(f"\\u{ord(c):04x}" for c in secret),
        "base64": base64.b64encode(data).decode(),
    }
    return {k: v for k, v in found.items() if k == "raw" or v != secret}


def _lower_hex(text: str) -> str:
    parts = text.split("%")
    return parts[0] + "".join("%" + p[:2].lower() + p[2:] for p in parts[1:])


def key_forms() -> dict[str, str]:
    found = {f"the key {name}": v for name, v in every_form(KEY).items()}
    found["base64 of `Bearer KEY`"] = base64.b64encode(f"Bearer {KEY}".encode()).decode()
    return found


def credential_forms() -> dict[str, str]:
    found = {f"the password {name}": v for name, v in every_form(PASSWORD).items()}
    found.update({"user:password": PAIR, "base64 Basic": BASIC,
                  "base64 of `Basic ...`": base64.b64encode(f"Basic {BASIC}".encode()).decode()})
    return found


def with_password(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{quote(PASSWORD, safe='')}@")


def models(ids: list[str]) -> tuple[int, bytes]:
    return 200, json.dumps({"object": "list", "data": [{"id": i} for i in ids]}).encode()


def completion(text: str = "Paris") -> Callable[[dict[str, Any], str], tuple[int, bytes]]:
    def post(body: dict[str, Any], auth: str) -> tuple[int, bytes]:
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        if "messages" in body:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return 200, json.dumps({"choices": [choice]}).encode()
    return post


def check_both(tree: Path, folder: Path, url: str, forms: Mapping[str, str],
               env: Mapping[str, str] | None = None, timeout: float = 30) -> Outcome:
    """`check` and `check --json`: exit 0 or 2, no form of a secret on either stream."""
    outcomes = []
    for extra in ((), ("--json",)):
        r = kveval(tree, folder, "check", "--endpoint", url, *extra, env=env, timeout=timeout)
        outcomes.append((" ".join(("check", *extra)), judged(
            r, (0, 2), leaks(forms, {"stdout": r.out, "stderr": r.err}))))
    return first_failing(outcomes)


def scripted_check(gets: dict[str, tuple[int, bytes]], password: bool = False,
                   post: Any = None) -> Callable[[Path, Path], Outcome]:
    def case(tree: Path, folder: Path) -> Outcome:
        with HostileServer("scripted", script=Script(gets, post or completion())) as server:
            url = with_password(server.base_url) if password else server.base_url
            forms = credential_forms() if password else key_forms()
            return check_both(tree, folder, url, forms, None if password else {
                "KVEVAL_API_KEY": KEY})
    return case


def key_as_model(tree: Path, folder: Path) -> Outcome:
    return scripted_check({"/v1/models": models([KEY])})(tree, folder)


def key_in_version(tree: Path, folder: Path) -> Outcome:
    gets = {"/v1/models": models(["m"]),
            "/version": (200, json.dumps({"version": f"0.1 {KEY}"}).encode())}
    return scripted_check(gets)(tree, folder)


def key_url_encoded(tree: Path, folder: Path) -> Outcome:
    echoed = every_form(KEY)
    gets = {"/v1/models": models([echoed["URL-encoded"], echoed["every byte percent-encoded"]])}
    return scripted_check(gets)(tree, folder)


def basic_in_props(tree: Path, folder: Path) -> Outcome:
    gets = {"/v1/models": models(["m"]),
            "/props": (200, json.dumps({"build_info": f"auth Basic {BASIC}"}).encode())}
    return scripted_check(gets, password=True)(tree, folder)


def pair_in_metrics(tree: Path, folder: Path) -> Outcome:
    metrics = f'vllm:cache_config_info{{cache_dtype="{PAIR}"}} 1\n'.encode()
    gets = {"/v1/models": models(["m"]), "/metrics": (200, metrics)}
    return scripted_check(gets, password=True)(tree, folder)


class ChunkedServer(LocalServer):
    """A model list (`ids`) sent with Transfer-Encoding: chunked, each chunk 7 bytes, so
    the key is split across chunks; completions answered "Paris"."""

    def __init__(self, ids: list[str]) -> None:
        body = json.dumps({"object": "list", "data": [{"id": i} for i in ids]}).encode()
        super().__init__(_chunked_handler(body))


def _chunked_handler(body: bytes) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            if self.path != "/v1/models":
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for at in range(0, len(body), 7):
                piece = body[at:at + 7]
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            data = json.dumps({"choices": [{"index": 0, "text": "Paris",
                                            "message": {"content": "Paris"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def key_split_in_chunks(tree: Path, folder: Path) -> Outcome:
    with ChunkedServer([f"model {KEY}"]) as server:
        return check_both(tree, folder, server.base_url, key_forms(), {"KVEVAL_API_KEY": KEY})


# ---------------------------------------------------------------- keys no header can carry


def unsendable_key(value: str) -> Callable[[Path, Path], Outcome]:
    """KVEVAL_API_KEY that no header can carry: `check` and `run` refuse it in one line
    naming the variable, before any request, without printing it."""
    def case(tree: Path, folder: Path) -> Outcome:
        prompts = folder / "p.txt"
        prompts.write_text("Say one.\n")
        outcomes = []
        for name in ("check", "run"):
            with HostileServer("record") as server:
                args = ["check", "--endpoint", server.base_url] if name == "check" else [
                    "run", "--endpoint", server.base_url, "--task", "prompts", "--prompts",
                    str(prompts), "-o", "r.jsonl", "--retries", "0"]
                r = kveval(tree, folder, *args, env={"KVEVAL_API_KEY": value})
                sent = len(server.seen)
            core = value.strip().split()[0]
            problems = [leaks({"the key": core}, {"stdout": r.out, "stderr": r.err}),
                        None if "KVEVAL_API_KEY" in r.err else "does not name the variable",
                        f"{sent} request(s) sent" if sent else None]
            outcomes.append((name, judged(r, (2,), *problems)))
        return first_failing(outcomes)
    return case


# ---------------------------------------------------------------- a proxy, a huge /metrics


def proxy_told(tree: Path, folder: Path) -> Outcome:
    """http_proxy set: the proxy receives the key with every request; `check` says so."""
    with HostileServer("record") as proxy, HostileServer("record") as server:
        env = {"KVEVAL_API_KEY": KEY, "http_proxy": proxy.origin, "no_proxy": ""}
        r = kveval(tree, folder, "check", "--endpoint", server.base_url, env=env)
        seen = sum("authorization" in s["headers"] for s in proxy.seen)
    said = "proxy" in (r.out + r.err).lower()
    note = f"the proxy saw the key in {seen} request(s)"
    return judged(r, (0, 2), None if said or not seen else "does not say the proxy sees the key",
                  leaks(key_forms(), {"stdout": r.out, "stderr": r.err}), note=note)


class HugeMetrics(LocalServer):
    """/metrics streams `size` bytes of Prometheus comments as fast as the socket takes."""

    def __init__(self, size: int) -> None:
        super().__init__(_huge_handler(size))


def _huge_handler(size: int) -> type[BaseHTTPRequestHandler]:
    line = b"# HELP x a comment line of a very large metrics page, one of millions\n"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/v1/models":
                return self._json({"object": "list", "data": [{"id": "m"}]})
            if self.path != "/metrics":
                return self._json({})
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            block, sent = line * 16384, 0
            try:
                while sent < size:
                    chunk = block[: size - sent]
                    self.wfile.write(chunk)
                    sent += len(chunk)
            except OSError:
                pass

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._json({"choices": [{"index": 0, "text": "Paris",
                                     "message": {"content": "Paris"}}]})

    return Handler


def huge_metrics(tree: Path, folder: Path) -> Outcome:
    with HugeMetrics(300 * 1024 * 1024) as server:
        r = kveval(tree, folder, "check", "--endpoint", server.base_url, timeout=60)
    slow = f"took {r.seconds:.0f} s" if r.code is not None and r.seconds > 10 else None
    return judged(r, (0, 2), slow, note=f"{r.seconds:.1f} s")


# ---------------------------------------------------------------- run files and compare


class EchoingServer(LocalServer):
    """Answers every completion with the URL's password as `quoting` writes it, taken from
    the Basic header the request carried, and the whole header base64-encoded."""

    def __init__(self, quoting: Callable[[str], str]) -> None:
        super().__init__(_echoing_handler(quoting))


def _echoing_handler(quoting: Callable[[str], str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            self._json({"object": "list", "data": [{"id": "m"}]} if self.path == "/v1/models"
                       else {})

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            auth = self.headers.get("Authorization") or ""
            pair = base64.b64decode(auth.split()[-1]).decode() if auth.startswith("Basic") \
                else auth
            password = pair.partition(":")[2]
            whole = base64.b64encode(auth.encode()).decode()
            text = f"you sent {quoting(password)} (header {whole})"
            self._json({"choices": [{"index": 0, "text": text, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}]})

    return Handler


def echoed_encoded(quoting: Callable[[str], str]) -> Callable[[Path, Path], Outcome]:
    """`run` with a password in the URL against a server that echoes it encoded; then
    `compare` of that run file shows its answers."""
    def case(tree: Path, folder: Path) -> Outcome:
        prompts = folder / "p.txt"
        prompts.write_text("Say one.\nSay two.\n")
        with EchoingServer(quoting) as server:
            made = kveval(tree, folder, "run", "--endpoint", with_password(server.base_url),
                          "--task", "prompts", "--prompts", str(prompts), "-o", "r.jsonl",
                          "--retries", "0")
        forms = credential_forms()
        outcomes = [("run", judged(made, (0,), leaks(forms, {
            "stdout": made.out, "stderr": made.err, "the run file": read(folder / "r.jsonl")})))]
        if made.code == 0:
            r = kveval(tree, folder, "compare", "r.jsonl", "r.jsonl", "--show", "2")
            outcomes.append(("compare", judged(r, (0,), leaks(forms, {"stdout": r.out}))))
        return first_failing(outcomes)
    return case


def form_encoded(password: str) -> str:
    return quote_plus(password, safe="")


def lower_percent(password: str) -> str:
    return _lower_hex(quote(password, safe=""))


def every_byte(password: str) -> str:
    return "".join(f"%{b:02X}" for b in password.encode())


def bearer_base64(tree: Path, folder: Path) -> Outcome:
    """A key sent as Bearer; the server echoes base64 of the whole header in answers."""
    prompts = folder / "p.txt"
    prompts.write_text("Say one.\n")
    with EchoingServer(lambda p: "-") as server:
        made = kveval(tree, folder, "run", "--endpoint", server.base_url, "--task", "prompts",
                      "--prompts", str(prompts), "-o", "r.jsonl", "--retries", "0",
                      env={"KVEVAL_API_KEY": KEY})
    shown = kveval(tree, folder, "compare", "r.jsonl", "r.jsonl", "--show", "1")
    places = {"the run file": read(folder / "r.jsonl"), "compare": shown.out}
    return judged(made, (0,), leaks(key_forms(), places))
