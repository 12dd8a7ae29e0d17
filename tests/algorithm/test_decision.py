"""Whole passes through ``decide``, ported from upstream's horizontal_test.go controller tests.

Upstream's fixture pods split each cpu request and level over two containers; the fixture's
``recommendations: []`` (an HPA the controller already knows) is ``INITIALIZED`` here, and an
unset one (seeded with the current count on the first pass) is an empty ``History``.
Upstream checks conditions after its scale write, so a rescaled pass ends with AbleToScale
``SucceededRescale``; ``decide`` stops before the write, so these tests check ScalingActive and
ScalingLimited, and the exact list only where no write happens.
"""

from __future__ import annotations

import pytest

from autoscaler.algorithm import (
    AutoscalerSpec,
    Behavior,
    ConditionStatus,
    ConditionType,
    Decision,
    DecisionInput,
    ExternalMetricValues,
    History,
    MetricSpec,
    MetricUnavailable,
    MetricValues,
    Milli,
    ObjectMetricValue,
    Pod,
    PodMetricValues,
    ScaleState,
    ScalingRules,
    decide,
)
from tests.algorithm.builders import (
    COOL,
    FALSE,
    HOT,
    INITIALIZED,
    NOW,
    TESTING,
    TRUE,
    Scenario,
    cpu_spec,
    external_spec,
    object_spec,
    pod_samples,
    pods_spec,
    sample,
    scaling_rules,
    spec,
)

AS, SA, SL = ConditionType.ABLE_TO_SCALE, ConditionType.SCALING_ACTIVE, ConditionType.SCALING_LIMITED
MIXED = (900, 1000, 1100)


def hpa_pods(
    requests: tuple[int, ...], *, readiness: tuple[ConditionStatus, ...] = (),
    starts: tuple[float, ...] = (),
) -> tuple[Pod, ...]:
    """horizontal_test's pods: ``requests[i]`` split over two containers, ready since ZERO."""
    halves = tuple(r // 2 for r in requests)
    scenario = Scenario(current=len(requests), requests=halves, readiness=readiness, starts=starts)
    return scenario.pods()


def cpu_levels(*levels: int) -> PodMetricValues:
    """horizontal_test's cpu metrics: each level split over two containers, sampled now."""
    return PodMetricValues(samples={
        f"test-pod-{i}": sample(level // 2 * 2, timestamp=NOW) for i, level in enumerate(levels)
    })


def run(
    hpa: AutoscalerSpec, replicas: int, metrics: list[MetricValues], pods: tuple[Pod, ...],
    *, history: History = INITIALIZED, status_replicas: int | None = None,
) -> Decision:
    scale = ScaleState(
        spec_replicas=replicas,
        status_replicas=replicas if status_replicas is None else status_replicas,
    )
    return decide(DecisionInput(spec=hpa, scale=scale, metrics=metrics, pods=pods,
                                history=history, now=NOW, settings=TESTING))


def conditions(decision: Decision) -> list[tuple[ConditionType, bool, str]]:
    return [(c.type, c.status, c.reason.value) for c in decision.conditions]


def limited(decision: Decision) -> tuple[bool, str] | None:
    found = decision.condition(SL)
    return None if found is None else (found.status, found.reason.value)


# upstream: TestMinReplicas, TestZeroMinReplicasDesiredZero, TestMinReplicasDesiredZero,
# TestMaxReplicas, TestSuperfluousMetrics, TestMissingMetrics
@pytest.mark.parametrize(
    ("min_max", "replicas", "target", "levels", "requests", "expected", "limit"),
    [
        pytest.param((2, 5), 3, 90, (10, 95, 10), MIXED, 2, (True, "TooFewReplicas"),
                     id="TestMinReplicas"),
        pytest.param((0, 5), 3, 90, (0, 0, 0), MIXED, 0, (False, "DesiredWithinRange"),
                     id="TestZeroMinReplicasDesiredZero"),
        pytest.param((2, 5), 3, 90, (0, 0, 0), MIXED, 2, (True, "TooFewReplicas"),
                     id="TestMinReplicasDesiredZero"),
        pytest.param((2, 5), 3, 90, (8000, 9500, 1000), MIXED, 5, (True, "TooManyReplicas"),
                     id="TestMaxReplicas"),
        pytest.param((2, 6), 4, 100, (4000, 9500, 3000, 7000, 3200, 2000), (1000,) * 4, 6,
                     (True, "TooManyReplicas"), id="TestSuperfluousMetrics"),
        pytest.param((2, 6), 4, 100, (400, 95), (1000,) * 4, 3, (False, "DesiredWithinRange"),
                     id="TestMissingMetrics"),
    ],
)
def test_cpu_pass(  # noqa: PLR0917 - one table row
    min_max: tuple[int, int], replicas: int, target: int, levels: tuple[int, ...],
    requests: tuple[int, ...], expected: int, limit: tuple[bool, str],
) -> None:
    """A cpu pass lands on upstream's count with its ScalingLimited condition."""
    hpa = spec(cpu_spec(target), min_replicas=min_max[0], max_replicas=min_max[1])
    decision = run(hpa, replicas, [cpu_levels(*levels)], hpa_pods(requests))
    assert (decision.desired_replicas, limited(decision)) == (expected, limit)
    assert conditions(decision)[1] == (SA, True, "ValidMetricFound")


# upstream: TestZeroReplicas, TestTooFewReplicas, TestTooManyReplicas, TestScaleUpRCImmediately,
# TestScaleDownRCImmediately: no metrics are read, so no pods or samples are needed
@pytest.mark.parametrize(
    ("min_max", "replicas", "expected", "expected_conditions"),
    [
        pytest.param((3, 5), 0, 0, [(AS, True, "SucceededGetScale"),
                                    (SA, False, "ScalingDisabled")], id="TestZeroReplicas"),
        pytest.param((3, 5), 2, 3, [(AS, True, "SucceededGetScale")], id="TestTooFewReplicas"),
        pytest.param((3, 5), 10, 5, [(AS, True, "SucceededGetScale")], id="TestTooManyReplicas"),
        pytest.param((2, 6), 1, 2, [(AS, True, "SucceededGetScale")],
                     id="TestScaleUpRCImmediately"),
        pytest.param((2, 5), 6, 5, [(AS, True, "SucceededGetScale")],
                     id="TestScaleDownRCImmediately"),
    ],
)
def test_out_of_range_passes(
    min_max: tuple[int, int], replicas: int, expected: int,
    expected_conditions: list[tuple[ConditionType, bool, str]],
) -> None:
    """At 0 (min > 0) scaling is disabled; outside [min, max] the count jumps to the bound."""
    hpa = spec(cpu_spec(90), min_replicas=min_max[0], max_replicas=min_max[1])
    decision = run(hpa, replicas, [MetricUnavailable(reason="not read")], ())
    assert decision.desired_replicas == expected
    assert conditions(decision) == expected_conditions


def test_empty_metrics_fail_the_pass() -> None:
    """TestEmptyMetrics: no samples at all fail ScalingActive with FailedGetResourceMetric."""
    hpa = spec(cpu_spec(100), min_replicas=2, max_replicas=6)
    decision = run(hpa, 4, [PodMetricValues(samples={})], hpa_pods((1000,) * 4))
    assert decision.desired_replicas == 4
    assert conditions(decision) == [(AS, True, "SucceededGetScale"),
                                    (SA, False, "FailedGetResourceMetric")]


def test_one_metric_empty_still_scales_up() -> None:
    """TestScaleUpOneMetricEmpty: a failed external metric does not block a cpu scale-up."""
    hpa = spec(cpu_spec(30), external_spec(value=100), min_replicas=2, max_replicas=6)
    decision = run(hpa, 3, [cpu_levels(300, 400, 500), MetricUnavailable(reason="boom")],
                   hpa_pods((1000,) * 3))
    assert decision.desired_replicas == 4
    assert conditions(decision)[1] == (SA, True, "ValidMetricFound")
    assert decision.error is not None
    assert "invalid metrics (1 invalid out of 2)" in decision.error


def test_one_metric_empty_blocks_scale_down() -> None:
    """TestNoScaleDownOneMetricEmpty: a failed metric blocks a scale-down of the others."""
    hpa = spec(cpu_spec(50), external_spec(value=1000), min_replicas=2, max_replicas=6)
    decision = run(hpa, 5, [cpu_levels(100, 300, 500, 250, 250), MetricUnavailable(reason="x")],
                   hpa_pods((1000,) * 5))
    assert decision.desired_replicas == 5
    assert conditions(decision) == [(AS, True, "SucceededGetScale"),
                                    (SA, False, "FailedGetExternalMetric")]


# upstream: TestScaleUpCM, TestScaleUpCMUnreadyandCpuHot, TestScaleUpCMObject,
# TestScaleUpPerPodCMObject, TestScaleUpFromZeroCMObject,
# TestScaleUpFromZeroIgnoresToleranceCMObject, TestToleranceCMExternal,
# TestTolerancePerPodCMObject, TestTolerancePerPodCMExternal
WITHIN = (False, "DesiredWithinRange")
CUSTOM = [
    pytest.param(pods_spec(15000), 3, PodMetricValues(samples=pod_samples(20000, 10000, 30000)),
                 (), 4, WITHIN, id="TestScaleUpCM"),
    pytest.param(pods_spec(15000), 3, PodMetricValues(samples=pod_samples(50000, 15000, 30000)),
                 ((FALSE, TRUE, FALSE), (HOT, COOL, HOT)), 6, (True, "TooManyReplicas"),
                 id="TestScaleUpCMUnreadyandCpuHot"),
    pytest.param(object_spec(value=15000), 3, ObjectMetricValue(value=Milli(20000)), (), 4,
                 WITHIN, id="TestScaleUpCMObject"),
    pytest.param(object_spec(average=10000), 3, ObjectMetricValue(value=Milli(40000)), (), 4,
                 WITHIN, id="TestScaleUpPerPodCMObject"),
    pytest.param(object_spec(value=15000), 0, ObjectMetricValue(value=Milli(20000)), (), 2,
                 WITHIN, id="TestScaleUpFromZeroCMObject"),
    pytest.param(object_spec(value=1000), 0, ObjectMetricValue(value=Milli(1000)), (), 1,
                 WITHIN, id="TestScaleUpFromZeroIgnoresToleranceCMObject"),
    pytest.param(external_spec(value=8666), 4, ExternalMetricValues(values=(Milli(8600),)), (), 4,
                 WITHIN, id="TestToleranceCMExternal"),
    pytest.param(object_spec(average=2200), 4, ObjectMetricValue(value=Milli(8600)), (), 4,
                 WITHIN, id="TestTolerancePerPodCMObject"),
    pytest.param(external_spec(average=2200), 4, ExternalMetricValues(values=(Milli(8600),)), (),
                 4, WITHIN, id="TestTolerancePerPodCMExternal"),
]


@pytest.mark.parametrize(("metric", "replicas", "values", "pod_state", "expected", "limit"), CUSTOM)
def test_custom_metric_pass(  # noqa: PLR0917 - one table row
    metric: MetricSpec, replicas: int, values: MetricValues,
    pod_state: tuple[tuple[ConditionStatus, ...], tuple[float, ...]] | tuple[()],
    expected: int, limit: tuple[bool, str],
) -> None:
    """Pods, Object and External targets, from zero too, end on upstream's count."""
    hpa = spec(metric, min_replicas=0 if replicas == 0 else 2, max_replicas=6)
    readiness, starts = pod_state or ((), ())
    pods = hpa_pods((1000,) * replicas, readiness=readiness, starts=starts)
    decision = run(hpa, replicas, [values], pods, history=History())
    assert (decision.desired_replicas, limited(decision)) == (expected, limit)
    assert conditions(decision)[:2] == [(AS, True, "ReadyForNewScale"),
                                        (SA, True, "ValidMetricFound")]


@pytest.mark.parametrize(("offset", "scales"), [pytest.param(0.01, True, id="past-tolerance"),
                                                  pytest.param(0.004, False, id="inside-tolerance")])
def test_computed_tolerance_pass(offset: float, scales: bool) -> None:
    """TestComputedToleranceAlgImplementation (horizontal_test): 10 -> 9 just past the tolerance,
    10 held just inside it, with ReadyForNewScale when held."""
    requested_per_pod = 300
    requests = tuple(requested_per_pod + o for o in (100, -100, 10, -10, 2, -2, 1, -1, 0, 0))
    target = abs(1 / (2.0 * (1 - 0.1))) + offset
    hpa = spec(cpu_spec(int(target * 100)), min_replicas=0, max_replicas=1000)
    decision = run(hpa, 10, [cpu_levels(*[150] * 10)], hpa_pods(requests))
    assert decision.desired_replicas == (9 if scales else 10)
    if not scales:
        assert conditions(decision)[0] == (AS, True, "ReadyForNewScale")


def test_first_pass_cannot_scale_down() -> None:
    """A target seen for the first time is seeded with its count (recordInitialRecommendation),
    so the downscale window holds it: ScaleDownStabilized (upstream's seeding rule)."""
    hpa = spec(cpu_spec(50), min_replicas=1, max_replicas=10)
    decision = run(hpa, 5, [cpu_levels(100, 300, 500, 250, 250)], hpa_pods((1000,) * 5),
                   history=History())
    assert (decision.desired_replicas, decision.proposal) == (5, 3)
    assert conditions(decision)[0] == (AS, True, "ScaleDownStabilized")


# upstream: TestEventCreated, TestEventNotCreated, TestMissingReports, TestUpscaleCap,
# TestUpscaleCapGreaterThanMaxReplicas, TestMoreReplicasThanSpecNoScale,
# TestConditionNoAmbiguousSelectorWhenNoSelectorOverlapBetweenHPAs (its count; selectors are
# the runtime's business, not the core's)
@pytest.mark.parametrize(
    ("hpa", "replicas", "status", "levels", "requests", "history", "expected", "limit"),
    [
        pytest.param(spec(cpu_spec(50), max_replicas=5), 1, 1, (200,), (200,), History(), 2,
                     WITHIN, id="TestEventCreated"),
        pytest.param(spec(cpu_spec(50), max_replicas=5), 2, 2, (200, 200), (400, 400), History(),
                     2, WITHIN, id="TestEventNotCreated"),
        pytest.param(spec(cpu_spec(50), max_replicas=5), 4, 4, (200,), (200,), INITIALIZED, 2,
                     WITHIN, id="TestMissingReports"),
        pytest.param(spec(cpu_spec(10), max_replicas=100,
                          behavior=Behavior(scale_up=scaling_rules(0, 0, 700, 60, 0))),
                     3, 3, (100, 200, 300), (100,) * 3, History(), 24, (True, "ScaleUpLimit"),
                     id="TestUpscaleCap"),
        pytest.param(spec(cpu_spec(10), max_replicas=20,
                          behavior=Behavior(scale_up=scaling_rules(0, 0, 700, 60, 0))),
                     3, 3, (100, 200, 300), (100,) * 3, History(), 20, (True, "TooManyReplicas"),
                     id="TestUpscaleCapGreaterThanMaxReplicas"),
        pytest.param(spec(cpu_spec(50), max_replicas=8), 4, 5, (500,) * 5, (1000,) * 5,
                     History(), 4, WITHIN, id="TestMoreReplicasThanSpecNoScale"),
        pytest.param(spec(cpu_spec(30), min_replicas=2, max_replicas=6), 3, 3, (300, 500, 700),
                     (1000,) * 3, History(), 5, WITHIN,
                     id="TestConditionNoAmbiguousSelectorWhenNoSelectorOverlap"),
    ],
)
def test_more_cpu_passes(  # noqa: PLR0917 - one table row
    hpa: AutoscalerSpec, replicas: int, status: int, levels: tuple[int, ...],
    requests: tuple[int, ...], history: History, expected: int, limit: tuple[bool, str],
) -> None:
    """More controller passes: upscale caps from behavior, surge pods, missing reports."""
    decision = run(hpa, replicas, [cpu_levels(*levels)], hpa_pods(requests), history=history,
                   status_replicas=status)
    assert (decision.desired_replicas, limited(decision)) == (expected, limit)


@pytest.mark.parametrize(
    ("ratio_milli", "behavior", "expected"),
    [
        pytest.param(1070, None, 4, id="global-10pct-holds-7pct-up"),
        pytest.param(1070, Behavior(scale_up=ScalingRules(tolerance=0.05)), 5,
                     id="5pct-up-tolerance-scales-7pct-up"),
        pytest.param(600, Behavior(scale_down=ScalingRules(tolerance=0.5)), 4,
                     id="50pct-down-tolerance-holds-40pct-down"),
        pytest.param(600, None, 3, id="global-10pct-scales-40pct-down"),
    ],
)
def test_tolerance_per_direction(ratio_milli: int, behavior: Behavior | None, expected: int) -> None:
    """Per-direction tolerances from behavior (KEP-4951, after upstream's TestHPAWithTolerance
    integration test: 5 % up, 50 % down) decide, not the global 10 %."""
    hpa = spec(pods_spec(1000), max_replicas=10, behavior=behavior)
    decision = run(hpa, 4, [PodMetricValues(samples=pod_samples(*[ratio_milli] * 4))],
                   hpa_pods((1000,) * 4))
    assert decision.desired_replicas == expected


def test_decisions_alike_share_their_messages() -> None:
    """Every decision keeps its condition messages and rescale reason until the next, a
    target's for as long as the daemon runs: targets deciding alike share one string of each
    (made apart, the ScalingActive message alone held 153 bytes a target)."""
    hpa = spec(cpu_spec(50), min_replicas=1, max_replicas=10)
    first, second = (run(hpa, 2, [cpu_levels(900, 900)], hpa_pods((1000, 1000)))
                     for _ in range(2))
    assert first.desired_replicas == 4
    assert first.rescale_reason == "cpu resource utilization (percentage of request) above target"
    assert first.rescale_reason is second.rescale_reason
    active = [(a.message, b.message) for a, b in zip(first.conditions, second.conditions,
                                                      strict=True)
              if a.type is SA]
    assert active[0][0].startswith("the autoscaler was able to compute")
    assert active[0][0] is active[0][1]
