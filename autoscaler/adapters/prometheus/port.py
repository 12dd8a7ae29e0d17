"""The runtime's ``MetricsPort`` and ``HistoryPort`` over the Prometheus source.

A target's config becomes the ``TargetRequest`` the source reads (names, server, pods,
metrics and queries); the source's answer is the port's own ``FetchedMetrics``. A predicted
metric's past becomes a ``HistoryRequest``, read by one range query.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from autoscaler.adapters.prometheus.inputs import TargetRequest
from autoscaler.adapters.prometheus.metric_history import HistoryRequest
from autoscaler.adapters.prometheus.source import PrometheusSource
from autoscaler.runtime.ports import FetchedMetrics, MetricsWanted

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig

HISTORY_DEADLINE = 30.0
"""Seconds one metric's history query may take, retries included."""


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


class PrometheusHistory:
    """The runtime's ``HistoryPort`` over the Prometheus source's range queries."""

    def __init__(self, source: PrometheusSource) -> None:
        self.source = source

    async def metric_history(
        self, target: TargetConfig, index: int, *, start: float, end: float, step: float,
    ) -> Sequence[tuple[float, float]]:
        query, ref = target.metric_queries[index], target.scale_target_ref
        request = HistoryRequest(
            server=target.prometheus, namespace=target.namespace, name=ref.name, kind=ref.kind,
            metric=target.spec.metrics[index], query=query.query,
            history_query=query.history_query, window=query.window)
        return await self.source.history(request, start=start, end=end, step=step,
                                         deadline=time.monotonic() + HISTORY_DEADLINE)
