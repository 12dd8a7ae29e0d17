"""The daemon's HTTP endpoints: /healthz, /readyz, /metrics and /status.

/healthz says the event loop is alive and the reconcile loop made progress recently;
/readyz says the config is loaded and the caches are synced; /status shows each target's
conditions and last decision, as ``kubectl describe hpa`` would.

/status is only ever served on loopback, on a listener of its own beside a listen address
that is not loopback (``autoscaler.observability.addresses`` holds that rule).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import web

from autoscaler.observability.addresses import split_address
from autoscaler.observability.listener import IDLE_TIMEOUT, CappedSite, connection_cap
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.observability.status_json import encode, pieces, wants_pretty

CONTENT_TYPE_LATEST = "text/plain; version=0.0.4; charset=utf-8"
log = structlog.get_logger("autoscaler.http")


class Probes:
    """What the endpoints report; the daemon updates it, the handlers only read it."""

    def __init__(self) -> None:
        self.healthy: Callable[[], tuple[bool, str]] = lambda: (True, "ok")
        self.ready: Callable[[], tuple[bool, str]] = lambda: (False, "starting")
        self.status: Callable[[], dict[str, Any]] = dict


def build_app(probes: Probes, metrics: DaemonMetrics, *,
              with_status: bool = True) -> web.Application:
    """The probes and /metrics; /status too unless it is served apart (``status_app``)."""

    async def healthz(_: web.Request) -> web.Response:
        ok, why = probes.healthy()
        return web.Response(status=200 if ok else 503, text=why + "\n")

    async def readyz(_: web.Request) -> web.Response:
        ok, why = probes.ready()
        return web.Response(status=200 if ok else 503, text=why + "\n")

    async def metrics_handler(request: web.Request) -> web.StreamResponse:
        # Off the event loop: 10,000 targets are ~260,000 lines (bench/daemon_scale.py).
        gzip = "gzip" in request.headers.get("Accept-Encoding", "")
        exposition = Exposition(metrics, gzip=gzip)
        batch = await asyncio.to_thread(exposition.next_batch)
        response = web.StreamResponse(headers={"Content-Type": CONTENT_TYPE_LATEST})
        if gzip:
            response.headers["Content-Encoding"] = "gzip"
        await response.prepare(request)
        while True:
            for piece in batch:
                await response.write(piece)
            if exposition.done:
                break
            batch = await asyncio.to_thread(exposition.next_batch)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_handler)
    if with_status:
        app.router.add_get("/status", _status_handler(probes))
    return app


EXPOSITION_BATCH = 1 << 20
"""Bytes of text rendered per trip to a worker thread, and so at most held by a scrape (plus
one piece: a family's ``per_target._CHUNK`` targets)."""


class Exposition:
    """The text format in batches of about ``EXPOSITION_BATCH`` bytes, each rendered (and
    gzipped, if asked) in a worker thread, written before the next is rendered: a scrape
    holds one batch, never the whole exposition. (Rendered whole, a plain-text scrape held
    all ~33 MB of 11,400 targets' text at once: a ring member's peak RSS at 50,000 targets
    over 5, bench/ring_scale.py.) gzip at level 1: 10,000 targets' 29 MB become ~1.2 MB;
    higher levels cost several times the time for a few percent less."""

    def __init__(self, metrics: DaemonMetrics, *, gzip: bool) -> None:
        self._pieces = metrics.exposition()
        self._packer = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS) if gzip \
            else None  # 16+: a gzip wrapper
        self.done = False

    def next_batch(self) -> list[bytes]:
        """The next batch (maybe empty: zlib holds most pieces back); ``done`` once the last
        has been returned. One caller at a time, from any thread."""
        batch: list[bytes] = []
        size = 0
        if self.done:
            return batch
        for piece in self._pieces:
            size += len(piece)
            batch.append(piece if self._packer is None else self._packer.compress(piece))
            if size >= EXPOSITION_BATCH:
                break
        else:
            self.done = True
            if self._packer is not None:
                batch.append(self._packer.flush())
        return [piece for piece in batch if piece]


def status_app(probes: Probes) -> web.Application:
    app = web.Application()
    app.router.add_get("/status", _status_handler(probes))
    return app


def _status_handler(probes: Probes) -> Callable[[web.Request], Any]:
    async def status(request: web.Request) -> web.StreamResponse:
        body = probes.status()
        pretty = wants_pretty(request.query, request.headers.get("User-Agent", ""))
        target = request.query.get("target")
        if target is not None:
            found = body.get("targets", {}).get(target)
            if found is None:
                return web.json_response({"error": f"no target {target!r}"}, status=404)
            return web.Response(text=encode(found, pretty=pretty) + "\n",
                                content_type="application/json")
        response = web.StreamResponse()
        response.content_type = "application/json"
        response.charset = "utf-8"
        await response.prepare(request)
        for piece in pieces(body, pretty=pretty):
            await response.write(piece.encode())
            await asyncio.sleep(0)  # a pass, a Lease renewal: the loop runs between pieces
        await response.write_eof()
        return response

    return status


async def serve_endpoints(probes: Probes, metrics: DaemonMetrics, listen: str, *,
                          status_listen: str | None) -> list[web.AppRunner]:
    """The daemon's listeners: the probes and /metrics on ``listen``, /status there too or,
    given ``status_listen`` (``status_address``), on that listener alone."""
    apart = status_listen
    limit = connection_cap() // (1 if apart is None else 2)  # the listeners share the cap
    runners = [await serve(build_app(probes, metrics, with_status=apart is None), listen,
                           limit=limit)]
    log.info("listening", address=listen, endpoints="/healthz /readyz /metrics"
             + (" /status" if apart is None else ""))
    if apart is not None:
        try:
            runners.append(await serve(status_app(probes), apart, limit=limit))
        except BaseException:
            await runners[0].cleanup()
            raise
        log.info("listening", address=apart, endpoints="/status")
    return runners


HTTP_SHUTDOWN_GRACE = 1.0
"""Seconds requests in flight at a stop get to finish (a /metrics render at 10,000 targets
takes 0.24 s); aiohttp's own default is 60, past any stop timeout."""


async def serve(app: web.Application, address: str, *, limit: int | None = None,
                idle_timeout: float = IDLE_TIMEOUT) -> web.AppRunner:
    """``app`` on ``address``, within the listener's bounds (``listener.py``): at most
    ``limit`` connections at once (``connection_cap()`` by default), each waiting at most
    ``idle_timeout`` seconds for a request."""
    host, port = split_address(address)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=HTTP_SHUTDOWN_GRACE,
                           keepalive_timeout=idle_timeout)
    await runner.setup()
    await CappedSite(runner, host, port, limit=limit or connection_cap()).start()
    return runner


def bound_port(runner: web.AppRunner) -> int:
    """The port actually bound (for ":0" in tests)."""
    for site in runner.sites:
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            return int(server.sockets[0].getsockname()[1])
    raise RuntimeError("the HTTP server is not listening")
