"""Utilization targets (``GetResourceReplicas``), ported from upstream's replica_calculator_test.go.

Every row is upstream's fixture and expectation; only the plumbing is ours.
"""

from __future__ import annotations

import math

import pytest

from autoscaler.algorithm.pods import MetricError
from autoscaler.algorithm.replicas import utilization_proposal
from autoscaler.algorithm.stage_values import Tolerances
from tests.algorithm.builders import (
    COOL,
    DEFAULT_TOLERANCES,
    FAILED,
    FALSE,
    HOT,
    NOW,
    PENDING,
    RUNNING,
    TESTING,
    TRUE,
    Scenario,
    cpu_requests,
    pod_levels,
    tolerances,
)


def run(scenario: Scenario, target: int, tol: Tolerances = DEFAULT_TOLERANCES) -> tuple[int, int, int]:
    proposal = utilization_proposal(
        samples=scenario.resource_samples(), pods=scenario.pods(), resource="cpu",
        container=scenario.container, target_utilization=target,
        current_replicas=scenario.current, tolerances=tol, now=NOW, settings=TESTING,
    )
    utilization = proposal.current.average_utilization
    raw = proposal.current.average_value
    assert utilization is not None
    assert raw is not None
    return proposal.replicas, utilization, raw


C2 = 2  # numContainersPerPod: whole-pod raw values are twice the per-container level
SEVEN_WITH_TWO_FAILED = (RUNNING,) * 5 + (FAILED, FAILED)
SEVEN_READINESS = (TRUE,) * 5 + (FALSE, FALSE)

# upstream: TestReplicaCalcResourceScale
RESOURCE_SCALE = [
    pytest.param(Scenario(current=3, requests=cpu_requests(3), levels=pod_levels(300, 500, 700)),
                 30, (5, 50, C2 * 500), id="scale-up"),
    pytest.param(Scenario(current=3, container="container2", requests=cpu_requests(3),
                          levels=((1000, 300), (1000, 500), (1000, 700))),
                 30, (5, 50, 500), id="scale-up-container-metric"),
    pytest.param(Scenario(current=3, readiness=(FALSE, TRUE, TRUE), requests=cpu_requests(3),
                          levels=pod_levels(300, 500, 700)),
                 30, (4, 60, C2 * 600), id="scale-up-unready-pod-scales-less"),
    pytest.param(Scenario(current=3, starts=(HOT, COOL, COOL), container="container2",
                          requests=cpu_requests(3), levels=((0, 300), (0, 500), (0, 700))),
                 30, (4, 60, 600), id="scale-up-hot-cpu-container-scales-less"),
    pytest.param(Scenario(current=3, starts=(HOT, COOL, COOL), requests=cpu_requests(3),
                          levels=pod_levels(300, 500, 700)),
                 30, (4, 60, C2 * 600), id="scale-up-hot-cpu-pod-scales-less"),
    pytest.param(Scenario(current=3, readiness=(TRUE, FALSE, FALSE), requests=cpu_requests(3),
                          levels=pod_levels(400, 500, 700)),
                 30, (3, 40, C2 * 400), id="no-scale-unready-pods-ignored"),
    pytest.param(Scenario(current=3, readiness=(TRUE, FALSE, FALSE), starts=(COOL, HOT, HOT),
                          requests=cpu_requests(3), levels=pod_levels(400, 500, 700)),
                 30, (3, 40, C2 * 400), id="no-scale-hot-cpu-pods-ignored"),
    pytest.param(Scenario(current=2, readiness=(TRUE, TRUE, FALSE, FALSE),
                          phases=(RUNNING, RUNNING, FAILED, FAILED), requests=cpu_requests(4),
                          levels=pod_levels(500, 700)),
                 30, (4, 60, C2 * 600), id="scale-up-failed-pods-ignored"),
    pytest.param(Scenario(current=2, readiness=(TRUE, TRUE, FALSE, FALSE),
                          phases=(RUNNING, RUNNING, FAILED, FAILED), container="container2",
                          requests=cpu_requests(4),
                          levels=((1000, 500), (9000, 700), (1000,), (9000,))),
                 30, (4, 60, 600), id="scale-up-failed-pods-ignored-missing-container-metric"),
    pytest.param(Scenario(current=2, readiness=(TRUE, TRUE, FALSE, FALSE),
                          phases=(RUNNING, RUNNING, FAILED, FAILED), container="container2",
                          requests=cpu_requests(4), levels=((1000, 500), (9000, 700))),
                 30, (4, 60, 600), id="scale-up-container-failed-pods-ignored"),
    pytest.param(Scenario(current=2, readiness=(TRUE, TRUE, FALSE, FALSE), phases=(RUNNING,) * 4,
                          deleting=(False, False, True, True), requests=cpu_requests(4),
                          levels=pod_levels(500, 700)),
                 30, (4, 60, C2 * 600), id="scale-up-deleted-pods-ignored"),
    pytest.param(Scenario(current=2, readiness=(TRUE, TRUE, FALSE, FALSE), phases=(RUNNING,) * 4,
                          deleting=(False, False, True, True), container="container1",
                          requests=cpu_requests(4), levels=pod_levels(500, 700)),
                 30, (4, 60, 600), id="scale-up-container-deleted-pods-ignored"),
    pytest.param(Scenario(current=5, requests=cpu_requests(5),
                          levels=pod_levels(100, 300, 500, 250, 250)),
                 50, (3, 28, C2 * 280), id="scale-down"),
    pytest.param(Scenario(current=5, container="container2", requests=cpu_requests(5),
                          levels=((1000, 100), (1000, 300), (1000, 500), (1000, 250), (1000, 250))),
                 50, (3, 28, 280), id="scale-down-container-metric"),
    pytest.param(Scenario(current=5, readiness=(TRUE, TRUE, TRUE, FALSE, FALSE),
                          requests=cpu_requests(5), levels=pod_levels(100, 300, 500, 250, 250)),
                 50, (2, 30, C2 * 300), id="scale-down-excludes-unready"),
    pytest.param(Scenario(current=5, readiness=(TRUE, TRUE, TRUE, FALSE, FALSE),
                          container="container2", requests=cpu_requests(5),
                          levels=((1000, 100), (1000, 300), (1000, 500), (1000, 250), (1000, 250))),
                 50, (2, 30, 300), id="scale-down-container-excludes-unready"),
    pytest.param(Scenario(current=5, readiness=(TRUE,) + (FALSE,) * 4,
                          phases=(RUNNING,) + (PENDING,) * 4, requests=cpu_requests(5),
                          levels=pod_levels(100)),
                 50, (1, 10, C2 * 100), id="scale-down-excludes-unscheduled"),
    pytest.param(Scenario(current=5, readiness=(TRUE,) + (FALSE,) * 4,
                          phases=(RUNNING,) + (PENDING,) * 4, container="container2",
                          requests=cpu_requests(5),
                          levels=((1000, 100), (1000, 300), (1000, 500), (1000, 250), (1000, 250))),
                 50, (1, 10, 100), id="scale-down-container-excludes-unscheduled"),
    pytest.param(Scenario(current=5, starts=(COOL, COOL, COOL, HOT, HOT), requests=cpu_requests(5),
                          levels=pod_levels(100, 300, 500, 250, 250)),
                 50, (2, 30, C2 * 300), id="scale-down-ignores-hot-cpu"),
    pytest.param(Scenario(current=5, starts=(COOL, COOL, COOL, HOT, HOT), container="container2",
                          requests=cpu_requests(5),
                          levels=((1000, 100), (1000, 300), (1000, 500), (1000, 1000), (1000, 1000))),
                 50, (2, 30, 300), id="scale-down-container-ignores-hot-cpu"),
    pytest.param(Scenario(current=5, readiness=SEVEN_READINESS, phases=SEVEN_WITH_TWO_FAILED,
                          requests=cpu_requests(7), levels=pod_levels(100, 300, 500, 250, 250)),
                 50, (3, 28, C2 * 280), id="scale-down-failed-pods-ignored"),
    pytest.param(Scenario(current=5, readiness=SEVEN_READINESS, phases=SEVEN_WITH_TWO_FAILED,
                          container="container2", requests=cpu_requests(7),
                          levels=((1000, 100), (1000, 300), (1000, 500), (1000, 250), (1000, 250))),
                 50, (3, 28, 280), id="scale-down-container-failed-pods-ignored"),
    pytest.param(Scenario(current=5, readiness=SEVEN_READINESS, phases=(RUNNING,) * 7,
                          deleting=(False,) * 5 + (True, True), requests=cpu_requests(7),
                          levels=pod_levels(100, 300, 500, 250, 250)),
                 50, (3, 28, C2 * 280), id="scale-down-deleted-pods-ignored"),
    pytest.param(Scenario(current=5, readiness=SEVEN_READINESS, phases=(RUNNING,) * 7,
                          deleting=(False,) * 5 + (True, True), container="container2",
                          requests=cpu_requests(7),
                          levels=((1000, 100), (1000, 300), (1000, 500), (1000, 250), (1000, 250))),
                 50, (3, 28, 280), id="scale-down-still-running-deleted-pods-ignored-83561"),
]

MIXED = (900, 1000, 1100)

# upstream: TestReplicaCalcResourceTolerance
RESOURCE_TOLERANCE = [
    pytest.param(Scenario(current=3, requests=MIXED, levels=pod_levels(1010, 1030, 1020)),
                 DEFAULT_TOLERANCES, (3, 102, C2 * 1020), id="within-default-tolerance"),
    pytest.param(Scenario(current=3, requests=MIXED, levels=pod_levels(909, 1010, 1111)),
                 tolerances(0.0, 0.0), (4, 101, C2 * 1010), id="outside-0pct-tolerance"),
    pytest.param(Scenario(current=3, requests=MIXED, levels=pod_levels(1890, 1910, 1900)),
                 tolerances(0.1, 2.0), (3, 190, C2 * 1900), id="within-200pct-scale-up-tolerance"),
    pytest.param(Scenario(current=3, requests=MIXED, levels=pod_levels(1100, 1080, 1090)),
                 tolerances(2.0, 0.08), (4, 109, C2 * 1090), id="outside-8pct-scale-up-tolerance"),
    pytest.param(Scenario(current=3, requests=MIXED, levels=pod_levels(660, 640, 650)),
                 tolerances(0.36, 0.1), (3, 65, C2 * 650), id="within-36pct-scale-down-tolerance"),
    pytest.param(Scenario(current=3, requests=MIXED, levels=pod_levels(660, 640, 650)),
                 tolerances(0.34, 0.1), (2, 65, C2 * 650), id="outside-34pct-scale-down-tolerance"),
]

# upstream: TestReplicaCalcResourceMissingMetrics (the rows that succeed)
RESOURCE_MISSING = [
    pytest.param(Scenario(current=4, requests=cpu_requests(4),
                          levels=pod_levels(4000, 9500, 3000, 7000, 3200, 2000)),
                 100, (24, 587, C2 * 5875), id="superfluous-metrics-counted"),
    pytest.param(Scenario(current=4, requests=cpu_requests(4), levels=pod_levels(400, 95)),
                 100, (3, 24, 495), id="some-pods-missing-scales-down"),
    pytest.param(Scenario(current=2, requests=cpu_requests(2), levels=pod_levels(1000)),
                 100, (2, 100, C2 * 1000), id="no-change-metric-equal-to-target"),
    pytest.param(Scenario(current=2, requests=cpu_requests(2), levels=pod_levels(1900)),
                 100, (2, 190, C2 * 1900), id="no-change-metric-above-target"),
    pytest.param(Scenario(current=2, requests=cpu_requests(2), levels=pod_levels(600)),
                 100, (2, 60, C2 * 600), id="no-change-metric-below-target"),
    pytest.param(Scenario(current=3, readiness=(FALSE, TRUE, TRUE), requests=cpu_requests(3),
                          levels=pod_levels(100, 450)),
                 50, (3, 45, C2 * 450), id="no-change-unready-pod-metric-missing"),
    pytest.param(Scenario(current=3, starts=(HOT, COOL, COOL), requests=cpu_requests(3),
                          levels=pod_levels(100, 450)),
                 50, (3, 45, C2 * 450), id="no-change-hot-cpu-pod-metric-missing"),
    pytest.param(Scenario(current=3, readiness=(FALSE, TRUE, TRUE), requests=cpu_requests(3),
                          levels=pod_levels(100, 2000)),
                 50, (4, 200, C2 * 2000), id="scale-up-unready-pod-metric-missing"),
    pytest.param(Scenario(current=3, readiness=(FALSE, TRUE, TRUE), starts=(HOT, COOL, COOL),
                          requests=cpu_requests(3), levels=pod_levels(100, 2000)),
                 50, (4, 200, C2 * 2000), id="scale-up-hot-cpu-pod-metric-missing"),
    pytest.param(Scenario(current=4, readiness=(FALSE, TRUE, TRUE, TRUE), requests=cpu_requests(4),
                          levels=pod_levels(100, 100, 100)),
                 50, (3, 10, C2 * 100), id="scale-down-unready-pod-metric-missing"),
    pytest.param(Scenario(current=4, readiness=(FALSE, TRUE, TRUE, TRUE),
                          requests=(1000, 1000, 2000, 2000), levels=pod_levels(200, 100, 100)),
                 300, (2, 6, C2 * 100), id="scale-down-target-over-100"),
    pytest.param(Scenario(current=2, phases=(RUNNING,) * 3, requests=cpu_requests(3),
                          levels=pod_levels(100, 100)),
                 50, (2, 10, C2 * 100), id="rolling-update-max-surge-extra-pod-missing"),
]


@pytest.mark.parametrize(("scenario", "target", "expected"), RESOURCE_SCALE)
def test_resource_scale(scenario: Scenario, target: int, expected: tuple[int, int, int]) -> None:
    """Replicas, utilization and raw average match upstream's GetResourceReplicas."""
    assert run(scenario, target) == expected


@pytest.mark.parametrize(("scenario", "tol", "expected"), RESOURCE_TOLERANCE)
def test_resource_tolerance(
    scenario: Scenario, tol: Tolerances, expected: tuple[int, int, int]
) -> None:
    """Per-direction tolerances hold or release a 100 % utilization target as upstream's."""
    assert run(scenario, 100, tol) == expected


@pytest.mark.parametrize(("scenario", "target", "expected"), RESOURCE_MISSING)
def test_resource_missing_metrics(
    scenario: Scenario, target: int, expected: tuple[int, int, int]
) -> None:
    """Missing, superfluous and unready samples are back-filled exactly as upstream does."""
    assert run(scenario, target) == expected


# upstream: TestReplicaCalcResourceMissingMetrics (error rows)
@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        pytest.param(Scenario(current=1, requests=cpu_requests(1), levels=pod_levels(100),
                              names=("an-older-pod-name",)),
                     "no metrics returned matched known pods", id="disjoint-pod-and-metric-names"),
        pytest.param(Scenario(current=4, requests=cpu_requests(3), levels=()),
                     "no metrics returned from resource metrics API", id="no-metrics-returned"),
        pytest.param(Scenario(current=1, requests=(), levels=pod_levels(200)),
                     "missing request for", id="missing-cpu-request"),
    ],
)
def test_resource_errors(scenario: Scenario, message: str) -> None:
    """Unusable inputs fail the metric with upstream's error text."""
    with pytest.raises(MetricError, match=message):
        run(scenario, 100)


def test_computed_tolerance_regression() -> None:
    """TestReplicaCalcComputedToleranceAlgImplementation: a target just past the tolerance
    scales, one just inside it holds (the expectation is computed as upstream computes it)."""
    start_pods, used = 10, 10 * 150
    requested = 2 * used
    requested_to_used = float(requested // used)
    per_pod = requested // start_pods
    offsets = (100, -100, 10, -10, 2, -2, 1, -1, 0, 0)
    scenario = Scenario(current=start_pods, requests=tuple(per_pod + o for o in offsets),
                        levels=pod_levels(*[used // 10] * 10))
    target = abs(1 / (requested_to_used * (1 - 0.1))) + 0.01
    final_pods = math.ceil(used / (requested * target) * start_pods)
    assert run(scenario, int(target * 100)) == (final_pods, used * 100 // requested, C2 * used // 10)
    close_target = abs(1 / (requested_to_used * (1 - 0.1))) + 0.004
    assert run(scenario, int(close_target * 100))[0] == start_pods
