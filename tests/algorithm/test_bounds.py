"""Scheduled bounds in the core: reached exactly, gradually through the rate limits unless
immediate, floors applied even without metrics, ceilings never on bad metrics alone."""

from __future__ import annotations

import pytest

from autoscaler.algorithm import (
    AlgorithmSettings,
    AutoscalerSpec,
    Behavior,
    Bounds,
    Decision,
    DecisionInput,
    History,
    MetricSourceType,
    MetricSpec,
    MetricTarget,
    MetricTargetType,
    MetricUnavailable,
    Milli,
    ObjectMetricValue,
    PolicyType,
    ScaleState,
    ScalingPolicy,
    ScalingRules,
    decide,
    record_scale_event,
)
from autoscaler.algorithm.model import MetricValues

NOW = 10_000.0
QUEUE = MetricSpec(type=MetricSourceType.OBJECT, name="queue", described_object_kind="Queue",
                   target=MetricTarget(type=MetricTargetType.AVERAGE_VALUE,
                                       average_value=Milli(100_000)))


def run(current: int, bounds: Bounds | None, *, load: int | None = None,
        behavior: Behavior | None = None, history: History | None = None,
        now: float = NOW) -> Decision:
    """One pass for a queue whose length is `load` per replica (ratio 1.0 when None)."""
    values: MetricValues = (MetricUnavailable(reason="Prometheus down") if load == -1
                            else ObjectMetricValue(value=Milli((load or 100) * 1000 * current)))
    spec = AutoscalerSpec(min_replicas=1, max_replicas=50, metrics=(QUEUE,), behavior=behavior)
    return decide(DecisionInput(spec=spec,
                                scale=ScaleState(spec_replicas=current, status_replicas=current),
                                metrics=[values], pods=[], history=history or History(),
                                now=now, bounds=bounds))


def test_a_floor_inside_tolerance_is_reached_exactly() -> None:
    """19 -> 20: the metric is within tolerance (ratio 1.0), the floor still applies."""
    decision = run(19, Bounds(min_replicas=20, max_replicas=50, gradual=True))
    assert decision.desired_replicas == 20
    assert decision.rescale_reason == "scheduled minReplicas is 20"


@pytest.mark.parametrize(
    ("gradual", "behavior", "expected"),
    [
        (False, None, 10),                   # immediate: upstream's jump to minReplicas
        (True, None, 6),                     # no behavior: the max(2x, 4) scale-up limit
        (True, Behavior(), 7),               # default behavior: max(3 + 4 pods, 3 x 200%)
        (True, Behavior(scale_up=ScalingRules(policies=(
            ScalingPolicy(type=PolicyType.PODS, value=1, period_seconds=60),))), 4),
    ],
    ids=["immediate", "default-limit", "default-behavior", "one-pod-per-minute"],
)
def test_moving_to_a_new_floor(gradual: bool, behavior: Behavior | None, expected: int) -> None:
    """From 3 toward a floor of 10: at once when immediate, else at the rate limits' pace."""
    bounds = Bounds(min_replicas=10, max_replicas=50, gradual=gradual)
    assert run(3, bounds, behavior=behavior).desired_replicas == expected


def test_gradual_floor_arrives_over_passes() -> None:
    """With one pod per minute, the floor of 6 is reached one pod per period."""
    behavior = Behavior(scale_up=ScalingRules(policies=(
        ScalingPolicy(type=PolicyType.PODS, value=1, period_seconds=60),)))
    bounds = Bounds(min_replicas=6, max_replicas=50, gradual=True)
    current, history, counts = 3, History(), []
    for minute in range(5):
        now = NOW + 60 * minute
        decision = run(current, bounds, behavior=behavior, history=history, now=now)
        history = record_scale_event(decision.history, behavior=behavior, previous=current,
                                     new=decision.desired_replicas, now=now,
                                     settings=AlgorithmSettings())
        current = decision.desired_replicas
        counts.append(current)
    assert counts == [4, 5, 6, 6, 6]


def test_a_floor_applies_without_metrics() -> None:
    """Prometheus down at 3 replicas with a floor of 10: scale up toward the floor anyway."""
    decision = run(3, Bounds(min_replicas=10, max_replicas=50, gradual=True), load=-1)
    assert decision.desired_replicas == 6
    assert decision.error is not None


def test_no_metrics_above_the_floor_holds() -> None:
    """Prometheus down above the floor: hold, as upstream (a ceiling is not metrics)."""
    decision = run(30, Bounds(min_replicas=10, max_replicas=20, gradual=True), load=-1)
    assert decision.desired_replicas == 30


def test_a_lower_ceiling_goes_through_the_scale_down_policy() -> None:
    """At 25 with a new ceiling of 20 and a 2-pods-per-minute policy: 23, not 20."""
    behavior = Behavior(scale_down=ScalingRules(stabilization_window_seconds=0, policies=(
        ScalingPolicy(type=PolicyType.PODS, value=2, period_seconds=60),)))
    decision = run(25, Bounds(min_replicas=1, max_replicas=20, gradual=True), load=150,
                   behavior=behavior)
    assert decision.desired_replicas == 23
    assert decision.rescale_reason == "scheduled maxReplicas is 20"


def test_scale_to_zero_is_the_specs_choice_not_the_schedules() -> None:
    """At 0 replicas with minReplicas 1 in the spec, a schedule floor does not wake it up."""
    decision = run(0, Bounds(min_replicas=5, max_replicas=50, gradual=True))
    assert decision.desired_replicas == 0
