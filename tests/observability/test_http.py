"""The health, readiness, metrics and status endpoints over real HTTP on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from gzip import decompress as gzip_decompress

import aiohttp
import pytest

from autoscaler.observability.http import (
    Probes,
    bound_port,
    build_app,
    serve,
    serve_endpoints,
)
from autoscaler.observability.metrics import DaemonMetrics, MetricReading


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[str, Probes, DaemonMetrics]]:
    probes, metrics = Probes(), DaemonMetrics()
    runner = await serve(build_app(probes, metrics), "127.0.0.1:0")
    try:
        yield f"http://127.0.0.1:{bound_port(runner)}", probes, metrics
    finally:
        await runner.cleanup()


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def test_readyz_follows_the_probe(endpoint: tuple[str, Probes, DaemonMetrics]) -> None:
    """/readyz is 503 until the daemon says it is ready, then 200."""
    url, probes, _ = endpoint
    assert await get(url + "/readyz") == (503, "starting\n")
    probes.ready = lambda: (True, "ready")
    assert await get(url + "/readyz") == (200, "ready\n")


async def test_metrics_are_exposed(endpoint: tuple[str, Probes, DaemonMetrics]) -> None:
    """/metrics serves the daemon's registry in the text format."""
    url, _, metrics = endpoint
    metrics.target("ns/Deployment/web").desired = 7
    status, text = await get(url + "/metrics")
    assert status == 200
    assert 'autoscaler_desired_replicas{namespace="ns",kind="Deployment",name="web"} 7' in text


async def test_status_whole_and_per_target(endpoint: tuple[str, Probes, DaemonMetrics]) -> None:
    """/status returns every target; ?target= one of them, or 404 for an unknown one."""
    url, probes, _ = endpoint
    probes.status = lambda: {"targets": {"a": {"desiredReplicas": 3}}}
    assert (await get(url + "/status?target=a"))[1].strip() == '{\n  "desiredReplicas": 3\n}'
    assert (await get(url + "/status?target=b"))[0] == 404


async def test_status_apart_is_served_on_its_listener_alone() -> None:
    """With a status listener of its own, /status is not on the scrape port, and is there."""
    probes = Probes()
    probes.status = lambda: {"identity": "me"}
    runners = await serve_endpoints(probes, DaemonMetrics(), "127.0.0.1:0",
                                    status_listen="127.0.0.1:0")
    try:
        scrape, status = (f"http://127.0.0.1:{bound_port(r)}" for r in runners)
        assert (await get(scrape + "/status"))[0] == 404
        assert (await get(scrape + "/metrics"))[0] == 200
        assert await get(status + "/status") == (200, '{\n  "identity": "me"\n}\n')
        assert (await get(status + "/metrics"))[0] == 404
    finally:
        for runner in runners:
            await runner.cleanup()


def test_forget_drops_a_removed_targets_series() -> None:
    """After forget(), no series of that target remains in the exposition."""
    metrics = DaemonMetrics()
    metrics.target("ns/Deployment/t").current = 2
    metrics.target("ns/Deployment/t").metrics = (
        MetricReading("cpu", "Resource", True, 80.0, 50.0),)
    metrics.forget("ns/Deployment/t")
    assert b'name="t"' not in metrics.render()


@pytest.mark.parametrize("gzip", [True, False], ids=["gzip", "identity"])
async def test_metrics_are_gzipped_when_asked(
    endpoint: tuple[str, Probes, DaemonMetrics], gzip: bool,
) -> None:
    """Prometheus asks for gzip: the body comes compressed and says so; else plain text."""
    url, _, metrics = endpoint
    metrics.target("ns/Deployment/web").desired = 7
    headers = {"Accept-Encoding": "gzip" if gzip else "identity"}
    async with aiohttp.ClientSession(auto_decompress=False) as session, session.get(
            url + "/metrics", headers=headers) as response:
        body = await response.read()
    assert response.headers.get("Content-Encoding") == ("gzip" if gzip else None)
    text = (gzip_decompress(body) if gzip else body).decode()
    assert 'autoscaler_desired_replicas{namespace="ns",kind="Deployment",name="web"} 7' in text
