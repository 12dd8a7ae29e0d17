"""What a client can hold of the daemon by connecting to its HTTP listener: little, briefly.

- time: a connection waits at most ``IDLE_TIMEOUT`` for a request, its first (counted from
  the accept: a client that sends part of a request's head and no more, or drips it a byte
  at a time, is closed then) or the next one (keep-alive). aiohttp's keep-alive timer does
  both: armed at the accept and after each response, never pushed back by bytes that do not
  complete a request.
- count: at most ``connection_cap()`` connections at once, a quarter of the process's
  descriptor limit (at most ``MAX_CONNECTIONS``): the other three quarters stay the scaling
  path's (the API server's and Prometheus's connections, the state file), whatever clients
  do. At the cap a new connection takes the place of the oldest one that has not sent a
  whole request head yet, so a flood of partial requests cannot lock the probes out; if
  every connection has sent one, the new connection is closed at once.
"""

from __future__ import annotations

import asyncio
import resource
import socket
from collections.abc import Callable

import structlog
from aiohttp import web

log = structlog.get_logger("autoscaler.http")

IDLE_TIMEOUT = 10.0
"""Seconds a connection may wait for its request's head (a probe sends it at once;
Prometheus reconnects when its scrape interval is longer)."""
MAX_CONNECTIONS = 512
BACKLOG = 1024
"""Connections the kernel queues until they are accepted (aiohttp's default is 128): a
flood that fills the queue makes every other client, a probe too, wait a second to retry."""
_HEAD_END = (b"\r\n\r\n", b"\n\n")


def connection_cap() -> int:
    """A quarter of the soft limit on open descriptors, between 8 and ``MAX_CONNECTIONS``
    (systemd's default soft limit of 1,024 gives 256)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft // 4))


class ConnectionCap:
    """A protocol factory around aiohttp's, holding its connections to ``limit``."""

    def __init__(self, factory: Callable[[], asyncio.Protocol], limit: int) -> None:
        self._factory = factory
        self.limit = limit
        self._open: dict[_Guarded, None] = {}  # oldest first
        self._freed = asyncio.Event()
        self.evicted = 0
        self.refused = 0

    def __call__(self) -> asyncio.Protocol:
        return _Guarded(self._factory(), self)

    def __len__(self) -> int:
        return len(self._open)

    async def room(self) -> None:
        """Return once a new connection can be admitted, by room or by eviction."""
        while len(self._open) >= self.limit and all(c.head_seen for c in self._open):
            self._freed.clear()
            await self._freed.wait()

    def admit(self, connection: _Guarded) -> bool:
        if len(self._open) >= self.limit:
            waiting = next((c for c in self._open if not c.head_seen), None)
            if waiting is None:
                self.refused += 1
                return False
            self.evicted += 1
            self.release(waiting)
            waiting.abort()
        self._open[connection] = None
        return True

    def release(self, connection: _Guarded) -> None:
        if self._open.pop(connection, 0) is None:
            self._freed.set()


class _Guarded(asyncio.Protocol):
    """aiohttp's protocol for one connection, admitted by the cap, watched for the end of
    its first request head."""

    def __init__(self, inner: asyncio.Protocol, cap: ConnectionCap) -> None:
        self._inner, self._cap = inner, cap
        self._transport: asyncio.BaseTransport | None = None
        self._admitted = False
        self._tail = b""
        self.head_seen = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._admitted = self._cap.admit(self)
        if not self._admitted:
            self.abort()
            return
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self._admitted:
            return
        if not self.head_seen:
            seen = self._tail + data
            self.head_seen = any(end in seen for end in _HEAD_END)
            self._tail = seen[-3:]
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._admitted else None

    def connection_lost(self, exc: Exception | None) -> None:
        self._cap.release(self)
        if self._admitted:
            self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def abort(self) -> None:
        """Close at once (RST, no lingering): the descriptor is free now."""
        if self._transport is not None:
            self._transport.abort()  # type: ignore[attr-defined]


class CappedSite(web.BaseSite):
    """aiohttp's TCP site with an accept loop of its own: one connection accepted at a
    time, and none served while the cap is full of connections that have all sent a
    request (it waits; the rest wait in the kernel's queue). asyncio's own loop accepts up
    to its backlog in one go and hands each to its protocol later: a flood had 256
    descriptors open at once through a cap of 64."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *,
                 limit: int) -> None:
        super().__init__(runner)
        self._own_runner = runner
        self._host, self._port = host, port
        self._limit = limit
        self.cap: ConnectionCap | None = None

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._own_runner.server
        assert server is not None  # the runner was set up
        self.cap = ConnectionCap(server, self._limit)
        self._server = _Acceptor(_listening(self._host, self._port), self.cap)


def _listening(host: str, port: int) -> list[socket.socket]:
    """Sockets listening on every address ``host`` names, as asyncio's create_server binds."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, _, _, _, address in dict.fromkeys(found):
            sock = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class _Acceptor(asyncio.AbstractServer):
    """The accept loop of each listening socket, stopped by ``close``."""

    def __init__(self, sockets: list[socket.socket], cap: ConnectionCap) -> None:
        self._sockets = sockets
        self._cap = cap
        self._loop = asyncio.get_running_loop()
        self._tasks = [asyncio.ensure_future(self._accept(sock)) for sock in sockets]

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return tuple(self._sockets)

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def is_serving(self) -> bool:
        return not all(task.done() for task in self._tasks)

    async def start_serving(self) -> None:
        """Serving from the start."""

    async def serve_forever(self) -> None:
        await self.wait_closed()

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for sock in self._sockets:
            sock.close()

    async def wait_closed(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._cap.room()
            try:
                accepted, _ = await loop.sock_accept(listening)
            except OSError as error:  # out of descriptors (EMFILE): as asyncio, a pause
                log.warning("cannot accept a connection", error=error.strerror)
                await asyncio.sleep(1.0)
                continue
            try:
                await self._cap.room()  # it may have filled while this one was awaited
                await loop.connect_accepted_socket(self._cap, accepted)
            except OSError:  # gone already
                accepted.close()
            except asyncio.CancelledError:
                accepted.close()
                raise
