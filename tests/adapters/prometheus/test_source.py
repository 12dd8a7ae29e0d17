"""Every metric type through ``PrometheusSource.fetch`` against a real Prometheus."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from autoscaler.adapters.prometheus import PrometheusSource
from autoscaler.algorithm import (
    Container,
    ExternalMetricValues,
    MetricSourceType,
    MetricTargetType,
    MetricUnavailable,
    ObjectMetricValue,
    Pod,
    PodMetricValues,
    RequestsBasis,
)
from autoscaler.algorithm.pods import pod_requests
from tests.adapters.prometheus.conftest import (
    CPU,
    CPU_REQUESTS,
    CPU_WINDOW,
    EXTERNAL,
    MEMORY,
    PER_POD,
)
from tests.adapters.prometheus.support import metric_query, prom_server, spec, target
from tests.sim.prometheus import PrometheusProcess, backfill, start_prometheus

R, CR = MetricSourceType.RESOURCE, MetricSourceType.CONTAINER_RESOURCE


@pytest.fixture
def at() -> float:
    """The pinned evaluation instant of the test's pass, slightly in the past."""
    return time.time() - 0.5


@pytest.fixture
async def source(prometheus: PrometheusProcess, at: float) -> AsyncIterator[PrometheusSource]:
    src = PrometheusSource({"default": prom_server(url=prometheus.url)}, clock=lambda: at)
    yield src
    await src.close()


def deadline(seconds: float = 10.0) -> float:
    return time.monotonic() + seconds


def pod_total(table: dict[tuple[str, str, str], float], ns: str, pod: str) -> float:
    return sum(v for (n, p, _), v in table.items() if (n, p) == (ns, pod))


@pytest.mark.parametrize(("resource", "table"), [("cpu", CPU), ("memory", MEMORY)],
                         ids=["cpu", "memory"])
async def test_resource_per_pod(
    source: PrometheusSource, at: float, resource: str, table: dict
) -> None:
    """Built-in Resource queries sum a pod's real containers (no pod cgroup, no pause)."""
    request = target("shop/web", namespace="shop", pod_names=["web-0", "web-1"],
                     metrics=[(spec(R, resource), metric_query(window=CPU_WINDOW))])
    result = await source.fetch([request], deadline=deadline())
    value = result.values["shop/web"][0]
    assert isinstance(value, PodMetricValues)
    for pod in ("web-0", "web-1"):
        expected = pod_total(table, "shop", pod) * 1000
        assert value.samples[pod].value == pytest.approx(expected, rel=0.03)
        assert value.samples[pod].window == CPU_WINDOW
        assert value.samples[pod].timestamp == pytest.approx(at, abs=1e-3)


async def test_container_resource_picks_the_named_container(source: PrometheusSource) -> None:
    """ContainerResource reads only the named container of each pod."""
    request = target("shop/web", namespace="shop", pod_names=["web-0"],
                     metrics=[(spec(CR, "cpu", container="sidecar"), metric_query(window=CPU_WINDOW))])
    value = (await source.fetch([request], deadline=deadline())).values["shop/web"][0]
    assert isinstance(value, PodMetricValues)
    assert value.samples["web-0"].value == pytest.approx(CPU["shop", "web-0", "sidecar"] * 1000,
                                                         rel=0.03)


async def test_container_missing_from_a_pod_fails_the_metric(source: PrometheusSource) -> None:
    """Upstream rule: a pod with metrics but none for the named container invalidates it."""
    request = target("shop/web", namespace="shop", pod_names=["web-0", "web-1"],
                     metrics=[(spec(CR, "cpu", container="sidecar"), metric_query(window=CPU_WINDOW))])
    value = (await source.fetch([request], deadline=deadline())).values["shop/web"][0]
    assert isinstance(value, MetricUnavailable)
    assert "container sidecar not present in metrics for pod shop/web-1" in value.reason


async def test_pods_of_other_targets_are_not_reported(source: PrometheusSource) -> None:
    """Shared answers are split: each target sees its own pods, absent pods stay absent."""
    shop = target("shop/web", namespace="shop", pod_names=["web-0", "gone-9"],
                  metrics=[(spec(R, "cpu"), metric_query(window=CPU_WINDOW))])
    blog = target("blog/api", namespace="blog", pod_names=["api-0"],
                  metrics=[(spec(R, "cpu"), metric_query(window=CPU_WINDOW))])
    result = await source.fetch([shop, blog], deadline=deadline())
    shop_value, blog_value = result.values["shop/web"][0], result.values["blog/api"][0]
    assert isinstance(shop_value, PodMetricValues)
    assert isinstance(blog_value, PodMetricValues)
    assert set(shop_value.samples) == {"web-0"}
    assert set(blog_value.samples) == {"api-0"}
    assert result.queries_issued == 1


async def test_resource_query_override(source: PrometheusSource) -> None:
    """A user query on a Resource metric replaces the built-in usage query."""
    query = metric_query(query='sum by (pod) (container_memory_working_set_bytes{namespace="$namespace",'
                        'pod=~"$pod_regex",container="app"})')
    request = target("shop/web", namespace="shop", pod_names=["web-1"],
                     metrics=[(spec(R, "memory"), query)])
    value = (await source.fetch([request], deadline=deadline())).values["shop/web"][0]
    assert isinstance(value, PodMetricValues)
    assert value.samples["web-1"].value == MEMORY["shop", "web-1", "app"] * 1000


async def test_container_resource_query_override(source: PrometheusSource) -> None:
    """A ContainerResource override gets the container name through ${container}."""
    query = metric_query('sum by (pod) (container_memory_working_set_bytes{${pod_selector},'
                         'container="${container}"})')
    request = target("shop/web", namespace="shop", pod_names=["web-0"],
                     metrics=[(spec(CR, "memory", container="sidecar"), query)])
    value = (await source.fetch([request], deadline=deadline())).values["shop/web"][0]
    assert isinstance(value, PodMetricValues)
    assert value.samples["web-0"].value == MEMORY["shop", "web-0", "sidecar"] * 1000


async def test_requests_from_kube_state_metrics(source: PrometheusSource) -> None:
    """kube-state-metrics requests are folded into the pods (duplicates of replicas merged)."""
    query = metric_query(window=CPU_WINDOW, requests_source="kube-state-metrics")
    request = target("shop/web", namespace="shop", pod_names=["web-0", "web-1"],
                     metrics=[(spec(R, "cpu", target=MetricTargetType.UTILIZATION), query)])
    result = await source.fetch([request], deadline=deadline())
    assert isinstance(result.values["shop/web"][0], PodMetricValues)
    assert result.queries_issued == 2
    requests = {(p.name, c.name): c.requests["cpu"]
                for p in result.pods["shop/web"] for c in p.containers}
    expected = {(pod, c): round(v * 1000) for (_, pod, c), v in CPU_REQUESTS.items()}
    assert requests == expected


async def test_kube_state_metrics_requests_replace_the_applied_ones(
    source: PrometheusSource,
) -> None:
    """kube-state-metrics exports the spec's requests only (kube-state-metrics#2980): on that
    path a request it gives is the one Utilization divides by, whatever the pod's status
    says was applied; a resource it does not give keeps the applied value."""
    query = metric_query(window=CPU_WINDOW, requests_source="kube-state-metrics")
    request = target("shop/web", namespace="shop", pod_names=["web-0"],
                     metrics=[(spec(R, "cpu", target=MetricTargetType.UTILIZATION), query)])
    resized = Pod(name="web-0", containers=(Container(
        name="app", requests={"cpu": 2000}, applied={"cpu": 300, "memory": 7}),))
    request = dataclasses.replace(request, pods=(resized,))
    result = await source.fetch([request], deadline=deadline())
    (pod,) = result.pods["shop/web"]
    assert pod_requests([pod], resource="cpu", container=None, basis=RequestsBasis.APPLIED) \
        == {"web-0": 600}  # app 500m and sidecar 100m, from kube-state-metrics
    assert pod_requests([pod], resource="memory", container="app",
                        basis=RequestsBasis.APPLIED) == {"web-0": 7}


async def test_pods_metric(source: PrometheusSource) -> None:
    """A Pods query yields one sample per pod of the target, keyed by the pod label."""
    query = metric_query(query="http_requests_per_second", window=30)
    request = target("shop/web", namespace="shop", pod_names=["web-0", "web-1"],
                     metrics=[(spec(MetricSourceType.PODS, "rps"), query)])
    value = (await source.fetch([request], deadline=deadline())).values["shop/web"][0]
    assert isinstance(value, PodMetricValues)
    assert {p: s.value for p, s in value.samples.items()} == {
        "web-0": PER_POD["shop", "web-0"] * 1000, "web-1": PER_POD["shop", "web-1"] * 1000}
    assert all(s.window == 30 for s in value.samples.values())


@pytest.mark.parametrize("promql", ['ingress_requests_per_second{ingress="main"}',
                                    'scalar(ingress_requests_per_second{ingress="main"})'],
                         ids=["vector", "scalar"])
async def test_object_metric(source: PrometheusSource, promql: str) -> None:
    """An Object query yields its single value, from a one-series vector or a scalar."""
    request = target("shop/web", namespace="shop", pod_names=["web-0"],
                     metrics=[(spec(MetricSourceType.OBJECT, "rps"), metric_query(query=promql))])
    value = (await source.fetch([request], deadline=deadline())).values["shop/web"][0]
    assert value == ObjectMetricValue(value=42500)


async def test_external_metric_returns_every_series(source: PrometheusSource) -> None:
    """An External query returns every matching value; the core sums them."""
    request = target("shop/web", namespace="shop", pod_names=["web-0"],
                     metrics=[(spec(MetricSourceType.EXTERNAL, "q"), metric_query(query="queue_messages"))])
    value = (await source.fetch([request], deadline=deadline())).values["shop/web"][0]
    assert isinstance(value, ExternalMetricValues)
    assert sorted(value.values) == sorted(round(v * 1000) for v in EXTERNAL.values())


async def test_one_query_read_per_pod_and_whole(source: PrometheusSource) -> None:
    """A query one target reads per pod and another reads whole (External) runs once; each
    gets its own reading (the per-pod one is indexed from the whole answer, not instead of it)."""
    promql = "http_requests_per_second"
    per_pod = target("shop/web", namespace="shop", pod_names=["web-0", "web-1"],
                     metrics=[(spec(MetricSourceType.PODS, "rps"), metric_query(query=promql))])
    whole = target("shop/api", namespace="shop", pod_names=["api-0"],
                   metrics=[(spec(MetricSourceType.EXTERNAL, "rps"), metric_query(query=promql))])
    fetched = await source.fetch([per_pod, whole], deadline=deadline())
    assert fetched.queries_issued == 1
    pods, total = fetched.values["shop/web"][0], fetched.values["shop/api"][0]
    assert isinstance(pods, PodMetricValues)
    assert {p: s.value for p, s in pods.samples.items()} == {
        "web-0": PER_POD["shop", "web-0"] * 1000, "web-1": PER_POD["shop", "web-1"] * 1000}
    assert isinstance(total, ExternalMetricValues)
    assert sorted(total.values) == sorted(round(v * 1000) for v in PER_POD.values())


async def test_values_align_with_metrics(source: PrometheusSource) -> None:
    """Values come back in the order of the target's metrics, one per metric."""
    metrics = [(spec(MetricSourceType.EXTERNAL, "q"), metric_query(query="queue_messages")),
               (spec(R, "memory"), metric_query()),
               (spec(MetricSourceType.OBJECT, "o"), metric_query(query="ingress_requests_per_second"))]
    request = target("shop/web", namespace="shop", pod_names=["web-0"], metrics=metrics)
    row = (await source.fetch([request], deadline=deadline())).values["shop/web"]
    assert [type(v) for v in row] == [ExternalMetricValues, PodMetricValues, ObjectMetricValue]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PrometheusProcess, float]]:
    """A Prometheus whose only data is a backfilled hour of a per-pod gauge (value = minute)."""
    start = (time.time() // 3600 - 3) * 3600  # three hours ago, on the hour
    lines = ["# TYPE app_load gauge"]
    for minute in range(60):
        for pod, scale in (("web-0", 1), ("web-1", 2)):
            lines.append(f'app_load{{namespace="shop",pod="{pod}"}} {minute * scale} '
                         f"{start + minute * 60:.0f}")
    data = tmp_path_factory.mktemp("backfilled")
    backfill(data, "\n".join(lines))
    with start_prometheus(data_dir=data) as prom:
        yield prom, start


async def test_evaluates_at_the_pinned_instant(history: tuple[PrometheusProcess, float]) -> None:
    """All queries of a pass are evaluated at the clock's instant, stamped with it."""
    prom, start = history
    at = start + 30 * 60 + 10  # ten seconds after minute 30's sample
    source = PrometheusSource({"default": prom_server(url=prom.url)}, clock=lambda: at)
    request = target("shop/web", namespace="shop", pod_names=["web-0", "web-1"],
                     metrics=[(spec(MetricSourceType.PODS, "load"), metric_query("app_load"))])
    value = (await source.fetch([request], deadline=deadline())).values["shop/web"][0]
    await source.close()
    assert isinstance(value, PodMetricValues)
    assert {p: (s.value, s.timestamp) for p, s in value.samples.items()} == {
        "web-0": (30_000, at), "web-1": (60_000, at)}
