"""Bad answers from a real Prometheus become MetricUnavailable, never a value or an exception."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import pytest

from autoscaler.adapters.prometheus import PrometheusSource
from autoscaler.algorithm import MetricSourceType, MetricUnavailable, PodMetricValues
from autoscaler.algorithm.activation import raw_value
from tests.adapters.prometheus.conftest import EXPLOSION
from tests.adapters.prometheus.support import metric_query, prom_server, spec, target
from tests.sim.prometheus import CountingProxy, PrometheusProcess

PODS, OBJECT, EXTERNAL = (MetricSourceType.PODS, MetricSourceType.OBJECT,
                          MetricSourceType.EXTERNAL)
TYPES = pytest.mark.parametrize("kind", [PODS, OBJECT, EXTERNAL], ids=str)


@pytest.fixture
def proxy(prometheus: PrometheusProcess) -> Iterator[CountingProxy]:
    with CountingProxy(prometheus.url) as counting:
        yield counting


@pytest.fixture
async def source(proxy: CountingProxy) -> AsyncIterator[PrometheusSource]:
    src = PrometheusSource({"default": prom_server(url=proxy.url)}, max_series_per_metric=1000)
    yield src
    await src.close()


async def fetch_one(source: PrometheusSource, kind: MetricSourceType, promql: str) -> object:
    request = target("shop/web", namespace="shop", pod_names=["web-0", "web-1"],
                     metrics=[(spec(kind, "m"), metric_query(query=promql))])
    result = await source.fetch([request], deadline=time.monotonic() + 10)
    return result.values["shop/web"][0]


def reason(value: object) -> str:
    assert isinstance(value, MetricUnavailable), f"expected MetricUnavailable, got {value!r}"
    return value.reason


@TYPES
async def test_promql_syntax_error_is_not_retried(
    source: PrometheusSource, proxy: CountingProxy, kind: MetricSourceType
) -> None:
    """A PromQL parse error is a bad query: reported with Prometheus's message, sent once."""
    text = reason(await fetch_one(source, kind, "sum(rate(x[1m])"))
    assert "query rejected: HTTP 400" in text
    assert "parse error" in text
    assert proxy.count("/api/v1/query") == 1


@TYPES
@pytest.mark.parametrize(("series", "why"), [
    ("bad_nan", "NaN"), ("bad_pos_inf", "+Inf"), ("bad_neg_inf", "-Inf"),
    ("bad_negative", "negative value -3"),
], ids=["nan", "pos-inf", "neg-inf", "negative"])
async def test_unusable_values(
    source: PrometheusSource, kind: MetricSourceType, series: str, why: str
) -> None:
    """NaN, infinities and negative values make the metric unavailable."""
    assert why in reason(await fetch_one(source, kind, series))


@pytest.mark.parametrize(("kind", "why"), [
    (OBJECT, "non-numeric value 'text'"), (EXTERNAL, "non-numeric value 'text'"),
    (PODS, "no 'pod' label"),
], ids=str)
async def test_string_result(source: PrometheusSource, kind: MetricSourceType, why: str) -> None:
    """A PromQL string result is not a number (and has no pod label for a Pods metric)."""
    assert why in reason(await fetch_one(source, kind, '"text"'))


async def test_nan_for_one_pod_leaves_that_pod_out(source: PrometheusSource) -> None:
    """A NaN for one pod drops that pod (missing, never zero) and says so; others stay."""
    request = target("shop/web", namespace="shop", pod_names=["web-0", "web-1"],
                     metrics=[(spec(PODS, "lag"), metric_query(query="lag_seconds"))])
    result = await source.fetch([request], deadline=time.monotonic() + 10)
    value = result.values["shop/web"][0]
    assert isinstance(value, PodMetricValues)
    assert set(value.samples) == {"web-1"}
    assert result.warnings["shop/web"] == ("lag: pod web-0: value is NaN",)


@TYPES
async def test_empty_result(source: PrometheusSource, kind: MetricSourceType) -> None:
    """A query that matches nothing is unavailable, not zero."""
    text = reason(await fetch_one(source, kind, "no_such_metric_anywhere"))
    assert "empty result" in text or "no usable sample" in text


async def test_pods_of_other_namespaces_only(source: PrometheusSource) -> None:
    """A Pods vector with none of the target's pods is unavailable."""
    request = target("blog/api", namespace="blog", pod_names=["other-0"],
                     metrics=[(spec(PODS, "rps"), metric_query(query="http_requests_per_second"))])
    value = (await source.fetch([request], deadline=time.monotonic() + 10)).values["blog/api"][0]
    assert "no usable sample for any of the target's 1 pods" in reason(value)


async def test_several_series_for_an_object_metric(source: PrometheusSource) -> None:
    """An Object query must yield exactly one series; the reason names the count."""
    assert "2 series where exactly one is expected" in reason(
        await fetch_one(source, OBJECT, "several"))


async def test_missing_pod_label(source: PrometheusSource) -> None:
    """A Pods vector without the pod label is bad data (the query lacks a by (pod))."""
    assert "no 'pod' label" in reason(await fetch_one(source, PODS, "no_pod_label"))


async def test_several_series_for_one_pod(source: PrometheusSource) -> None:
    """Two series for the same pod are ambiguous: bad data, not a pick."""
    promql = 'label_replace(several, "pod", "web-0", "", "")'
    assert "pod web-0 has several series" in reason(await fetch_one(source, PODS, promql))


@TYPES
async def test_series_explosion(source: PrometheusSource, kind: MetricSourceType) -> None:
    """More series than max_series_per_metric is bad data, whatever the metric type."""
    text = reason(await fetch_one(source, kind, "exploding"))
    assert f"series explosion: {EXPLOSION} series, more than the limit of 1000" in text


async def test_range_vector(source: PrometheusSource) -> None:
    """A range-vector query is refused with a clear reason."""
    assert "range vector" in reason(await fetch_one(source, EXTERNAL, "queue_messages[1m]"))


async def test_a_bad_metric_spoils_only_itself(source: PrometheusSource) -> None:
    """One target's bad query leaves its other metric and other targets untouched."""
    bad = target("shop/a", namespace="shop", pod_names=["web-0"], metrics=[
        (spec(OBJECT, "bad"), metric_query(query="sum(")),
        (spec(EXTERNAL, "ok"), metric_query(query="queue_messages"))])
    good = target("shop/b", namespace="shop", pod_names=["web-0"],
                  metrics=[(spec(PODS, "rps"), metric_query(query="http_requests_per_second"))])
    result = await source.fetch([bad, good], deadline=time.monotonic() + 10)
    assert isinstance(result.values["shop/a"][0], MetricUnavailable)
    assert not isinstance(result.values["shop/a"][1], MetricUnavailable)
    assert isinstance(result.values["shop/b"][0], PodMetricValues)


@pytest.mark.parametrize(("server", "promql", "why"), [
    ("elsewhere", "up", "unknown Prometheus server 'elsewhere'"),
    ("default", "up{pod=~\"$nope\"}", "cannot render the query template"),
    ("default", None, "has no query"),
], ids=["unknown-server", "bad-template", "no-query"])
async def test_config_faults(source: PrometheusSource, server: str, promql: str | None,
                             why: str) -> None:
    """Problems found before querying are per-metric reasons too."""
    request = target("shop/web", namespace="shop", pod_names=["web-0"], server=server,
                     metrics=[(spec(PODS, "m"), metric_query(query=promql))])
    value = (await source.fetch([request], deadline=time.monotonic() + 10)).values["shop/web"][0]
    assert why in reason(value)


async def fetch_zero(source: PrometheusSource, kind: MetricSourceType, promql: str) -> object:
    request = target("shop/web", namespace="shop", pod_names=["web-0"], metrics=[
        (spec(kind, "m"), metric_query(query=promql, when_empty="zero"))])
    result = await source.fetch([request], deadline=time.monotonic() + 10)
    return result.values["shop/web"][0]


@pytest.mark.parametrize("kind", [OBJECT, EXTERNAL], ids=str)
async def test_when_empty_zero_reads_an_empty_answer_as_zero(
    source: PrometheusSource, kind: MetricSourceType,
) -> None:
    """whenEmpty = "zero" (KEDA's ignoreNullValues): no series is 0, for Object and External."""
    value = await fetch_zero(source, kind, "no_such_metric_anywhere")
    assert raw_value(value) == 0  # type: ignore[arg-type]


@pytest.mark.parametrize(("promql", "why"), [
    ("sum(rate(x[1m])", "parse error"), ("bad_nan", "NaN"),
], ids=["query-error", "nan"])
async def test_when_empty_zero_still_fails_what_is_not_empty(
    source: PrometheusSource, promql: str, why: str,
) -> None:
    """Only an answer with no series reads as 0: a query error and NaN stay invalid."""
    assert why in reason(await fetch_zero(source, EXTERNAL, promql))
