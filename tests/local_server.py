"""The test servers' common part: an HTTP server on 127.0.0.1 at a free port, served from a
thread for the length of a with-block."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar


class QuietServer(ThreadingHTTPServer):
    request_queue_size = 1024  # the default 5 drops connections under concurrency
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that went away (a reset at its pool's close) is no server error: the
        default prints a traceback to stderr, into the output a test reads."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


S = TypeVar("S", bound="LocalServer")


class LocalServer:
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._httpd = QuietServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        return self.origin + "/v1"

    def __enter__(self: S) -> S:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
