"""The health, readiness, metrics and status endpoints over real HTTP on loopback."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
import zlib
from collections.abc import AsyncIterator
from gzip import decompress as gzip_decompress

import aiohttp
import pytest

from autoscaler.observability.http import (
    EXPOSITION_BATCH,
    Exposition,
    Probes,
    bound_port,
    build_app,
    serve,
    serve_endpoints,
)
from autoscaler.observability.metrics import DaemonMetrics, MetricReading
from autoscaler.observability.status_json import Entries


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[str, Probes, DaemonMetrics]]:
    probes, metrics = Probes(), DaemonMetrics()
    runner = await serve(build_app(probes, metrics), "127.0.0.1:0")
    try:
        yield f"http://127.0.0.1:{bound_port(runner)}", probes, metrics
    finally:
        await runner.cleanup()


async def get(url: str, *, agent: str | None = None) -> tuple[int, str]:
    headers = {"User-Agent": agent} if agent is not None else None
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as response:
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
    """/status returns every target; ?target= one of them (built alone), or 404 for an
    unknown one. Compact JSON, or pretty when asked (``?pretty=true``) or for curl, as
    kube-apiserver answers."""
    url, probes, _ = endpoint
    built: list[str] = []

    def build(key: str) -> dict[str, object]:
        built.append(key)
        return {"desiredReplicas": 3, "name": key}

    probes.status = lambda: {"identity": "me", "targets": Entries(["a", "b"], build),
                             "ring": None}
    whole = {"identity": "me", "targets": {k: {"desiredReplicas": 3, "name": k}
                                           for k in ("a", "b")}, "ring": None}
    assert await get(url + "/status?target=a") == (200, '{"desiredReplicas": 3, "name": "a"}\n')
    assert built == ["a"]
    assert (await get(url + "/status?target=c"))[0] == 404
    assert await get(url + "/status") == (200, json.dumps(whole) + "\n")
    pretty = (200, json.dumps(whole, indent=2) + "\n")
    assert await get(url + "/status?pretty=true") == pretty
    assert await get(url + "/status", agent="curl/8.5.0") == pretty
    assert await get(url + "/status?pretty=false", agent="curl/8.5.0") == (
        200, json.dumps(whole) + "\n")


async def test_the_loop_runs_while_a_large_status_is_written(
        endpoint: tuple[str, Probes, DaemonMetrics]) -> None:
    """Each target's status is built as it is written, and other tasks (a pass, a Lease
    renewal) run between pieces: built whole and encoded at once, 10,000 targets held the
    loop ~2 s (``bench/status_serve.py``)."""
    url, probes, _ = endpoint
    turns = [0]
    seen: set[int] = set()

    def build(key: str) -> dict[str, object]:
        seen.add(turns[0])
        return {"name": key, "conditions": ["x" * 100] * 20}

    async def other_task() -> None:
        while True:
            turns[0] += 1
            await asyncio.sleep(0)

    keys = [f"t{n}" for n in range(2_000)]
    probes.status = lambda: {"targets": Entries(keys, build)}
    task = asyncio.get_running_loop().create_task(other_task())
    try:
        status, text = await get(url + "/status")
    finally:
        task.cancel()
    assert status == 200
    assert list(json.loads(text)["targets"]) == keys
    assert len(seen) > 10  # the other task ran between the pieces of one document


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
        assert await get(status + "/status") == (200, '{"identity": "me"}\n')
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


def _fill(metrics: DaemonMetrics, targets: int) -> None:
    """Targets whose series make ~1.4 KB of text each."""
    for i in range(targets):
        series = metrics.target(f"namespace-{i % 50}/Deployment/workload-{i:06d}")
        series.current, series.desired, series.recommended = 3, 4, 4
        series.bounds, series.last_reconcile, series.reconciles = (1, 10), 1.7e9 + i, {"ok": 5}
        series.metrics = (MetricReading("cpu", "Resource", True, 80.0, 50.0),
                          MetricReading("requests_per_second", "Pods", True, 12.5, 10.0))


@pytest.mark.parametrize("gzip", [True, False], ids=["gzip", "identity"])
def test_the_exposition_comes_in_bounded_batches_that_add_up_to_it(gzip: bool) -> None:
    """Each batch is about ``EXPOSITION_BATCH`` of text at most (plus one piece), and the
    batches are the whole exposition, compressed as one gzip stream if asked."""
    metrics = DaemonMetrics()
    _fill(metrics, 3000)
    exposition, batches = Exposition(metrics, gzip=gzip), []
    while not exposition.done:
        batches.append(exposition.next_batch())
    assert exposition.next_batch() == []  # asked again once done: nothing, no second flush
    assert len(batches) > 3
    body = b"".join(piece for batch in batches for piece in batch)
    text = zlib.decompress(body, 16 + zlib.MAX_WBITS) if gzip else body
    per_target = b"# HELP autoscaler_current_replicas"  # before it, process_* moves on
    assert text[text.index(per_target):] == (whole := metrics.render())[whole.index(per_target):]
    if not gzip:
        assert max(sum(map(len, batch)) for batch in batches) < EXPOSITION_BATCH + 200_000


@pytest.mark.parametrize("gzip", [True, False], ids=["gzip", "identity"])
async def test_a_scrape_holds_a_batch_of_the_exposition_not_all_of_it(
    endpoint: tuple[str, Probes, DaemonMetrics], gzip: bool,
) -> None:
    """Rendered whole, a plain scrape held all of the text at once (~33 MB at 11,400
    targets: a ring member's peak RSS). Now the server holds about a batch, whatever the
    exposition's size: the most Python allocates during the scrape (server and client, the
    client reading in small chunks) stays a few batches while the text is over ten."""
    url, _, metrics = endpoint
    _fill(metrics, 9000)
    whole = len(metrics.render())
    assert whole > 10 * EXPOSITION_BATCH
    headers = {"Accept-Encoding": "gzip" if gzip else "identity"}
    received = 0
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        tracemalloc.start()
        try:
            async with session.get(url + "/metrics", headers=headers) as response:
                async for chunk in response.content.iter_chunked(1 << 16):
                    received += len(chunk)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert response.status == 200
    # (process_* series move on between two renders: the plain length is within a few bytes)
    assert abs(received - whole) < 1000 if not gzip else 0 < received < whole / 10
    assert peak < 5 * EXPOSITION_BATCH, f"held {peak / 2**20:.1f} MB of a {whole / 2**20:.1f} MB text"
