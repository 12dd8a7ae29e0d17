"""Builders for the adapter's inputs: servers, query settings, targets and metric specs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autoscaler.adapters.prometheus import TargetRequest
from autoscaler.algorithm import (
    Container,
    MetricSourceType,
    MetricSpec,
    MetricTarget,
    MetricTargetType,
    Milli,
    Pod,
)
from autoscaler.config import MetricQuery, PrometheusServer


def prom_server(*, url: str, name: str = "default", timeout: float = 5.0,
                **settings: Any) -> PrometheusServer:
    """The config's server object; tests use a shorter timeout than the default 10 s."""
    return PrometheusServer(name=name, url=url, timeout=timeout, **settings)


def metric_query(query: str | None = None, **settings: Any) -> MetricQuery:
    return MetricQuery(query=query, **settings)


def spec(
    kind: MetricSourceType, name: str, *, container: str | None = None,
    target: MetricTargetType = MetricTargetType.AVERAGE_VALUE,
) -> MetricSpec:
    goal = (MetricTarget(type=target, average_utilization=50)
            if target is MetricTargetType.UTILIZATION
            else MetricTarget(type=target, average_value=Milli(1000), value=Milli(1000)))
    return MetricSpec(type=kind, name=name, target=goal, container=container)


def pods(*names: str, cpu_request: int | None = None) -> tuple[Pod, ...]:
    requests = {"cpu": cpu_request} if cpu_request is not None else {}
    return tuple(
        Pod(name=n, containers=(Container(name="app", requests=requests),)) for n in names)


def target(
    key: str, *, namespace: str, pod_names: Sequence[str],
    metrics: Sequence[tuple[MetricSpec, MetricQuery]], server: str = "default",
) -> TargetRequest:
    return TargetRequest(
        key=key, namespace=namespace, name=key.rsplit("/", 1)[-1], kind="Deployment",
        server=server, pods=pods(*pod_names),
        metrics=tuple(m for m, _ in metrics), queries=tuple(q for _, q in metrics),
    )
