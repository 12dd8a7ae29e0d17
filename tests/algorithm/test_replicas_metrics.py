"""Pods, Object and External metrics, ported from upstream's replica_calculator_test.go."""

from __future__ import annotations

import pytest

from autoscaler.algorithm import Milli
from autoscaler.algorithm.replicas import (
    average_value_proposal,
    per_pod_value_proposal,
    saturating_sum,
    value_proposal,
)
from autoscaler.algorithm.stage_values import Tolerances
from tests.algorithm.builders import (
    COOL,
    DEFAULT_TOLERANCES,
    FALSE,
    HOT,
    MAX_INT32,
    MAX_INT64,
    NOW,
    RUNNING,
    TESTING,
    TRUE,
    Scenario,
    pod_samples,
    tolerances,
)

ONE_PCT_UP = tolerances(0.1, 0.01)


# upstream: TestReplicaCalcPodMetric
@pytest.mark.parametrize(
    ("scenario", "levels", "target", "tol", "expected"),
    [
        pytest.param(Scenario(current=3), (20000, 10000, 30000), 15000, DEFAULT_TOLERANCES,
                     (4, 20000), id="scale-up"),
        pytest.param(Scenario(current=3, readiness=(TRUE, TRUE, FALSE), starts=(COOL, COOL, HOT)),
                     (50000, 10000, 30000), 15000, DEFAULT_TOLERANCES, (6, 30000),
                     id="scale-up-unready-hot-cpu-pod-counts"),
        pytest.param(Scenario(current=3, readiness=(FALSE, TRUE, FALSE), starts=(HOT, COOL, HOT)),
                     (50000, 15000, 30000), 15000, DEFAULT_TOLERANCES, (7, 31666),
                     id="scale-up-unready-hot-cpu-pods-avoid-scale-down"),
        pytest.param(Scenario(current=5), (12000,) * 5, 20000, DEFAULT_TOLERANCES, (3, 12000),
                     id="scale-down"),
        pytest.param(Scenario(current=3), (20000, 21000, 21000), 20000, DEFAULT_TOLERANCES,
                     (3, 20666), id="within-default-tolerance"),
        pytest.param(Scenario(current=3), (20000, 21000, 21000), 20000, ONE_PCT_UP, (4, 20666),
                     id="outside-1pct-tolerance"),
        pytest.param(Scenario(current=5), (20000, 19000, 21000), 20000, DEFAULT_TOLERANCES,
                     (5, 20000), id="no-change-missing-metrics"),
        pytest.param(Scenario(current=2, phases=(RUNNING,) * 3), (10000, 10000), 17000,
                     DEFAULT_TOLERANCES, (2, 10000), id="rolling-update-max-surge"),
        # older upstream: TestReplicaCalcScaleUpCMExternal (a pods metric despite its name)
        pytest.param(Scenario(current=1), (8600,), 4400, DEFAULT_TOLERANCES, (2, 8600),
                     id="scale-up-single-pod"),
    ],
)
def test_pod_metric(
    scenario: Scenario, levels: tuple[int, ...], target: int, tol: Tolerances,
    expected: tuple[int, int],
) -> None:
    """Pods AverageValue targets (calcPlainMetricReplicas) match upstream's GetMetricReplicas."""
    proposal = average_value_proposal(
        samples=pod_samples(*levels), pods=scenario.pods(), resource=None,
        target_average=Milli(target), current_replicas=scenario.current, tolerances=tol, now=NOW,
        settings=TESTING,
    )
    assert (proposal.replicas, proposal.current.average_value) == expected


# upstream: TestReplicaCalcObjectMetric and TestReplicaCalcExternalMetric (Value targets)
@pytest.mark.parametrize(
    ("scenario", "values", "target", "tol", "expected"),
    [
        pytest.param(Scenario(current=3), (20000,), 15000, DEFAULT_TOLERANCES, (4, 20000),
                     id="object-scale-up"),
        pytest.param(Scenario(current=3), (MAX_INT64,), 1, DEFAULT_TOLERANCES,
                     (MAX_INT32, MAX_INT64), id="object-saturates-at-max-int32"),
        pytest.param(Scenario(current=3, readiness=(FALSE, TRUE, FALSE)), (50000,), 10000,
                     DEFAULT_TOLERANCES, (5, 50000), id="object-scale-up-ignores-unready"),
        pytest.param(Scenario(current=5), (12000,), 20000, DEFAULT_TOLERANCES, (3, 12000),
                     id="object-scale-down"),
        pytest.param(Scenario(current=3), (20666,), 20000, DEFAULT_TOLERANCES, (3, 20666),
                     id="object-within-default-tolerance"),
        pytest.param(Scenario(current=3), (20666,), 20000, ONE_PCT_UP, (4, 20666),
                     id="object-outside-1pct-tolerance"),
        pytest.param(Scenario(current=3, readiness=(FALSE, TRUE, FALSE)), (8600,), 4400,
                     DEFAULT_TOLERANCES, (2, 8600), id="external-ignores-unready"),
        pytest.param(Scenario(current=5), (8600,), 14334, DEFAULT_TOLERANCES, (3, 8600),
                     id="external-scale-down"),
        pytest.param(Scenario(current=3), (8600,), 8888, DEFAULT_TOLERANCES, (3, 8600),
                     id="external-within-default-tolerance"),
        pytest.param(Scenario(current=3), (8900,), 8800, ONE_PCT_UP, (4, 8900),
                     id="external-outside-1pct-tolerance"),
        pytest.param(Scenario(current=3), (MAX_INT64 // 2 + 1, MAX_INT64 // 2 + 1), MAX_INT64,
                     DEFAULT_TOLERANCES, (3, MAX_INT64), id="external-usage-overflow-capped"),
    ],
)
def test_value_metric(
    scenario: Scenario, values: tuple[int, ...], target: int, tol: Tolerances,
    expected: tuple[int, int],
) -> None:
    """Value targets scale by Running+Ready pods; external series are summed, saturating."""
    usage = saturating_sum(values)
    proposal = value_proposal(
        usage=usage, target_value=Milli(target), current_replicas=scenario.current,
        pods=scenario.pods(), tolerances=tol,
    )
    assert (proposal.replicas, proposal.current.value) == expected


# upstream: TestReplicaCalcObjectPerPodMetric and TestReplicaCalcExternalPerPodMetric
@pytest.mark.parametrize(
    ("status_replicas", "values", "target", "tol", "expected"),
    [
        pytest.param(3, (20000,), 5000, DEFAULT_TOLERANCES, (4, 6667), id="object-scale-up"),
        pytest.param(5, (6000,), 2000, DEFAULT_TOLERANCES, (3, 1200), id="object-scale-down"),
        pytest.param(4, (20166,), 5000, DEFAULT_TOLERANCES, (4, 5042),
                     id="object-within-default-tolerance"),
        pytest.param(4, (20208,), 5000, ONE_PCT_UP, (5, 5052), id="object-outside-1pct-tolerance"),
        pytest.param(1, (MAX_INT64,), 1, DEFAULT_TOLERANCES, (MAX_INT32, MAX_INT64),
                     id="external-replica-overflow-saturates"),
        pytest.param(1, (MAX_INT64,), MAX_INT64, DEFAULT_TOLERANCES, (1, MAX_INT64),
                     id="external-usage-overflow-huge-target-holds"),
        pytest.param(3, (8600,), 2150, DEFAULT_TOLERANCES, (4, 2867), id="external-scale-up"),
        pytest.param(5, (8600,), 2867, DEFAULT_TOLERANCES, (3, 1720), id="external-scale-down"),
        pytest.param(3, (8600,), 2900, DEFAULT_TOLERANCES, (3, 2867),
                     id="external-within-default-tolerance"),
        pytest.param(3, (8600,), 2800, ONE_PCT_UP, (4, 2867), id="external-outside-1pct-tolerance"),
    ],
)
def test_per_pod_value_metric(
    status_replicas: int, values: tuple[int, ...], target: int, tol: Tolerances,
    expected: tuple[int, int],
) -> None:
    """AverageValue targets of Object/External metrics divide by status.replicas."""
    proposal = per_pod_value_proposal(
        usage=saturating_sum(values), target_average=Milli(target), status_replicas=status_replicas,
        tolerances=tol,
    )
    assert (proposal.replicas, proposal.current.average_value) == expected


# upstream: TestScaleUpFromZeroCMObject, TestScaleUpFromZeroIgnoresToleranceCMObject
@pytest.mark.parametrize(
    ("usage", "target", "expected"),
    [
        pytest.param(20000, 15000, 2, id="from-zero"),
        pytest.param(1000, 1000, 1, id="from-zero-ignores-tolerance"),
        pytest.param(0, 1000, 0, id="ours-stays-at-zero"),
    ],
)
def test_value_metric_from_zero(usage: int, target: int, expected: int) -> None:
    """At 0 replicas a Value target proposes ceil(ratio), with no tolerance and no pods."""
    proposal = value_proposal(
        usage=usage, target_value=Milli(target), current_replicas=0, pods=(),
        tolerances=DEFAULT_TOLERANCES,
    )
    assert proposal.replicas == expected
