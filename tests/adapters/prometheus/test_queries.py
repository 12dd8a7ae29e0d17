"""PromQL text: built-in queries, durations, regexes and template rendering."""

from __future__ import annotations

import pytest

from autoscaler.adapters.prometheus import queries
from tests.adapters.prometheus.conftest import CPU, CPU_REQUESTS, CPU_WINDOW
from tests.sim.prometheus import PrometheusProcess


@pytest.mark.parametrize(("seconds", "text"), [(60, "60s"), (1.5, "1500ms"), (0.0001, "1ms")],
                         ids=["whole", "fraction", "floor"])
def test_duration(seconds: float, text: str) -> None:
    """Windows become PromQL durations without fractions."""
    assert queries.duration(seconds) == text


def test_alternation_is_sorted_deduplicated_and_escaped() -> None:
    """Names are matched literally: dots escaped, hyphens left alone, order stable."""
    assert queries.alternation(["web-1", "a.b", "web-1"]) == r"a\.b|web-1"


def test_pod_placeholders() -> None:
    """${pod_regex} and ${pod_selector} are ready for a double-quoted PromQL string."""
    assert queries.pod_regex(["a.b"]) == r"a\\.b"
    assert queries.pod_selector("ns", ["a", "b"]) == 'namespace="ns",pod=~"a|b"'


def test_render_substitutes_every_placeholder() -> None:
    """A template gets the target's namespace, name, kind, pods and container."""
    template = "q{${pod_selector},c=\"${container}\"} # $namespace $name $kind $pod_regex $$"
    rendered = queries.render(template, namespace="shop", name="web", kind="Deployment",
                              pods=["web-1", "web-0"], container="app")
    assert rendered == ('q{namespace="shop",pod=~"web-0|web-1",c="app"} '
                        "# shop web Deployment web-0|web-1 $")


@pytest.mark.parametrize("template", ["q{$nope}", "q $"], ids=["unknown", "stray-dollar"])
def test_render_rejects_bad_templates(template: str) -> None:
    """Unknown placeholders and stray dollars raise instead of reaching Prometheus."""
    with pytest.raises((KeyError, ValueError)):
        queries.render(template, namespace="n", name="w", kind="D", pods=["p"])


def test_usage_query_text() -> None:
    """The cpu query sums real containers' rates by pod over every namespace involved."""
    assert queries.usage_query("cpu", namespaces=["shop", "blog"], per_container=False,
                               window=60) == (
        'sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{container!="",'
        'container!="POD",image!="",namespace=~"blog|shop"}[60s]))')


@pytest.mark.parametrize(("resource", "per_container", "expected"), [
    ("cpu", False, {("shop", "web-0"): 0.25, ("shop", "web-1"): 0.4, ("blog", "api-0"): 0.1}),
    ("cpu", True, {(ns, pod, c): v for (ns, pod, c), v in CPU.items()}),
], ids=["per-pod", "per-container"])
def test_usage_query_on_prometheus(
    prometheus: PrometheusProcess, resource: str, per_container: bool, expected: dict
) -> None:
    """The built-in cpu query runs on a real Prometheus and excludes pod cgroup and pause."""
    promql = queries.usage_query(resource, namespaces=["shop", "blog"],
                                 per_container=per_container, window=CPU_WINDOW)
    got = {tuple(r["metric"][k] for k in ("namespace", "pod", "container")
                 if k in r["metric"]): float(r["value"][1]) for r in prometheus.query(promql)}
    assert got.keys() == expected.keys()
    assert all(got[k] == pytest.approx(v, rel=0.03) for k, v in expected.items())


def test_requests_query_on_prometheus(prometheus: PrometheusProcess) -> None:
    """The kube-state-metrics query folds replicas' duplicates into one series per container."""
    rows = prometheus.query(queries.requests_query("cpu", namespaces=["shop"]))
    got = {(r["metric"]["namespace"], r["metric"]["pod"], r["metric"]["container"]):
           float(r["value"][1]) for r in rows}
    assert got == CPU_REQUESTS
