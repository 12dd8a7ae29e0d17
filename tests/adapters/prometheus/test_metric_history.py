"""A metric's past totals over a range query: from a real Prometheus with backfilled data,
through the same bounded transport as the instant queries."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import pytest

from autoscaler.adapters.prometheus import HistoryRequest, PrometheusSource
from autoscaler.adapters.prometheus.metric_history import history_promql, parse_matrix
from autoscaler.algorithm import MetricSourceType
from autoscaler.errors import BadDataError, BadQueryError
from tests.adapters.prometheus.support import prom_server, spec
from tests.sim.prometheus import PrometheusProcess, backfill, start_prometheus

STEP = 60
POINTS = 60
# Pods of the Deployment "web" (two generations: a rollout renamed them), and of the
# Deployment "web-api" and the StatefulSet "web", which share the prefix and must not count.
WEB_PODS = {"web-5d8f7c9b4-abcde": 1.0, "web-5d8f7c9b4-fghij": 2.0, "web-6b7c8d9e1-klmno": 4.0}
OTHERS = {"web-api-7f6b5c4d3-zzzzz": 100.0, "web-0": 1000.0}


def load_at(k: int, weight: float) -> float:
    return weight * (10 + k)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PrometheusProcess, float]]:
    """An hour of ``app_load`` per pod, a point a minute, block-aligned hours back."""
    start = (math.floor(time.time() / 7200) - 6) * 7200
    lines = ["# TYPE app_load gauge"]
    for pod, weight in (WEB_PODS | OTHERS).items():
        lines += [f'app_load{{namespace="shop",pod="{pod}"}} {load_at(k, weight)} '
                  f"{start + k * STEP}" for k in range(POINTS)]
    data = tmp_path_factory.mktemp("history")
    backfill(data, "\n".join(lines))
    with start_prometheus(data_dir=data) as prom:
        yield prom, start


def request(*, query: str | None = "app_load{${pod_selector}}", history_query: str | None = None,
            kind: str = "Deployment", metric: MetricSourceType = MetricSourceType.PODS,
            name: str = "web") -> HistoryRequest:
    return HistoryRequest(server="default", namespace="shop", name=name, kind=kind,
                          metric=spec(metric, "cpu" if query is None else "load"), query=query,
                          history_query=history_query, window=60.0)


async def read(prom: PrometheusProcess, asked: HistoryRequest, start: float,
               **server: Any) -> list[tuple[float, float]]:
    source = PrometheusSource({"default": prom_server(url=prom.url, **server)})
    try:
        return await source.history(asked, start=start, end=start + (POINTS - 1) * STEP,
                                    step=STEP, deadline=time.monotonic() + 10)
    finally:
        await source.close()


async def test_the_total_of_every_pod_the_workload_ever_had(
        history: tuple[PrometheusProcess, float]) -> None:
    """The per-pod query, widened from today's pods to the Deployment's pods by name, summed:
    both generations count, a workload that shares the name's prefix does not."""
    prom, start = history
    points = await read(prom, request(), start)
    weight = sum(WEB_PODS.values())
    assert points == [(start + k * STEP, load_at(k, weight)) for k in range(POINTS)]


async def test_a_history_query_is_used_as_written(history: tuple[PrometheusProcess, float]) -> None:
    """``historyQuery`` replaces the derived query; its placeholders are the widened ones."""
    prom, start = history
    asked = request(history_query='sum(app_load{pod=~"${pod_regex}"}) * 2')
    points = await read(prom, asked, start)
    assert points[0] == (start, 2 * load_at(0, sum(WEB_PODS.values())))


async def test_more_than_one_series_is_refused(history: tuple[PrometheusProcess, float]) -> None:
    """A history query must give the total: several series are not summed by guess."""
    prom, start = history
    with pytest.raises(BadDataError, match="returned 3 series; it must return one"):
        await read(prom, request(history_query="app_load{${pod_selector}}"), start)


@pytest.mark.parametrize(("limit", "message"), [
    ({"max_response_bytes": 1024}, "larger than maxResponseBytes = 1,024"),
    ({"max_series": 2}, "holds 5 series, more than maxSeries = 2"),
], ids=["bytes", "series"])
async def test_the_servers_limits_apply(history: tuple[PrometheusProcess, float],
                                        limit: dict[str, int], message: str) -> None:
    """maxResponseBytes and maxSeries bound a range answer too (its points are not series)."""
    prom, start = history
    with pytest.raises(BadDataError, match=message):
        await read(prom, request(history_query="app_load"), start, **limit)


async def test_an_unknown_server_is_a_bad_query(history: tuple[PrometheusProcess, float]) -> None:
    """A server the config does not name: said, not a crash."""
    prom, start = history
    asked = HistoryRequest(server="other", namespace="shop", name="web", kind="Deployment",
                           metric=spec(MetricSourceType.PODS, "load"), query="q",
                           history_query=None, window=60.0)
    with pytest.raises(BadQueryError, match="unknown Prometheus server 'other'"):
        await read(prom, asked, start)


@pytest.mark.parametrize(("asked", "promql"), [
    (request(), 'sum(app_load{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]+"})'),
    (request(kind="StatefulSet", query="rate(x{pod=~\"${pod_regex}\"}[1m])"),
     'sum(rate(x{pod=~"web-[0-9]+"}[1m]))'),
    (request(kind="Rollout", name="a.b"), 'sum(app_load{namespace="shop",pod=~"a\\\\.b-.+"})'),
    (request(query=None, metric=MetricSourceType.RESOURCE),
     'sum(rate(container_cpu_usage_seconds_total{container!="",container!="POD",image!="",'
     'namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]+"}[60s]))'),
    (request(history_query="sum(q{app=\"${name}\"})"), 'sum(q{app="web"})'),
], ids=["deployment", "statefulset", "other-kind-escaped", "built-in-cpu", "history-query"])
def test_history_promql(asked: HistoryRequest, promql: str) -> None:
    """The widened selector per workload kind; the built-in query restricted to the pods."""
    assert history_promql(asked) == promql


@pytest.mark.parametrize(("answer", "points"), [
    ([], []),
    ([{"metric": {}, "values": [[1, "2"], [2, "NaN"], [3, "+Inf"], [4, "5.5"]]}],
     [(1.0, 2.0), (4.0, 5.5)]),
], ids=["empty", "non-finite-left-out"])
def test_parse_matrix(answer: Any, points: list[tuple[float, float]]) -> None:
    """No data is no points; NaN and infinite points are left out, never read as 0."""
    assert parse_matrix(answer) == points


@pytest.mark.parametrize("answer", [
    {"metric": {}}, [{"metric": {}}], [{"values": [["x", "1"]]}], [{"values": [[1]]}],
], ids=["not-a-list", "no-values", "bad-time", "short-point"])
def test_malformed_answers_are_bad_data(answer: Any) -> None:
    """Anything but a range vector of [time, "value"] pairs is refused with a message."""
    with pytest.raises(BadDataError, match="history query's answer"):
        parse_matrix(answer)
