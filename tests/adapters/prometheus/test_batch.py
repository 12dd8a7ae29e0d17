"""Batching: each distinct query once per pass, counted by the source and on the wire."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import pytest

from autoscaler.adapters.prometheus import PrometheusSource, batch
from autoscaler.adapters.prometheus.batch import QueryKey
from autoscaler.adapters.prometheus.inputs import TargetRequest
from autoscaler.adapters.prometheus.share import narrowed
from autoscaler.algorithm import MetricSourceType, MetricTargetType, PodMetricValues
from tests.adapters.prometheus.conftest import CPU_WINDOW, PER_POD
from tests.adapters.prometheus.support import metric_query, prom_server, spec, target
from tests.sim.prometheus import CountingProxy, PrometheusProcess

R, CR, PODS = (MetricSourceType.RESOURCE, MetricSourceType.CONTAINER_RESOURCE,
               MetricSourceType.PODS)
HOMES = (("shop", ["web-0", "web-1"]), ("blog", ["api-0"]))


@pytest.fixture
def proxy(prometheus: PrometheusProcess) -> Iterator[CountingProxy]:
    with CountingProxy(prometheus.url) as counting:
        yield counting


@pytest.fixture
async def source(proxy: CountingProxy) -> AsyncIterator[PrometheusSource]:
    src = PrometheusSource({"default": prom_server(url=proxy.url)})
    yield src
    await src.close()


def shared_targets(n: int) -> list:
    """N targets over two namespaces, each with a shared Pods query and cpu and memory."""
    metrics = [(spec(PODS, "rps"), metric_query(query="http_requests_per_second")),
               (spec(R, "cpu"), metric_query(window=CPU_WINDOW)),
               (spec(R, "memory"), metric_query(window=CPU_WINDOW))]
    return [target(f"t{i}", namespace=HOMES[i % 2][0], pod_names=HOMES[i % 2][1],
                   metrics=metrics) for i in range(n)]


@pytest.mark.parametrize("n", [1, 2, 20, 200], ids=lambda n: f"{n}-targets")
async def test_shared_queries_run_once(
    source: PrometheusSource, proxy: CountingProxy, n: int
) -> None:
    """A shared Pods query plus cpu and memory cost 3 queries per pass, whatever N is."""
    result = await source.fetch(shared_targets(n), deadline=time.monotonic() + 20)
    assert result.queries_issued == 3
    assert proxy.count("/api/v1/query") == 3
    assert all(isinstance(v, PodMetricValues) for row in result.values.values() for v in row)


async def test_shared_answer_is_split_per_target(source: PrometheusSource) -> None:
    """One shared Pods answer gives each target exactly its own pods' values."""
    result = await source.fetch(shared_targets(2), deadline=time.monotonic() + 10)
    for key, (namespace, pods) in (("t0", HOMES[0]), ("t1", HOMES[1])):
        value = result.values[key][0]
        assert isinstance(value, PodMetricValues)
        assert {p: s.value for p, s in value.samples.items()} == {
            p: PER_POD[namespace, p] * 1000 for p in pods}


async def test_built_in_queries_cover_every_namespace_at_once(
    source: PrometheusSource, proxy: CountingProxy
) -> None:
    """Resource and ContainerResource cpu for targets in two namespaces: one query each."""
    metrics = [(spec(R, "cpu"), metric_query(window=CPU_WINDOW)),
               (spec(CR, "cpu", container="app"), metric_query(window=CPU_WINDOW))]
    targets = [target(f"t{i}", namespace=ns, pod_names=pods, metrics=metrics)
               for i, (ns, pods) in enumerate(HOMES)]
    result = await source.fetch(targets, deadline=time.monotonic() + 10)
    assert (result.queries_issued, proxy.count("/api/v1/query")) == (2, 2)
    assert all('namespace=~"blog|shop"' in q for q in proxy.queries)


async def test_per_target_templates_are_per_target_queries(
    source: PrometheusSource, proxy: CountingProxy
) -> None:
    """A template naming the target renders differently per target: one query each."""
    query = metric_query(query='http_requests_per_second{namespace="$namespace",pod=~"$pod_regex"}')
    targets = [target(f"t{i}", namespace=ns, pod_names=pods, metrics=[(spec(PODS, "r"), query)])
               for i, (ns, pods) in enumerate(HOMES)]
    result = await source.fetch(targets, deadline=time.monotonic() + 10)
    assert (result.queries_issued, proxy.count("/api/v1/query")) == (2, 2)


@pytest.mark.parametrize("n", [1, 1000, 5000], ids=lambda n: f"{n}-targets")
def test_plan_does_not_grow_with_targets(n: int) -> None:
    """Planning alone (no server): the distinct queries stay 3 for thousands of targets."""
    assert len(batch.plan(shared_targets(n), known=lambda _: True).queries) == 3


@pytest.mark.parametrize(("variant", "queries"), [
    ({}, 1),
    ({"window": 30.0}, 2),
    ({"server": "other"}, 2),
    ({"kind": CR}, 2),
    ({"requests_source": "kube-state-metrics"}, 2),
], ids=["same", "other-window", "other-server", "per-container", "ksm-requests"])
def test_what_splits_a_built_in_query(variant: dict, queries: int) -> None:
    """Built-in queries are shared unless window, server or grouping differ."""
    def cpu_target(key: str, **kw: object) -> object:
        kind = kw.get("kind", R)
        metric = spec(kind, "cpu", container="app" if kind is CR else None,
                      target=MetricTargetType.UTILIZATION)
        query = metric_query(window=kw.get("window", 60.0),
                             requests_source=kw.get("requests_source", "pods"))
        return target(key, namespace="shop", pod_names=["web-0"],
                      server=kw.get("server", "default"), metrics=[(metric, query)])
    plan = batch.plan([cpu_target("a"), cpu_target("b", **variant)], known=lambda _: True)
    assert len(plan.queries) == queries


def test_expected_series_counts_pods_for_per_pod_slots_and_one_otherwise() -> None:
    """The decode budget's estimate: per-pod queries answer a series per pod of every target
    sharing them; Object and External queries one each."""
    pods = ["a", "b", "c"]
    per_pod = (spec(MetricSourceType.PODS, "rps"), metric_query(query="sum by (pod) (rps)"))
    external = (spec(MetricSourceType.EXTERNAL, "lag"), metric_query(query="sum(lag)"))
    first = target("shop/web", namespace="shop", pod_names=pods, metrics=[per_pod, external])
    second = target("shop/api", namespace="shop", pod_names=pods[:2], metrics=[per_pod])
    counts = batch.plan([first, second], lambda _: True).expected_series()
    assert counts == {QueryKey("default", "sum by (pod) (rps)"): 5,
                      QueryKey("default", "sum(lag)"): 1}


@pytest.mark.parametrize(("budget", "overlap"), [(1, False), (60_000, True)],
                         ids=["below-every-estimate", "default"])
async def test_the_series_budget_decides_how_many_queries_run_at_once(
    prometheus: PrometheusProcess, budget: int, overlap: bool,
) -> None:
    """Below every query's estimate each query runs alone; within it they overlap. The
    answers are the same either way."""
    proxy = CountingProxy(prometheus.url, delay=0.2)
    with proxy:
        source = PrometheusSource({"default": prom_server(url=proxy.url)},
                                  series_in_flight=budget)
        requests = [target(f"shop/q{i}", namespace="shop", pod_names=["web-0", "web-1"],
                           metrics=[(spec(MetricSourceType.PODS, "rps"), metric_query(
                               query=f"sum by (pod) (http_requests_per_second) * {i}"))])
                    for i in range(1, 4)]
        try:
            result = await source.fetch(requests, deadline=time.monotonic() + 10)
        finally:
            await source.close()
    assert (proxy.max_in_flight > 1) is overlap
    for i in range(1, 4):
        value = result.values[f"shop/q{i}"][0]
        assert isinstance(value, PodMetricValues)
        assert value.samples["web-0"].value == PER_POD["shop", "web-0"] * i * 1000


# --- a share of the fleet: a fleet-wide per-pod query cut to the share's namespaces -----------

FLEET_WIDE = "sum by (namespace, pod) (http_requests_per_second)"


def pods_target(key: str, namespace: str, promql: str,
                kind: MetricSourceType = PODS) -> TargetRequest:
    return target(key, namespace=namespace, pod_names=["web-0"],
                  metrics=[(spec(kind, "rps"), metric_query(query=promql))])


@pytest.mark.parametrize(("promqls", "cut"), [
    ((FLEET_WIDE, FLEET_WIDE), True),
    (("sum by (pod) (rps{app=\"$name\"})",) * 2, True),
    (('sum by (pod) (rps{namespace="$namespace"})',) * 2, False),
    (("sum by (pod) (rps{$pod_selector})",) * 2, False),
], ids=["verbatim", "names-the-workload-only", "names-the-namespace", "names-the-pods"])
def test_a_share_cuts_a_fleet_wide_query_to_its_namespaces(promqls: tuple[str, str],
                                                             cut: bool) -> None:
    """Planned for a share (a ring member, a static shard), a per-pod query from a template
    that names neither namespace nor pods is cut to the namespaces reading it; the same plan
    for the whole fleet, or a template that is scoped already, leaves the query as written."""
    targets = [pods_target("shop/web", "shop", promqls[0]),
               pods_target("blog/web", "blog", promqls[1])]
    whole = batch.plan(targets, known=lambda _: True)
    share = batch.plan(targets, known=lambda _: True, share=True)
    if not cut:
        assert share.queries == whole.queries
        return
    (key,) = share.queries
    (original,) = whole.queries
    assert key.promql == narrowed(original.promql, ["blog", "shop"])
    assert "blog|shop|" in key.promql
    assert {slot.query for row in share.slots.values() for slot in row
            if isinstance(slot, batch.Slot)} == {key}


def test_a_share_keeps_a_query_also_read_whole() -> None:
    """One PromQL read per pod by one target and whole (External) by another: its answer is
    read whole, so it is not cut."""
    targets = [pods_target("shop/web", "shop", FLEET_WIDE),
               pods_target("blog/api", "blog", FLEET_WIDE, kind=MetricSourceType.EXTERNAL)]
    assert batch.plan(targets, known=lambda _: True, share=True).queries == batch.plan(
        targets, known=lambda _: True).queries


async def test_a_cut_answer_is_the_share_and_reads_the_same(
    prometheus: PrometheusProcess, proxy: CountingProxy,
) -> None:
    """Against Prometheus: the cut query answers exactly the share's namespaces' series and
    those without a namespace label, labelled as the query labels them (the marking label
    gone); a share's fetch reads each target's pods as the whole fleet's answer does, and
    shows the query as written."""
    lone = 'label_replace(vector(7), "pod", "web-0", "", "")'  # a pod, no namespace label
    promql = f"{FLEET_WIDE} # a comment ends at its line\nor {lone}"
    answer = prometheus.query(narrowed(promql, ["shop"]))
    assert sorted(((s["metric"], s["value"][1]) for s in answer), key=str) == sorted([
        ({"namespace": "shop", "pod": "web-0"}, "12"), ({"namespace": "shop", "pod": "web-1"}, "8"),
        ({"pod": "web-0"}, "7")], key=str)
    assert len(prometheus.query(promql)) == 4  # blog/api-0 too

    shop = target("shop/web", namespace="shop", pod_names=["web-0", "web-1"],
                  metrics=[(spec(PODS, "rps"), metric_query(query=FLEET_WIDE))])
    read = {}
    for share in (False, True):
        src = PrometheusSource({"default": prom_server(url=proxy.url)}, share=share)
        try:
            result = await src.fetch([shop], deadline=time.monotonic() + 10)
        finally:
            await src.close()
        (value,) = result.values["shop/web"]
        assert isinstance(value, PodMetricValues)
        assert value.query == FLEET_WIDE  # what status and explain show: the query as written
        read[share] = {p: s.value for p, s in value.samples.items()}
    assert read[True] == read[False] == {"web-0": 12_000, "web-1": 8_000}
    assert proxy.queries == [FLEET_WIDE, narrowed(FLEET_WIDE, ["shop"])]
