"""A fleet-wide query cut to a share's namespaces: by matchers in its selectors where no
part of it mixes namespaces, else by wrapping it; either way the share's series read as
in the whole answer (checked against the real Prometheus of this package)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from autoscaler.adapters.prometheus.share import narrowed, wrapped
from tests.sim.prometheus import PrometheusProcess

SHARE = ["a", "b"]
KEEP = 'namespace=~"a|b|"'


@pytest.mark.parametrize(("promql", "cut"), [
    ("sum by (namespace, pod) (x)", f"sum by (namespace, pod)(x{{{KEEP}}})"),
    ('sum by (namespace, pod) (rate(x{c="d"}[1m] offset 5m))',
     f'sum by (namespace, pod)(rate(x{{c="d",{KEEP}}}[1m] offset 5m))'),
    ("sum without (container) (x)", f"sum without (container)(x{{{KEEP}}})"),
    ("x / on(namespace, pod) group_left y",
     f"x{{{KEEP}}} / on (namespace, pod) group_left () y{{{KEEP}}}"),
    ("histogram_quantile(0.9, sum by (namespace, pod, le) (rate(h[1m])))",
     f"histogram_quantile(0.9, sum by (namespace, pod, le)(rate(h{{{KEEP}}}[1m])))"),
    ("topk by (namespace, pod) (1, x) > bool 2",
     f"topk by (namespace, pod)(1, x{{{KEEP}}}) > bool 2"),
    ('x{namespace="shop", e!="}{"}', f'x{{namespace="shop",e!="}}{{",{KEEP}}}'),
], ids=["sum-by-namespace", "rate-offset", "without-other", "join-on-namespace",
        "histogram", "topk-compare", "braces-in-a-value"])
def test_a_query_that_keeps_namespaces_apart_is_cut_in_its_selectors(promql: str,
                                                                       cut: str) -> None:
    assert narrowed(promql, SHARE) == cut


@pytest.mark.parametrize("promql", [
    "sum by (pod) (x)",
    "sum without (namespace) (x)",
    "sum(x)",
    "x / on(pod) y",
    "x / ignoring(namespace) y",
    "rate(x[1m]) / scalar(sum(rate(x[1m])))",
    'label_replace(x, "namespace", "$1", "ns", "(.*)")',
    'x{c="d" or e="f"}',
    "count_values by (namespace) (\"v\", x)",
    "this is not promql (",
], ids=["by-pod", "without-namespace", "no-grouping", "on-pod", "ignoring-namespace",
        "share-of-total", "label-replace", "or-matchers", "count-values", "unparsable"])
def test_a_query_that_mixes_namespaces_is_wrapped(promql: str) -> None:
    """Matchers in its selectors would change what it answers for the share (a total over
    the fleet, a pod summed over namespaces, a namespace label rewritten), or the parser
    cannot say: the whole query is evaluated and its answer cut."""
    assert narrowed(promql, SHARE) == wrapped(promql, SHARE)


def share_of(answer: list[Any], namespaces: set[str]) -> list[tuple[str, str]]:
    return sorted((str(sorted(s["metric"].items())), s["value"][1]) for s in answer
                  if s["metric"].get("namespace", "") in namespaces | {""})


@pytest.mark.parametrize("promql", [
    "sum by (namespace, pod) (http_requests_per_second)",
    "sum by (namespace, pod) (rate(container_cpu_usage_seconds_total[4s]))",
    "http_requests_per_second / on(namespace, pod) group_left "
    "sum by (namespace, pod) (rate(container_cpu_usage_seconds_total[4s]))",
    "sum by (pod) (http_requests_per_second)",
    "http_requests_per_second / scalar(sum(http_requests_per_second))",
    "http_requests_per_second / on(pod) group_left "
    "max by (pod) (kube_pod_container_resource_requests)",
], ids=["matchers-sum", "matchers-rate", "matchers-join", "wrapped-by-pod",
        "wrapped-share-of-total", "wrapped-join-on-pod"])
def test_the_cut_answers_the_share_as_the_whole_answer_does(
        prometheus: PrometheusProcess, promql: str) -> None:
    """At one instant, the cut answer is exactly the whole answer's series of the share's
    namespaces and those without one (a share of a total keeps the fleet's total)."""
    at = time.time() - 2
    whole = prometheus.query(promql, at=at)
    assert whole
    for share in ({"shop"}, {"blog"}):
        assert share_of(prometheus.query(narrowed(promql, share), at=at), share) \
            == share_of(whole, share)
        assert len(prometheus.query(narrowed(promql, share), at=at)) == len(
            share_of(whole, share))
