"""A small HTTP server of the test's own on 127.0.0.1, answering one way to every request:
a fake Prometheus or daemon at the protocol level (never a patch of our functions)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EMPTY_VECTOR = {"status": "success", "data": {"resultType": "vector", "result": []}}


@contextlib.contextmanager
def serving(*, status: int = 200, body: Any = None, hang: bool = False) -> Iterator[str]:
    """The server's base URL while the block runs; ``hang``: accept, then never answer."""
    release = threading.Event()
    payload = json.dumps(body).encode() if body is not None else b"not found\n"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if hang:
                release.wait(30)
                return
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            self.do_GET()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
