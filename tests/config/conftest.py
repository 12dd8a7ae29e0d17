"""A real Prometheus for ``check --prometheus``, scraping a test exporter with known series.

Built on the shared harness in ``tests/sim/prometheus.py`` (Debian's ``/usr/bin/prometheus``
on a free loopback port, a temp data dir, killed at the end of the session).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sim.prometheus import MetricsExporter, PrometheusProcess, start_prometheus

PODS = ("web-0", "web-1")


def seed(exporter: MetricsExporter) -> None:
    for pod in PODS:
        labels = {"namespace": "shop", "pod": pod, "container": "app", "image": "img"}
        exporter.set_counter("container_cpu_usage_seconds_total", labels, per_second=0.25)
        exporter.set_gauge("container_memory_working_set_bytes", labels, 2**27)
        exporter.set_gauge("kube_pod_container_resource_requests", {
            "namespace": "shop", "pod": pod, "container": "app", "resource": "memory"}, 2**28)
        exporter.set_gauge("http_requests_per_second", {"namespace": "shop", "pod": pod}, 7.0)
    exporter.set_gauge("lag_seconds", {"namespace": "shop", "pod": "web-0"}, float("nan"))
    exporter.set_gauge("ingress_requests_per_second", {"namespace": "shop", "ingress": "main"},
                       40.0)
    for queue in ("a", "b"):
        exporter.set_gauge("queue_depth", {"queue": queue}, 5.0)


@pytest.fixture(scope="session")
def prometheus() -> Iterator[PrometheusProcess]:
    """Prometheus with every seeded series scraped and a cpu rate() available."""
    with MetricsExporter() as exporter:
        seed(exporter)
        with start_prometheus(scrape_targets=[exporter.target]) as prom:
            prom.wait_for("rate(container_cpu_usage_seconds_total[60s])")
            prom.wait_for("queue_depth")
            yield prom
