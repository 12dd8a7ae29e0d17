"""The daemon's HTTP endpoints: /healthz, /readyz, /metrics and /status.

/healthz says the event loop is alive and the reconcile loop made progress recently;
/readyz says the config is loaded and the caches are synced; /status shows each target's
conditions and last decision, as ``kubectl describe hpa`` would.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from autoscaler.observability.metrics import DaemonMetrics

CONTENT_TYPE_LATEST = "text/plain; version=0.0.4; charset=utf-8"


class Probes:
    """What the endpoints report; the daemon updates it, the handlers only read it."""

    def __init__(self) -> None:
        self.healthy: Callable[[], tuple[bool, str]] = lambda: (True, "ok")
        self.ready: Callable[[], tuple[bool, str]] = lambda: (False, "starting")
        self.status: Callable[[], dict[str, Any]] = dict


def build_app(probes: Probes, metrics: DaemonMetrics) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        ok, why = probes.healthy()
        return web.Response(status=200 if ok else 503, text=why + "\n")

    async def readyz(_: web.Request) -> web.Response:
        ok, why = probes.ready()
        return web.Response(status=200 if ok else 503, text=why + "\n")

    async def metrics_handler(_: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def status(request: web.Request) -> web.Response:
        body = probes.status()
        target = request.query.get("target")
        if target is not None:
            found = body.get("targets", {}).get(target)
            if found is None:
                return web.json_response({"error": f"no target {target!r}"}, status=404)
            body = found
        return web.Response(
            text=json.dumps(body, indent=2, default=str) + "\n", content_type="application/json"
        )

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/status", status)
    return app


def split_address(address: str) -> tuple[str, int]:
    """"127.0.0.1:8080", "[::1]:8080" or ":8080" (all interfaces) to (host, port)."""
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"listen address {address!r} has no port")
    return host.strip("[]") or "0.0.0.0", int(port)  # noqa: S104 - the user asked for it


async def serve(app: web.Application, address: str) -> web.AppRunner:
    host, port = split_address(address)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


def bound_port(runner: web.AppRunner) -> int:
    """The port actually bound (for ":0" in tests)."""
    for site in runner.sites:
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            return int(server.sockets[0].getsockname()[1])
    raise RuntimeError("the HTTP server is not listening")
