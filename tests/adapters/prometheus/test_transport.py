"""Transport faults: slow, failing, vanished and non-Prometheus endpoints, within the deadline."""

from __future__ import annotations

import asyncio
import itertools
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler.adapters.prometheus import PrometheusSource, RetryPolicy, TargetRequest
from autoscaler.algorithm import (
    MetricSourceType,
    MetricTargetType,
    MetricUnavailable,
    MetricValues,
    ObjectMetricValue,
)
from tests.adapters.prometheus.support import metric_query, prom_server, spec, target
from tests.sim.prometheus import (
    LoopbackHTTPServer,
    PrometheusMissingError,
    PrometheusProcess,
    StubRequest,
    StubResponse,
    prometheus_error,
    prometheus_vector,
    start_prometheus,
)

FAST = RetryPolicy(attempts=3, initial_wait=0.05, max_wait=0.2, jitter=0.02)
OBJECT = MetricSourceType.OBJECT
def one() -> StubResponse:
    """A sample of 1, stamped now (a response made at import ages past maxSampleAge when the
    suite runs long before this test)."""
    return StubResponse(body=prometheus_vector([({}, 1.0)]))
LATE = 0.5
"""Seconds a result may come after the deadline on a loaded machine: far below the 5 s a
stalled query (or a 30 s timeout) would take, so the deadline is still what is checked."""


def request(server: str = "default", key: str = "shop/web") -> TargetRequest:
    return target(key, namespace="shop", pod_names=["web-0"], server=server,
                  metrics=[(spec(OBJECT, "m"), metric_query(query="vector(1)"))])


def stub(*responses: StubResponse) -> LoopbackHTTPServer:
    """A server answering with ``responses`` in turn, the last one forever after."""
    answers = itertools.chain(responses, itertools.repeat(responses[-1]))
    return LoopbackHTTPServer(lambda _: next(answers))


async def fetch_value(
    source: PrometheusSource, *, within: float = 5.0, server: str = "default"
) -> MetricValues:
    result = await source.fetch([request(server)], deadline=time.monotonic() + within)
    return result.values["shop/web"][0]


@pytest.mark.parametrize("status", [500, 502, 503, 429], ids=str)
async def test_transient_status_is_retried_then_unavailable(status: int) -> None:
    """5xx and 429 are retried retry_attempts times, then the metric is unavailable."""
    with stub(prometheus_error(status, "overloaded", "internal")) as server:
        source = PrometheusSource({"default": prom_server(url=server.url)}, retry=FAST)
        value = await fetch_value(source)
        await source.close()
    assert isinstance(value, MetricUnavailable)
    assert f"Prometheus unavailable: HTTP {status}: overloaded" in value.reason
    assert server.count("/api/v1/query") == FAST.attempts


@pytest.mark.parametrize(("status", "kind"), [
    (400, "query rejected"), (422, "query rejected"), (401, "access denied"),
    (403, "access denied")], ids=str)
async def test_permanent_status_is_not_retried(status: int, kind: str) -> None:
    """Other 4xx answers are permanent: one request, the metric unavailable."""
    with stub(prometheus_error(status, "nope")) as server:
        source = PrometheusSource({"default": prom_server(url=server.url)}, retry=FAST)
        value = await fetch_value(source)
        await source.close()
    assert isinstance(value, MetricUnavailable)
    assert value.reason.startswith(f"{kind}: HTTP {status}: nope")
    assert server.count("/api/v1/query") == 1


async def test_a_retry_can_succeed() -> None:
    """A 503 followed by a good answer yields the value after two requests."""
    with stub(prometheus_error(503, "starting"), one()) as server:
        source = PrometheusSource({"default": prom_server(url=server.url)}, retry=FAST)
        value = await fetch_value(source)
        await source.close()
    assert value == ObjectMetricValue(value=1000)
    assert server.count("/api/v1/query") == 2


async def test_not_prometheus_json() -> None:
    """A 200 that is not Prometheus JSON (a proxy's login page) is bad data, not retried."""
    with stub(StubResponse(body=b"<html>login</html>", content_type="text/html")) as server:
        source = PrometheusSource({"default": prom_server(url=server.url)}, retry=FAST)
        value = await fetch_value(source)
        await source.close()
    assert isinstance(value, MetricUnavailable)
    assert "not Prometheus query JSON" in value.reason
    assert server.count("/api/v1/query") == 1


async def test_slow_endpoint_times_out_and_the_loop_keeps_running() -> None:
    """A server slower than the timeout: retried, unavailable by the deadline, loop never stalls."""
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    with stub(StubResponse(body=one().body, delay=5.0)) as server:
        source = PrometheusSource({"default": prom_server(url=server.url, timeout=0.3)}, retry=FAST)
        beat = asyncio.create_task(ticker())
        started = time.monotonic()
        value = await fetch_value(source, within=1.5)
        elapsed = time.monotonic() - started
        beat.cancel()
        await source.close()
    assert isinstance(value, MetricUnavailable)
    assert "timed out after 0.30s" in value.reason
    assert server.count("/api/v1/query") == FAST.attempts
    assert elapsed < 1.5 + LATE
    assert max(b - a for a, b in itertools.pairwise(ticks)) < 0.1
    assert len(ticks) > elapsed / 0.01 * 0.5


async def test_deadline_beats_a_long_timeout() -> None:
    """The pass deadline bounds a query even when the server's timeout is longer."""
    with stub(StubResponse(body=one().body, delay=5.0)) as server:
        source = PrometheusSource({"default": prom_server(url=server.url, timeout=30)}, retry=FAST)
        started = time.monotonic()
        value = await fetch_value(source, within=0.6)
        elapsed = time.monotonic() - started
        await source.close()
    assert isinstance(value, MetricUnavailable)
    assert elapsed < 0.6 + LATE


async def test_a_slow_server_does_not_hold_up_another(prometheus: PrometheusProcess) -> None:
    """While one server hangs, a fetch against another server answers at once."""
    with stub(StubResponse(body=one().body, delay=5.0)) as server:
        servers = {"slow": prom_server(name="slow", url=server.url, timeout=2),
                   "default": prom_server(url=prometheus.url)}
        source = PrometheusSource(servers, retry=FAST)
        slow = asyncio.create_task(fetch_value(source, within=2.5, server="slow"))
        await asyncio.sleep(0.1)  # the slow query now occupies a worker
        started = time.monotonic()
        fast = await fetch_value(source)
        fast_elapsed = time.monotonic() - started
        assert not slow.done()
        assert isinstance(await slow, MetricUnavailable)
        await source.close()
    assert fast == ObjectMetricValue(value=1000)
    assert fast_elapsed < 0.5


@pytest.fixture
def doomed() -> Iterator[PrometheusProcess]:
    """A Prometheus of the test's own, to be killed by it."""
    with start_prometheus() as prom:
        yield prom


async def test_prometheus_killed_mid_test(doomed: PrometheusProcess) -> None:
    """After Prometheus dies, its metrics are unavailable (connection refused) by the deadline."""
    source = PrometheusSource({"default": prom_server(url=doomed.url)}, retry=FAST)
    assert await fetch_value(source) == ObjectMetricValue(value=1000)
    doomed.kill()
    started = time.monotonic()
    value = await fetch_value(source, within=3.0)
    elapsed = time.monotonic() - started
    await source.close()
    assert isinstance(value, MetricUnavailable)
    assert "Prometheus unavailable: cannot connect to" in value.reason
    assert "ConnectionRefusedError" in value.reason
    assert elapsed < 3.0 + LATE


def test_stub_handler_sees_the_query() -> None:
    """The stub records what it was asked (guards the tests above against a silent stub)."""
    seen: list[StubRequest] = []
    with LoopbackHTTPServer(lambda r: seen.append(r) or one()) as server:
        urllib.request.urlopen(f"{server.url}/api/v1/query?query=up", timeout=5).read()
    assert seen[0].params == {"query": ["up"]}


async def test_deadline_already_passed() -> None:
    """A pass whose deadline has passed sends nothing and reports every metric unavailable."""
    with stub(one()) as server:
        source = PrometheusSource({"default": prom_server(url=server.url)}, retry=FAST)
        result = await source.fetch([request()], deadline=time.monotonic() - 1)
        await source.close()
    assert isinstance(result.values["shop/web"][0], MetricUnavailable)
    assert server.count("/api/v1/query") == 0


def test_missing_prometheus_binary_is_a_hard_failure(tmp_path: Path) -> None:
    """The harness raises (never skips) when the Prometheus binary is absent."""
    with (pytest.raises(PrometheusMissingError, match="install Debian's 'prometheus' package"),
          start_prometheus(binary=str(tmp_path / "prometheus"))):
        pass


async def test_failed_requests_query_invalidates_the_utilization_metric() -> None:
    """With kube-state-metrics requests, a failed requests query makes the metric unavailable."""
    usage = StubResponse(body=prometheus_vector([({"namespace": "shop", "pod": "web-0"}, 0.3)]))

    def handle(req: StubRequest) -> StubResponse:
        if "kube_pod_container_resource_requests" in req.params["query"][0]:
            return prometheus_error(503, "store gateway down", "internal")
        return usage

    with LoopbackHTTPServer(handle) as server:
        source = PrometheusSource({"default": prom_server(url=server.url)}, retry=FAST)
        metric = spec(MetricSourceType.RESOURCE, "cpu", target=MetricTargetType.UTILIZATION)
        request = target("shop/web", namespace="shop", pod_names=["web-0"], metrics=[
            (metric, metric_query(requests_source="kube-state-metrics"))])
        result = await source.fetch([request], deadline=time.monotonic() + 5)
        await source.close()
    value = result.values["shop/web"][0]
    assert isinstance(value, MetricUnavailable)
    assert value.reason == ("requests query: Prometheus unavailable: HTTP 503: "
                            "store gateway down")
