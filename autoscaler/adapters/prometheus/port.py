"""The runtime's ``MetricsPort`` over the batched Prometheus source.

A target's config becomes the ``TargetRequest`` the source reads (names, server, pods,
metrics and queries); the source's answer is the port's own ``FetchedMetrics``.
"""

from __future__ import annotations

from collections.abc import Sequence

from autoscaler.adapters.prometheus.inputs import TargetRequest
from autoscaler.adapters.prometheus.source import PrometheusSource
from autoscaler.runtime.ports import FetchedMetrics, MetricsWanted


class PrometheusMetrics:
    """The runtime's ``MetricsPort`` over the batched Prometheus source."""

    def __init__(self, source: PrometheusSource) -> None:
        self.source = source

    async def fetch_metrics(
        self, wanted: Sequence[MetricsWanted], *, deadline: float
    ) -> FetchedMetrics:
        requests = [
            TargetRequest(
                key=w.target.key, namespace=w.target.namespace,
                name=w.target.scale_target_ref.name, kind=w.target.scale_target_ref.kind,
                server=w.target.prometheus, pods=w.pods, metrics=w.target.spec.metrics,
                queries=w.target.metric_queries,
            )
            for w in wanted
        ]
        return await self.source.fetch(requests, deadline=deadline)
