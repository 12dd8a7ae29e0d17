"""One real Prometheus for the package, scraping a test exporter seeded with known series.

Known series (the tests derive their expectations from these constants):
- cAdvisor: per-container CPU counters and memory gauges for shop/web-0, shop/web-1 and
  blog/api-0, plus the pod cgroup (container="") and pause (container="POD") series the
  built-in queries must ignore.
- kube-state-metrics: cpu requests, duplicated by two replicas (label ``replica``).
- custom: a per-pod gauge, an object gauge, external gauges and deliberately bad series.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.sim.prometheus import MetricsExporter, PrometheusProcess, start_prometheus

CPU_WINDOW = 4.0
"""The ``rate()`` range the tests use (short, so the module starts fast; scrapes are 1 s)."""

CPU = {  # (namespace, pod, container) -> cores per second
    ("shop", "web-0", "app"): 0.2,
    ("shop", "web-0", "sidecar"): 0.05,
    ("shop", "web-1", "app"): 0.4,
    ("blog", "api-0", "app"): 0.1,
}
MEMORY = {  # bytes
    ("shop", "web-0", "app"): 100 * 2**20,
    ("shop", "web-0", "sidecar"): 2**20,
    ("shop", "web-1", "app"): 200 * 2**20,
    ("blog", "api-0", "app"): 50 * 2**20,
}
CPU_REQUESTS = {("shop", "web-0", "app"): 0.5, ("shop", "web-0", "sidecar"): 0.1,
                ("shop", "web-1", "app"): 0.5}
PER_POD = {("shop", "web-0"): 12.0, ("shop", "web-1"): 8.0, ("blog", "api-0"): 3.0}
EXTERNAL = {"a": 10.0, "b": 20.5}
EXPLOSION = 3000


def seed(exporter: MetricsExporter) -> None:
    for (ns, pod, container), cores in CPU.items():
        labels = {"namespace": ns, "pod": pod, "container": container, "image": "img"}
        exporter.set_counter("container_cpu_usage_seconds_total", labels, per_second=cores)
        exporter.set_gauge("container_memory_working_set_bytes", labels, MEMORY[ns, pod, container])
    for container, image in (("", ""), ("POD", "pause")):  # what the built-ins must skip
        labels = {"namespace": "shop", "pod": "web-0", "container": container, "image": image}
        exporter.set_counter("container_cpu_usage_seconds_total", labels, per_second=5.0)
        exporter.set_gauge("container_memory_working_set_bytes", labels, 2**30)
    for (ns, pod, container), cores in CPU_REQUESTS.items():
        for replica in ("a", "b"):
            exporter.set_gauge("kube_pod_container_resource_requests", {
                "namespace": ns, "pod": pod, "container": container, "resource": "cpu",
                "unit": "core", "replica": replica}, cores)
    for (ns, pod), value in PER_POD.items():
        exporter.set_gauge("http_requests_per_second", {"namespace": ns, "pod": pod}, value)
    exporter.set_gauge("ingress_requests_per_second", {"ingress": "main"}, 42.5)
    for queue, depth in EXTERNAL.items():
        exporter.set_gauge("queue_messages", {"queue": queue}, depth)
    _seed_faults(exporter)


def _seed_faults(exporter: MetricsExporter) -> None:
    exporter.set_gauge("lag_seconds", {"namespace": "shop", "pod": "web-0"}, float("nan"))
    exporter.set_gauge("lag_seconds", {"namespace": "shop", "pod": "web-1"}, 5.0)
    exporter.set_gauge("all_nan", {"namespace": "shop", "pod": "web-0"}, float("nan"))
    for name, value in (("bad_nan", float("nan")), ("bad_pos_inf", float("inf")),
                        ("bad_neg_inf", float("-inf")), ("bad_negative", -3.0)):
        exporter.set_gauge(name, {"namespace": "shop", "pod": "web-0"}, value)
    exporter.set_gauge("several", {"shard": "1"}, 1.0)
    exporter.set_gauge("several", {"shard": "2"}, 2.0)
    exporter.set_gauge("no_pod_label", {"namespace": "shop"}, 1.0)
    exporter.set_many("exploding", [{"i": str(i)} for i in range(EXPLOSION)], 1.0)


@pytest.fixture(scope="session")
def exporter() -> Iterator[MetricsExporter]:
    with MetricsExporter() as running:
        seed(running)
        yield running


@pytest.fixture(scope="session")
def prometheus(exporter: MetricsExporter) -> Iterator[PrometheusProcess]:
    """Prometheus with every seeded series scraped and CPU rates settled over the window."""
    with start_prometheus(scrape_targets=[exporter.target]) as prom:
        prom.wait_for(f"count(exploding) == {EXPLOSION}")
        settled = f'rate(container_cpu_usage_seconds_total{{pod="web-1",container="app"}}[{CPU_WINDOW:g}s])'
        prom.wait_for(settled, lambda r: bool(r) and abs(float(r[0]["value"][1]) - 0.4) < 0.01)
        time.sleep(1.5)  # tests evaluate up to a second in the past: let that be settled too
        yield prom
