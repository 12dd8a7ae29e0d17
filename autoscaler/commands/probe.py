"""``check --prometheus``: run every query of a config once and judge what comes back.

Queries go through the daemon's own Prometheus client (credentials, TLS, error
classification) with a single attempt. User templates are rendered for the target with
every pod of its namespace (``${pod_regex}`` = ``.*``, ``${pod_selector}`` =
``namespace="<ns>"``), since ``check`` does not ask Kubernetes which pods the target has.
A query fails the check when Prometheus rejects it, when it returns no series, or when the
answer has the wrong shape for its metric type: a per-pod query (Resource override, Pods)
needs one series per pod with a ``pod`` label, an Object query exactly one series, an
External query at least one; every value must be a finite, non-negative number.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from autoscaler.adapters.prometheus.client import PrometheusClient, RetryPolicy
from autoscaler.adapters.prometheus.parse import Sample, all_values, parse_result, single_value
from autoscaler.adapters.prometheus.parse import to_milli as value_milli
from autoscaler.adapters.prometheus.queries import promql_string, requests_query, usage_query
from autoscaler.algorithm import MetricSourceType, MetricSpec
from autoscaler.config.model import Config, MetricQuery, TargetConfig
from autoscaler.config.query import render_query
from autoscaler.errors import AutoscalerError, BadDataError


class Shape(StrEnum):
    PER_POD = "one series per pod"
    PER_CONTAINER = "one series per pod and container"
    SINGLE = "exactly one series"
    ANY = "at least one series"


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """One query to run for one metric of one target."""

    target: str
    metric: str
    server: str
    promql: str
    shape: Shape
    container: str | None = None
    """For a per-container answer: the container whose series must be present."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeResult:
    probe: Probe
    series: int
    problem: str | None
    """``None`` when the query answered with usable data of the right shape."""


def probes_for(target: TargetConfig) -> list[Probe]:
    """Every query the daemon would run for ``target``, rendered for all its namespace's pods."""
    found = []
    for index, (spec, query) in enumerate(zip(target.spec.metrics, target.metric_queries,
                                              strict=True)):
        label = f"metrics[{index}] {spec.type} {spec.name}"
        for promql, shape in _queries(target, spec, query):
            container = spec.container if shape is Shape.PER_CONTAINER else None
            found.append(Probe(target=target.key, metric=label, server=target.prometheus,
                               promql=promql, shape=shape, container=container))
    return found


def _queries(
    target: TargetConfig, spec: MetricSpec, query: MetricQuery
) -> list[tuple[str, Shape]]:
    resource = spec.type in {MetricSourceType.RESOURCE, MetricSourceType.CONTAINER_RESOURCE}
    if query.query is not None:
        shape = {MetricSourceType.OBJECT: Shape.SINGLE, MetricSourceType.EXTERNAL: Shape.ANY}
        rendered = render_query(
            query.query, namespace=target.namespace, name=target.scale_target_ref.name,
            kind=target.scale_target_ref.kind, pod_regex=".*",
            pod_selector=f'namespace="{promql_string(target.namespace)}"',
            container=spec.container or "",
        )
        found = [(rendered, shape.get(spec.type, Shape.PER_POD))]
    else:
        per_container = spec.type is MetricSourceType.CONTAINER_RESOURCE
        usage = usage_query(spec.name, namespaces=[target.namespace],
                            per_container=per_container, window=query.window)
        found = [(usage, Shape.PER_CONTAINER if per_container else Shape.PER_POD)]
    if resource and query.requests_source == "kube-state-metrics":
        found.append((requests_query(spec.name, namespaces=[target.namespace]),
                      Shape.PER_CONTAINER))
    return found


def judge(samples: Sequence[Sample], shape: Shape, container: str | None = None) -> str | None:
    """What is wrong with an answer for a query of ``shape``, or ``None``."""
    if container is not None and samples:
        samples = [s for s in samples if s.container == container]
        if not samples:
            return f"no series for container {container!r}"
    try:
        if shape is Shape.SINGLE:
            single_value(samples)
        elif shape is Shape.ANY:
            all_values(samples)
        else:
            _per_pod(samples, per_container=shape is Shape.PER_CONTAINER)
    except BadDataError as error:
        return str(error)
    return None


def _per_pod(samples: Sequence[Sample], *, per_container: bool) -> None:
    if not samples:
        raise BadDataError("empty result: the query matched no series")
    seen: set[tuple[str, str]] = set()
    for sample in samples:
        pod = sample.pod
        if pod is None:
            raise BadDataError("a series has no 'pod' label; aggregate with sum by (pod)")
        key = (pod, (sample.container or "") if per_container else "")
        if key in seen:
            raise BadDataError(f"pod {pod} has several series; aggregate with sum by (pod)")
        seen.add(key)
        try:
            value_milli(sample.raw)
        except BadDataError as error:
            raise BadDataError(f"pod {pod}: {error}") from None


def run_probes(config: Config, *, timeout: float | None = None) -> list[ProbeResult]:
    """Run every target's queries once, sequentially; one result per query."""
    probes = [probe for target in config.targets for probe in probes_for(target)]
    return asyncio.run(_run_all(config, probes, timeout))


async def _run_all(
    config: Config, probes: Sequence[Probe], timeout: float | None
) -> list[ProbeResult]:
    client = PrometheusClient(config.prometheus_servers, max_workers=1,
                              retry=RetryPolicy(attempts=1))
    try:
        return [await _run(client, config, probe, timeout) for probe in probes]
    finally:
        client.close()


async def _run(
    client: PrometheusClient, config: Config, probe: Probe, timeout: float | None
) -> ProbeResult:
    limit = timeout or config.prometheus_servers[probe.server].timeout
    try:
        raw = await client.query(probe.server, probe.promql, at=time.time(),
                                 deadline=time.monotonic() + limit)
        samples = parse_result(raw)
    except AutoscalerError as error:
        return ProbeResult(probe=probe, series=0, problem=f"{type(error).__name__}: {error}")
    problem = judge(samples, probe.shape, probe.container)
    return ProbeResult(probe=probe, series=len(samples), problem=problem)
