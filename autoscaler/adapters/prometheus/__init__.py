"""Metrics from Prometheus (or a Thanos/Mimir query endpoint) for every HPA metric type.

``PrometheusSource.fetch`` is the whole public surface the daemon uses: give it one
``TargetRequest`` per target and a deadline, get the runtime's ``FetchedMetrics`` (this
adapter implements the runtime's ``MetricsPort``; ``history`` its ``HistoryPort``). Modules:
``client`` (thread pool, retries, auth), ``transport`` (one query's HTTP, bounded in bytes,
series, time and redirects; ``deadline``: its sockets shut at its timeout), ``queries``
(PromQL text), ``batch`` (dedup and split),
``parse`` (shapes and values), ``kube_requests`` (requests from kube-state-metrics),
``source`` (the pass), ``metric_history`` (a metric's past totals, for the forecaster).
"""

from autoscaler.adapters.prometheus.client import RetryPolicy
from autoscaler.adapters.prometheus.inputs import QuerySettings, ServerSettings, TargetRequest
from autoscaler.adapters.prometheus.metric_history import HistoryRequest
from autoscaler.adapters.prometheus.source import PrometheusSource

__all__ = [
    "HistoryRequest", "PrometheusSource", "QuerySettings", "RetryPolicy", "ServerSettings",
    "TargetRequest",
]
