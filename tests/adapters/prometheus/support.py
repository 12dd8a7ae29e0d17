"""Builders for the adapter's inputs: servers, query settings, targets and metric specs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Server:
    """The fields of ``autoscaler.config.PrometheusServer`` the adapter reads."""

    name: str = "default"
    url: str
    bearer_token_file: Path | None = None
    basic_auth_username: str | None = None
    basic_auth_password_file: Path | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    ca_file: Path | None = None
    insecure_skip_verify: bool = False
    timeout: float = 5.0
    query_params: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Query:
    """The fields of ``autoscaler.config.MetricQuery`` the adapter reads."""

    query: str | None = None
    requests_source: Literal["pods", "kube-state-metrics"] = "pods"
    window: float = 60.0


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
    metrics: Sequence[tuple[MetricSpec, Query]], server: str = "default",
) -> TargetRequest:
    return TargetRequest(
        key=key, namespace=namespace, name=key.rsplit("/", 1)[-1], kind="Deployment",
        server=server, pods=pods(*pod_names),
        metrics=tuple(m for m, _ in metrics), queries=tuple(q for _, q in metrics),
    )
