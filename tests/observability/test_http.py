"""The health, readiness, metrics and status endpoints over real HTTP on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from autoscaler.observability.http import Probes, bound_port, build_app, serve, split_address
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
    assert 'autoscaler_desired_replicas{target="ns/Deployment/web"} 7.0' in text


async def test_status_whole_and_per_target(endpoint: tuple[str, Probes, DaemonMetrics]) -> None:
    """/status returns every target; ?target= one of them, or 404 for an unknown one."""
    url, probes, _ = endpoint
    probes.status = lambda: {"targets": {"a": {"desiredReplicas": 3}}}
    assert (await get(url + "/status?target=a"))[1].strip() == '{\n  "desiredReplicas": 3\n}'
    assert (await get(url + "/status?target=b"))[0] == 404


def test_forget_drops_a_removed_targets_series() -> None:
    """After forget(), no series of that target remains in the exposition."""
    metrics = DaemonMetrics()
    metrics.target("t").current = 2
    metrics.target("t").metrics = (MetricReading("cpu", True, 80.0, 50.0),)
    metrics.forget("t")
    assert b'target="t"' not in metrics.render()


@pytest.mark.parametrize(
    ("address", "expected"),
    [("127.0.0.1:8080", ("127.0.0.1", 8080)), ("[::1]:9", ("::1", 9)), (":80", ("0.0.0.0", 80))],
    ids=["ipv4", "ipv6", "all-interfaces"],
)
def test_split_address(address: str, expected: tuple[str, int]) -> None:
    """Listen addresses parse into host and port."""
    assert split_address(address) == expected
