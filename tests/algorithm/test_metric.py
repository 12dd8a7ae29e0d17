"""One metric spec to a proposal: which target field is read, names and failure reasons.

The field choice follows upstream horizontal.go ``computeStatusForResourceMetricGeneric``,
``computeStatusForObjectMetric`` and ``computeStatusForExternalMetric``.
"""

from __future__ import annotations

import pytest

from autoscaler.algorithm import (
    ExternalMetricValues,
    MetricCurrent,
    MetricOutcome,
    MetricProposal,
    MetricSourceType,
    MetricSpec,
    MetricTarget,
    MetricTargetType,
    MetricUnavailable,
    MetricValues,
    Milli,
    ObjectMetricValue,
    PodMetricValues,
    Reason,
    ScaleState,
)
from autoscaler.algorithm.metric import describe, evaluate_metric
from tests.algorithm.builders import (
    DEFAULT_TOLERANCES,
    NOW,
    TESTING,
    Scenario,
    cpu_requests,
    cpu_spec,
    external_spec,
    object_spec,
    pod_levels,
    pods_spec,
)

U, V, AV = MetricTargetType.UTILIZATION, MetricTargetType.VALUE, MetricTargetType.AVERAGE_VALUE
SCENARIO = Scenario(current=3, requests=cpu_requests(3), levels=pod_levels(300, 500, 700))


def metric(kind: MetricSourceType, type_: MetricTargetType, **fields: int) -> MetricSpec:
    target = MetricTarget(type=type_, **{k: (Milli(v) if "value" in k else v)  # type: ignore[arg-type]
                                         for k, v in fields.items()})
    return MetricSpec(type=kind, name="cpu" if "Resource" in kind else "qps", target=target,
                      described_object_kind="Deployment")


def evaluate(spec: MetricSpec, values: MetricValues, status_replicas: int = 3) -> tuple[int | None, str | None]:
    outcome = evaluate_metric(
        spec, values, scale=ScaleState(spec_replicas=3, status_replicas=status_replicas),
        pods=SCENARIO.pods(), tolerances=DEFAULT_TOLERANCES, now=NOW, settings=TESTING,
    )
    return (outcome.proposal.replicas if outcome.proposal else None), outcome.error


CPU = PodMetricValues(samples=SCENARIO.resource_samples())
RES, OBJ, EXT = MetricSourceType.RESOURCE, MetricSourceType.OBJECT, MetricSourceType.EXTERNAL


@pytest.mark.parametrize(
    ("spec", "values", "expected"),
    [
        # 3 pods at 1000m each of 2000m: 50 % of a 30 % target -> 5; 1000m of a 600m average -> 5
        pytest.param(metric(RES, U, average_utilization=30), CPU, 5, id="resource-utilization"),
        pytest.param(metric(RES, AV, average_value=600), CPU, 5, id="resource-average-value"),
        pytest.param(metric(RES, U, average_value=600), CPU, 5,
                     id="resource-average-value-field-wins-over-type"),
        # 9000 over 3 status replicas at 1000 each -> 9; Value 9000/3000 x 3 ready pods -> 9
        pytest.param(metric(EXT, AV, average_value=1000), ExternalMetricValues(values=(Milli(9000),)),
                     9, id="external-average-value"),
        pytest.param(metric(EXT, V, value=3000), ExternalMetricValues(values=(Milli(9000),)), 9,
                     id="external-value"),
        pytest.param(metric(EXT, V, average_value=1000), ExternalMetricValues(values=(Milli(9000),)),
                     9, id="external-average-value-checked-first"),
        pytest.param(metric(OBJ, V, value=3000), ObjectMetricValue(value=Milli(9000)), 9,
                     id="object-value"),
        pytest.param(metric(OBJ, AV, average_value=1000), ObjectMetricValue(value=Milli(9000)), 9,
                     id="object-average-value"),
    ],
)
def test_target_field_selection(spec: MetricSpec, values: MetricValues, expected: int) -> None:
    """The target fields that are set pick the replica calculator, as upstream's do."""
    assert evaluate(spec, values) == (expected, None)


@pytest.mark.parametrize(
    ("spec", "values", "message"),
    [
        pytest.param(metric(RES, U), CPU, "invalid resource metric source: neither an average "
                     "utilization target nor an average value target was set", id="resource"),
        pytest.param(metric(OBJ, AV, value=3000), ObjectMetricValue(value=Milli(1)),
                     "invalid object metric source: neither a value target nor an average value "
                     "target was set", id="object-type-and-field-disagree"),
        pytest.param(metric(EXT, V), ExternalMetricValues(values=(Milli(1),)),
                     "invalid external metric source: neither a value target nor an average "
                     "value target was set", id="external"),
        pytest.param(metric(EXT, V, value=1), ExternalMetricValues(values=()),
                     "no metrics returned from external metrics API", id="external-empty"),
        pytest.param(metric(OBJ, V, value=1), MetricUnavailable(reason="prometheus down"),
                     "prometheus down", id="unavailable"),
        pytest.param(metric(OBJ, V, value=1), ExternalMetricValues(values=(Milli(1),)),
                     "Object metric got values of the wrong kind", id="wrong-kind"),
    ],
)
def test_invalid_sources(spec: MetricSpec, values: MetricValues, message: str) -> None:
    """An unusable source is an error for that metric, with upstream's wording."""
    assert evaluate(spec, values) == (None, message)


@pytest.mark.parametrize(
    ("spec", "name", "reason"),
    [
        pytest.param(metric(RES, U, average_utilization=1), "cpu resource utilization (percentage "
                     "of request)", Reason.FAILED_GET_RESOURCE_METRIC, id="resource-utilization"),
        pytest.param(metric(RES, AV, average_value=1), "cpu resource",
                     Reason.FAILED_GET_RESOURCE_METRIC, id="resource-raw"),
        pytest.param(metric(MetricSourceType.CONTAINER_RESOURCE, U, average_utilization=1),
                     "cpu container resource utilization (percentage of request)",
                     Reason.FAILED_GET_CONTAINER_RESOURCE_METRIC, id="container-resource"),
        pytest.param(metric(MetricSourceType.PODS, AV, average_value=1), "pods metric qps",
                     Reason.FAILED_GET_PODS_METRIC, id="pods"),
        pytest.param(metric(OBJ, V, value=1), "Deployment metric qps",
                     Reason.FAILED_GET_OBJECT_METRIC, id="object"),
        pytest.param(metric(EXT, V, value=1), "external metric qps",
                     Reason.FAILED_GET_EXTERNAL_METRIC, id="external"),
    ],
)
def test_names_and_failure_reasons(spec: MetricSpec, name: str, reason: Reason) -> None:
    """Metric names and ScalingActive failure reasons are upstream's strings."""
    outcome = evaluate_metric(
        spec, MetricUnavailable(reason="x"), scale=ScaleState(spec_replicas=1, status_replicas=1),
        pods=(), tolerances=DEFAULT_TOLERANCES, now=NOW, settings=TESTING,
    )
    assert (describe(spec), outcome.failure_reason) == (name, reason)


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(metric(RES, U, average_utilization=0), id="utilization-zero"),
        pytest.param(metric(RES, AV, average_value=0), id="average-value-zero"),
        pytest.param(metric(EXT, V, value=-5), id="value-negative"),
    ],
)
def test_non_positive_target_is_an_error_not_a_crash(spec: MetricSpec) -> None:
    """A target of zero or less fails the metric (API validation would reject it upstream)."""
    values: MetricValues = CPU if spec.type is RES else ExternalMetricValues(values=(Milli(1),))
    replicas, error = evaluate(spec, values)
    assert replicas is None
    assert error is not None
    assert "must be positive" in error


@pytest.mark.parametrize(
    ("spec", "current", "expected"),
    [
        (cpu_spec(80), MetricCurrent(average_utilization=95, average_value=Milli(950)),
         (80.0, 95.0)),
        (pods_spec(10_000), MetricCurrent(average_value=Milli(12_500)), (10.0, 12.5)),
        (object_spec(value=500), MetricCurrent(value=Milli(250)), (0.5, 0.25)),
        (external_spec(average=2_000), MetricCurrent(average_value=Milli(3_000)), (2.0, 3.0)),
        (cpu_spec(80), None, (80.0, None)),
    ],
    ids=["utilization", "average-value", "value", "external-average", "no-proposal"],
)
def test_target_and_current_in_the_users_units(
    spec: MetricSpec, current: MetricCurrent | None, expected: tuple[float, float | None],
) -> None:
    """Percent for a utilization target, else base units (milli / 1000), as /metrics and
    simulate show them; no current value without a proposal."""
    proposal = None if current is None else MetricProposal(replicas=1, current=current,
                                                           ratio=1.0)
    outcome = MetricOutcome(spec=spec, description="", proposal=proposal)
    assert (outcome.target_value, outcome.current_value) == expected
