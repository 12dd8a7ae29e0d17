"""Every query's end is told to the source's observer: server, seconds and error (the
daemon's query latency and errors by server and reason). A real Prometheus answers; stubs
on loopback fail as broken servers do."""

from __future__ import annotations

import time

import pytest

from autoscaler.adapters.prometheus import PrometheusSource
from autoscaler.adapters.prometheus.client import RetryPolicy
from autoscaler.algorithm import MetricSourceType
from autoscaler.errors import AutoscalerError
from autoscaler.observability.metrics import query_error_reason
from tests.adapters.prometheus.support import metric_query, prom_server, spec, target
from tests.sim.prometheus import (
    LoopbackHTTPServer,
    PrometheusProcess,
    StubRequest,
    StubResponse,
    prometheus_error,
)

Seen = list[tuple[str, float, AutoscalerError | None]]


async def fetch_one(url: str, query: str, seen: Seen, *, timeout: float = 5.0) -> None:
    source = PrometheusSource({"prom": prom_server(name="prom", url=url, timeout=timeout)},
                              retry=RetryPolicy(attempts=2, initial_wait=0.01, max_wait=0.01),
                              observe=lambda *told: seen.append(told))
    request = target("shop/Deployment/web", namespace="shop", pod_names=["web-0"],
                     server="prom", metrics=[(spec(MetricSourceType.EXTERNAL, "q"),
                                              metric_query(query))])
    try:
        await source.fetch([request], deadline=time.monotonic() + 5)
    finally:
        await source.close()


async def test_an_answered_query_is_told_without_error(prometheus: PrometheusProcess) -> None:
    """One query, its server's name and its duration; no error."""
    seen: Seen = []
    await fetch_one(prometheus.url, "sum(queue_messages)", seen)
    [(server, seconds, error)] = seen
    assert (server, error) == ("prom", None)
    assert 0 < seconds < 5


@pytest.mark.parametrize(("answer", "reason"), [
    (prometheus_error(400, "parse error"), "bad_query"),
    (prometheus_error(503, "overloaded"), "unavailable"),
    (prometheus_error(429, "slow down"), "throttled"),
    (StubResponse(status=401), "access_denied"),
    (StubResponse(body=b"<html>proxy</html>"), "bad_data"),
    (StubResponse(delay=1.0), "timeout"),
], ids=["bad-query", "unavailable", "throttled", "access-denied", "not-json", "too-slow"])
async def test_a_failed_query_is_told_once_with_its_error(answer: StubResponse,
                                                          reason: str) -> None:
    """Once per query, after its retries, with the error whose kind names the reason."""
    seen: Seen = []

    def broken(_: StubRequest) -> StubResponse:
        return answer

    with LoopbackHTTPServer(broken) as server:
        await fetch_one(server.url, "sum(x)", seen, timeout=0.3)
    [(name, _, error)] = seen
    assert name == "prom"
    assert error is not None
    assert query_error_reason(error) == reason
