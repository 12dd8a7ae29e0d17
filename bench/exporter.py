"""A synthetic exporter for the benchmark: per-pod series for N targets x P pods, cheap to scrape.

Per pod it serves what a cluster's Prometheus holds for it:

- ``app_requests_per_second{namespace, pod}``: the application's request rate (a gauge);
- ``container_cpu_usage_seconds_total{namespace, pod, container, image}``: cAdvisor's cpu
  counter, growing at ``CPU_CORES`` per second, so ``rate()`` gives half the 200m request;
- ``container_memory_working_set_bytes{namespace, pod, container, image}``: cAdvisor's gauge;
- ``kube_pod_container_resource_requests{namespace, pod, container, resource, unit}``:
  kube-state-metrics' requests (the daemon reads requests from the pod specs by default; the
  series is there so Prometheus holds what a real one would).

The values are chosen so every target sits exactly at its targets (50 % cpu utilization,
``RPS_PER_POD`` per pod against an average value of the same): a pass decides and never
scales. The text is rendered once; only the counter's value changes per scrape. A tests/sim
``MetricsExporter`` would re-render 200,000 series per scrape in Python, which at 10,000
targets costs more CPU than the daemon; this one runs in the benchmark's own process, never
in the daemon's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from http.server import ThreadingHTTPServer

from tests.sim.exporter_process import serve_metrics

CPU_CORES = 0.1
RPS_PER_POD = 10.0
MEMORY_BYTES = 64 * 1024 * 1024
CONTAINER, IMAGE = "app", "registry.example/app:1.0"


SERIES = ("cpu", "rps", "memory", "requests")
"""The series an exporter can serve per pod (``SyntheticExporter(series=...)``)."""


def _render_static(pods: Sequence[tuple[str, str]], series: Sequence[str]) -> bytes:
    lines = []
    for namespace, pod in pods:
        base = f'namespace="{namespace}",pod="{pod}"'
        if "rps" in series:
            lines.append(f"app_requests_per_second{{{base}}} {RPS_PER_POD}")
        if "memory" in series:
            lines.append(f'container_memory_working_set_bytes{{{base},container="{CONTAINER}",'
                         f'image="{IMAGE}"}} {MEMORY_BYTES}')
        if "requests" in series:
            lines.append(f'kube_pod_container_resource_requests{{{base},'
                         f'container="{CONTAINER}",resource="cpu",unit="core"}} 0.2')
    return ("\n".join(lines) + "\n").encode() if lines else b""


class SyntheticExporter:
    """Serves ``/metrics`` on a free loopback port from a thread; a context manager."""

    def __init__(self, pods: Sequence[tuple[str, str]], *,
                 series: Sequence[str] = SERIES) -> None:
        """``series``: which of ``SERIES`` to serve (a Prometheus holding 250,000 pods'
        series it is never asked for only spends the machine's memory and CPU)."""
        self._static = _render_static(pods, series)
        self._counter_prefixes = [
            f'container_cpu_usage_seconds_total{{namespace="{ns}",pod="{pod}",'
            f'container="{CONTAINER}",image="{IMAGE}"}} ' for ns, pod in pods
        ] if "cpu" in series else []
        self._started = time.time()
        self.series = len(series) * len(pods)
        self._server: ThreadingHTTPServer | None = None

    @property
    def target(self) -> str:
        assert self._server is not None, "use SyntheticExporter as a context manager"
        return f"127.0.0.1:{self._server.server_address[1]}"

    def render(self) -> bytes:
        value = f"{CPU_CORES * (time.time() - self._started) + 1000.0:.3f}\n"
        counters = value.join(self._counter_prefixes) + value if self._counter_prefixes else ""
        return self._static + counters.encode()

    def __enter__(self) -> SyntheticExporter:
        self._server = serve_metrics(self.render)
        return self

    def __exit__(self, *exc: object) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
