"""A Prometheus query's deadline: its sockets shut down at its timeout, whatever the server does.

requests' timeouts are per read, so a server dripping its TLS handshake, headers or body a
byte at a time (each byte restarting the timer) could hold a worker thread for ever. Here one
watchdog thread keeps every exchange's deadline; the connections of the ``session`` this
module makes register their sockets with the exchange the calling thread runs
(``deadline``), and at the deadline the watchdog shuts them down, so whatever read blocks on
them returns at once (``transport`` then reports the query as timed out).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool


class Watch:
    """The sockets of one exchange; ``expire`` (from the watchdog's thread) shuts them down,
    so whatever read blocks on them returns at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.expired = False
        self.done = False

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def expire(self) -> None:
        with self._lock:
            if self.done:  # its connection may be back in the pool, serving another query
                return
            self.expired = True
            for sock in self._sockets:
                _shut(sock)

    def finish(self) -> None:
        with self._lock:
            self.done = True


class _Watchdog:
    """One daemon thread expiring every exchange at its deadline (a timer thread per query
    cost 0.3 ms to start); a daemon, so it never holds up the interpreter's exit."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Watch]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, watch: Watch, deadline: float) -> None:
        with self._changed:
            heapq.heappush(self._due, (deadline, next(self._order), watch))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="prometheus-deadlines",
                                                daemon=True)
                self._thread.start()
            self._changed.notify()

    def _run(self) -> None:
        with self._changed:
            while True:
                now = time.monotonic()
                while self._due and (self._due[0][0] <= now or self._due[0][2].done):
                    watch = heapq.heappop(self._due)[2]
                    if not watch.done:
                        watch.expire()
                self._changed.wait(self._due[0][0] - now if self._due else None)


_watchdog = _Watchdog()


def _shut(sock: socket.socket) -> None:
    # The plain socket's shutdown, also under TLS: SSLSocket's own would touch the SSL object
    # another thread is reading with. OSError: already closed, nothing left to stop.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Current(threading.local):
    watch: Watch | None = None


_current = _Current()
"""The exchange the worker thread is running; its connections register their sockets."""


def _register(sock: socket.socket | None) -> None:
    watch = _current.watch
    if watch is not None and sock is not None:
        watch.add(sock)


class _WatchedHTTPConnection(HTTPConnection):
    def _new_conn(self) -> socket.socket:  # a new socket, before any handshake on it
        sock = super()._new_conn()
        _register(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        _register(self.sock)  # a kept-alive connection, reused
        super().request(*args, **kwargs)


class _WatchedHTTPSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _register(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        _register(self.sock)
        super().request(*args, **kwargs)


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


_WATCHED_POOLS = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}


class WatchedAdapter(HTTPAdapter):
    """requests' adapter, with connections whose sockets the exchange's timer can shut."""

    def __init__(self) -> None:
        super().__init__(max_retries=0)  # our retries are tenacity's, within the deadline

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _WATCHED_POOLS

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **kwargs)
        if not proxy.lower().startswith("socks"):  # SOCKS brings connection classes of its own
            manager.pool_classes_by_scheme = _WATCHED_POOLS
        return manager


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[Watch]:
    """Shut every socket the calling thread's connections use down ``seconds`` from now,
    until the block ends; ``Watch.expired`` says whether that happened."""
    watch = Watch()
    _current.watch = watch
    _watchdog.watch(watch, time.monotonic() + seconds)
    try:
        yield watch
    finally:
        watch.finish()
        _current.watch = None


def session(*, verify: bool | str) -> requests.Session:
    """A session for one server in one worker thread (requests' sessions are not
    documented as thread-safe)."""
    made = requests.Session()
    made.verify = verify
    adapter = WatchedAdapter()
    made.mount("http://", adapter)
    made.mount("https://", adapter)
    return made

