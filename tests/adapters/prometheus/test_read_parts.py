"""A share's pass read in parts (``observe.read_parts``) against the real Prometheus: one
query a part, each cut to its part's namespaces, and every target decided from the values
one read gives."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import pytest

from autoscaler.adapters.prometheus import PrometheusSource
from autoscaler.adapters.prometheus.port import PrometheusMetrics
from autoscaler.algorithm import Pod
from autoscaler.config import TargetConfig, parse_config
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from tests.adapters.prometheus.conftest import PER_POD
from tests.adapters.prometheus.support import pods, prom_server
from tests.runtime.doubles import Fleet
from tests.sim.prometheus import CountingProxy, PrometheusProcess

HOMES = {"shop": ("web", ("web-0", "web-1")), "blog": ("api", ("api-0",))}


class PodsByNamespace:
    """The pods of each namespace's one workload (``HOMES``), as the pod cache gives them."""

    def pods_for(self, namespace: str, selector: str) -> Sequence[Pod]:
        return pods(*HOMES[namespace][1])


def home_targets() -> list[TargetConfig]:
    return list(parse_config("".join(f"""
[[autoscaler]]
namespace = "{namespace}"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "{name}" }}
maxReplicas = 10
metrics = [{{ type = "Pods", pods = {{ metric = {{ name = "rps" }}, target = {{ type = "AverageValue", averageValue = "5" }}, query = "sum by (namespace, pod) (http_requests_per_second)" }} }}]
""" for namespace, (name, _) in HOMES.items())).targets)


@pytest.fixture
def proxy(prometheus: PrometheusProcess) -> Iterator[CountingProxy]:
    with CountingProxy(prometheus.url) as counting:
        yield counting


async def one_pass(proxy: CountingProxy, pods_per_read: int | None) -> Reconciler:
    source = PrometheusSource({"default": prom_server(url=proxy.url)}, share=True)
    fleet = Fleet({})
    reconciler = Reconciler(
        scales=fleet, pods=PodsByNamespace(), metrics=PrometheusMetrics(source), events=fleet,
        owners=fleet, options=ReconcileOptions(pods_per_read=pods_per_read, dry_run=True),
        telemetry=DaemonMetrics())
    try:
        await reconciler.run_pass(home_targets(), deadline=time.monotonic() + 20)
    finally:
        await source.close()
    return reconciler


def read_values(reconciler: Reconciler) -> dict[str, object]:
    """Each target's per-pod values and the count it decided."""
    return {key: (state.desired_replicas,
                  state.to_json()["currentMetrics"][0]["pods"]["values"])
            for key, state in reconciler.states.items()}


async def test_a_pass_over_more_pods_than_a_read_holds_reads_in_parts(
        proxy: CountingProxy) -> None:
    whole = read_values(await one_pass(proxy, None))
    assert proxy.count("/api/v1/query") == 1
    in_parts = read_values(await one_pass(proxy, 2))  # shop's 2 pods, then blog's 1
    assert proxy.count("/api/v1/query") == 3
    assert in_parts == whole
    # The values are the exporter's, each target its own pods' (12 + 8 over 2 pods at 5 a
    # pod: 4 replicas; 3 at 5 would be 1, held at 2 by the scale-down window).
    assert whole == {
        "shop/Deployment/web": (4, {"web-0": str(int(PER_POD["shop", "web-0"])),
                                    "web-1": str(int(PER_POD["shop", "web-1"]))}),
        "blog/Deployment/api": (2, {"api-0": str(int(PER_POD["blog", "api-0"]))})}
