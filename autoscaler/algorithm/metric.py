"""One metric spec and its values to a proposal or an error (``computeReplicasForMetric``).

The replica count each type starts from follows upstream: ``spec.replicas`` everywhere except
Object and External AverageValue targets, which divide by ``status.replicas``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from autoscaler.algorithm.model import (
    AlgorithmSettings,
    ExternalMetricValues,
    MetricSourceType,
    MetricSpec,
    MetricTargetType,
    MetricUnavailable,
    MetricValues,
    Milli,
    ObjectMetricValue,
    Pod,
    PodMetricValues,
    ScaleState,
    Seconds,
    kept_values,
)
from autoscaler.algorithm.pods import MetricError
from autoscaler.algorithm.replicas import (
    average_value_proposal,
    per_pod_value_proposal,
    saturating_sum,
    utilization_proposal,
    value_proposal,
)
from autoscaler.algorithm.stage_values import MetricOutcome, MetricProposal, Tolerances

_PER_POD_SOURCES = frozenset(
    {MetricSourceType.RESOURCE, MetricSourceType.CONTAINER_RESOURCE, MetricSourceType.PODS}
)


@functools.lru_cache(maxsize=1024)  # called per metric per decision; specs are few
def describe(spec: MetricSpec) -> str:
    """The metric's name as upstream's messages and rescale reasons spell it."""
    # Upstream picks the utilization path only when no averageValue is set.
    utilization = spec.target.average_value is None
    match spec.type:
        case MetricSourceType.RESOURCE:
            suffix = " utilization (percentage of request)" if utilization else ""
            return f"{spec.name} resource{suffix}"
        case MetricSourceType.CONTAINER_RESOURCE:
            suffix = " utilization (percentage of request)" if utilization else ""
            return f"{spec.name} container resource{suffix}"
        case MetricSourceType.PODS:
            return f"pods metric {spec.name}"
        case MetricSourceType.OBJECT:
            return f"{spec.described_object_kind or 'object'} metric {spec.name}"
        case _:
            return f"external metric {spec.name}"


def evaluate_metric(
    spec: MetricSpec,
    values: MetricValues,
    *,
    scale: ScaleState,
    pods: Sequence[Pod],
    tolerances: Tolerances,
    now: Seconds,
    settings: AlgorithmSettings,
) -> MetricOutcome:
    description = describe(spec)
    try:
        proposal = _propose(
            spec, values, scale=scale, pods=pods, tolerances=tolerances, now=now,
            settings=settings,
        )
    except MetricError as error:
        return MetricOutcome(spec=spec, description=description, error=str(error),
                             values=kept_values(values))
    return MetricOutcome(spec=spec, description=description, proposal=proposal,
                         values=kept_values(values))


def _require(value: Milli | int | None, what: str) -> int:
    if value is None:
        raise MetricError(f"invalid metric source: no {what} target was set")
    if value <= 0:
        # API validation rejects these; dividing by them would give Go +Inf and Python a crash.
        raise MetricError(f"invalid metric source: the {what} target must be positive, got {value}")
    return value


_NEITHER = "neither a value target nor an average value target was set"


def _propose(
    spec: MetricSpec,
    values: MetricValues,
    *,
    scale: ScaleState,
    pods: Sequence[Pod],
    tolerances: Tolerances,
    now: Seconds,
    settings: AlgorithmSettings,
) -> MetricProposal:
    """Which target field is read follows upstream's ``computeStatusFor*Metric``: the fields
    that are set decide for Resource and External metrics, type and field for Object."""
    if isinstance(values, MetricUnavailable):
        raise MetricError(values.reason)
    target = spec.target
    if spec.type in _PER_POD_SOURCES:
        if not isinstance(values, PodMetricValues):
            raise MetricError(f"{spec.type} metric needs per-pod samples")
        resource = None if spec.type is MetricSourceType.PODS else spec.name
        if resource is not None and target.average_value is None:
            if target.average_utilization is None:
                raise MetricError(
                    "invalid resource metric source: neither an average utilization target "
                    "nor an average value target was set"
                )
            return utilization_proposal(
                samples=values.samples, pods=pods, resource=resource,
                container=spec.container,
                target_utilization=_require(target.average_utilization, "averageUtilization"),
                current_replicas=scale.spec_replicas, tolerances=tolerances, now=now,
                settings=settings,
            )
        return average_value_proposal(
            samples=values.samples, pods=pods, resource=resource,
            target_average=Milli(_require(target.average_value, "averageValue")),
            current_replicas=scale.spec_replicas, tolerances=tolerances, now=now,
            settings=settings,
        )
    usage = _single_value(spec, values)
    if spec.type is MetricSourceType.OBJECT:
        per_pod = target.type is MetricTargetType.AVERAGE_VALUE and target.average_value is not None
        by_value = target.type is MetricTargetType.VALUE and target.value is not None
        if not (per_pod or by_value):
            raise MetricError(f"invalid object metric source: {_NEITHER}")
    else:
        # External: an averageValue wins whatever the declared type (upstream checks it first).
        per_pod = target.average_value is not None
        if not per_pod and target.value is None:
            raise MetricError(f"invalid external metric source: {_NEITHER}")
    if per_pod:
        return per_pod_value_proposal(
            usage=usage, target_average=Milli(_require(target.average_value, "averageValue")),
            status_replicas=scale.status_replicas, tolerances=tolerances,
        )
    return value_proposal(
        usage=usage, target_value=Milli(_require(target.value, "value")),
        current_replicas=scale.spec_replicas, pods=pods, tolerances=tolerances,
    )


def _single_value(spec: MetricSpec, values: MetricValues) -> int:
    """The Object metric's value, or the saturating sum of every External series."""
    if spec.type is MetricSourceType.OBJECT and isinstance(values, ObjectMetricValue):
        return values.value
    if spec.type is MetricSourceType.EXTERNAL and isinstance(values, ExternalMetricValues):
        if not values.values:
            raise MetricError("no metrics returned from external metrics API")
        return saturating_sum(values.values)
    raise MetricError(f"{spec.type} metric got values of the wrong kind")
