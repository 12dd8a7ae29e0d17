"""A hostile Prometheus on 127.0.0.1: answers no real one sends, written byte by byte.

``tests.sim.prometheus.LoopbackHTTPServer`` answers whole, well-formed responses; these tests
need what it cannot send: a body generated as it goes (200 MB without holding it), a
``Content-Length`` that lies, a gzip bomb, chunks dripped with pauses, a redirect. Each
request is recorded (``requests``) before ``answer(request) -> Answer`` decides the reply;
the connection is closed after each answer.

    with HostileServer(lambda request: Answer(body=b"...", drip=0.05)) as server:
        server.url, server.requests
"""

from __future__ import annotations

import contextlib
import gzip
import itertools
import json
import socket
import socketserver
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import BinaryIO

from tests.sim.prometheus import StubRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    """Sent as given; ``Content-Length`` is added for a ``bytes`` body unless present, and
    an iterable body without one is sent chunked."""
    body: bytes | Callable[[], Iterable[bytes]] = b""
    drip: float = 0.0
    """Seconds to wait before each chunk of the body (and each byte of ``drip_head``)."""
    drip_head: bool = False
    """Drip the status line and headers too, a byte at a time."""
    chunk: int = 65536
    """Bytes per write of a ``bytes`` body (1: a byte at a time)."""


class HostileServer:
    """A threaded TCP server on 127.0.0.1 speaking just enough HTTP/1.1 to misbehave."""

    def __init__(self, answer: Callable[[StubRequest], Answer]) -> None:
        self.answer = answer
        self.requests: list[StubRequest] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _handler_class(self) -> type[socketserver.BaseRequestHandler]:
        outer = self

        class _Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                request = _read_request(self.rfile)
                if request is None:
                    return
                with outer._lock:
                    outer.requests.append(request)
                # OSError: the client hung up (what a bounded client does): done.
                with contextlib.suppress(OSError):
                    _send(self.connection, outer.answer(request), outer.stopping)

        return _Handler


def _read_request(reader: BinaryIO) -> StubRequest | None:
    line = reader.readline(65537)
    if not line:
        return None
    method, target, _ = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while (header := reader.readline(65537)) not in (b"\r\n", b"\n", b""):
        name, _, value = header.decode("latin-1").partition(":")
        headers[name.strip()] = value.strip()
    body = reader.read(int(headers.get("Content-Length", "0")))
    url = urllib.parse.urlsplit(target)
    return StubRequest(method=method, path=url.path, params=urllib.parse.parse_qs(url.query),
                       headers=headers, body=body)


def _send(sock: socket.socket, answer: Answer, stopping: threading.Event) -> None:
    headers = dict(answer.headers)
    body = answer.body
    chunked = False
    if isinstance(body, bytes):
        headers.setdefault("Content-Length", str(len(body)))
        pieces: Iterable[bytes] = (body[i:i + answer.chunk]
                                   for i in range(0, len(body), answer.chunk))
    else:
        chunked = "Content-Length" not in headers
        if chunked:
            headers["Transfer-Encoding"] = "chunked"
        pieces = body()
    headers.setdefault("Content-Type", "application/json")
    headers["Connection"] = "close"
    head = f"HTTP/1.1 {answer.status} Hostile\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
    _write(sock, [head.encode("latin-1")], drip=answer.drip if answer.drip_head else 0.0,
           per_byte=answer.drip_head, stopping=stopping)
    framed = (b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p) if chunked else pieces
    _write(sock, itertools.chain(framed, [b"0\r\n\r\n"] if chunked else []), drip=answer.drip,
           per_byte=False, stopping=stopping)


def _write(sock: socket.socket, pieces: Iterable[bytes], *, drip: float, per_byte: bool,
           stopping: threading.Event) -> None:
    for piece in pieces:
        for part in ([piece[i:i + 1] for i in range(len(piece))] if per_byte else [piece]):
            if stopping.is_set():
                return
            if drip:
                time.sleep(drip)
            sock.sendall(part)


# --- answers ---------------------------------------------------------------------------------


def vector(series: Iterable[tuple[Mapping[str, str], str]], *, at: float) -> bytes:
    """A successful instant-vector answer, values given as Prometheus writes them."""
    result = [{"metric": dict(labels), "value": [at, value]} for labels, value in series]
    return json.dumps({"status": "success",
                       "data": {"resultType": "vector", "result": result}}).encode()


def huge_vector(total_bytes: int, *, at: float) -> Callable[[], Iterator[bytes]]:
    """A valid vector answer of about ``total_bytes``, generated as it is sent."""
    one = json.dumps({"metric": {"namespace": "shop", "pod": "web-0" + "x" * 40},
                      "value": [at, "1"]}).encode() + b","
    block = one * max(1, 65536 // len(one))
    head = b'{"status":"success","data":{"resultType":"vector","result":['
    tail = json.dumps({"metric": {}, "value": [at, "1"]}).encode() + b"]}}"

    def pieces() -> Iterator[bytes]:
        yield head
        for _ in range(max(1, total_bytes // len(block))):
            yield block
        yield tail

    return pieces


def gzip_bomb(decoded_bytes: int) -> bytes:
    """A gzip stream inflating to ``decoded_bytes`` spaces (valid JSON whitespace), about a
    thousand times smaller: members of a megabyte each, one after the other (RFC 1952 2.2)."""
    member = gzip.compress(b" " * (1 << 20), compresslevel=9)
    return member * max(1, decoded_bytes >> 20)
