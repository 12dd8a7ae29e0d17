"""Scale to and from zero: upstream's ScaledToZero rule for whose zero it is, KEDA's
activation for 0 <-> 1, the exact HPA algorithm for 1 <-> N."""

from __future__ import annotations

import pytest

from autoscaler.algorithm import (
    AutoscalerSpec,
    Behavior,
    Bounds,
    DecisionInput,
    ExternalMetricValues,
    History,
    MetricSourceType,
    MetricSpec,
    MetricTarget,
    MetricTargetType,
    MetricUnavailable,
    MetricValues,
    Milli,
    PodMetricValues,
    ScaleState,
    ScalingRules,
)
from autoscaler.algorithm.activation import ScaleToZero, decide_with_zero, scaled_to_zero_condition
from autoscaler.algorithm.reasons import ConditionType, Reason, Step
from autoscaler.algorithm.zero_values import ActivityState, ZeroDecision, ZeroMemory

NOW = 10_000.0
QUEUE = MetricSpec(type=MetricSourceType.EXTERNAL, name="queue",
                   target=MetricTarget(type=MetricTargetType.AVERAGE_VALUE,
                                       average_value=Milli(10_000)))
RPS = MetricSpec(type=MetricSourceType.PODS, name="rps",
                 target=MetricTarget(type=MetricTargetType.AVERAGE_VALUE,
                                     average_value=Milli(100_000)))
# No scale-down window, so the tests see the floor and the cooldown, not stabilization.
SPEC = AutoscalerSpec(min_replicas=0, max_replicas=20, metrics=(QUEUE,),
                      behavior=Behavior(scale_down=ScalingRules(stabilization_window_seconds=0)))
RULES = ScaleToZero(activation_thresholds=(Milli(5_000),), cooldown=300.0)
OURS = ZeroMemory(scaled_to_zero=True, last_active=NOW - 1_000)


def queue(messages: float) -> ExternalMetricValues:
    return ExternalMetricValues(values=(Milli(int(messages * 1000)),))


def run(current: int, values: MetricValues, *, memory: ZeroMemory = OURS,
        rules: ScaleToZero | None = RULES, spec: AutoscalerSpec = SPEC,
        bounds: Bounds | None = None, first_seen: float = 0.0,
        extra: tuple[MetricValues, ...] = ()) -> ZeroDecision:
    return decide_with_zero(
        DecisionInput(spec=spec, scale=ScaleState(spec_replicas=current, status_replicas=current),
                      metrics=(values, *extra), pods=(), history=History(), now=NOW,
                      bounds=bounds),
        rules=rules, memory=memory, first_seen=first_seen)


def test_a_target_at_zero_that_we_did_not_put_there_is_left_alone() -> None:
    """Upstream: zero without ScaledToZero=True means switched off by hand."""
    result = run(0, queue(500), memory=ZeroMemory())
    assert result.decision.desired_replicas == 0
    assert result.decision.steps == (Step.SCALING_DISABLED,)
    active = result.decision.condition(ConditionType.SCALING_ACTIVE)
    assert active is not None
    assert (active.status, active.reason) == (False, Reason.SCALING_DISABLED)
    assert "did not scale it to zero" in active.message


@pytest.mark.parametrize(
    ("messages", "desired", "step"),
    [(0, 0, Step.INACTIVE), (5, 0, Step.INACTIVE), (6, 1, Step.ACTIVATED),
     (85, 4, Step.ACTIVATED)],
    ids=["empty", "at-threshold", "just-above", "a-burst-rate-limited"])
def test_at_our_zero_an_active_metric_wakes_the_target(
    messages: float, desired: int, step: Step,
) -> None:
    """Above the activation threshold: the HPA's proposal from zero, at least 1, within the
    scale-up limit (85 messages at 10 each want 9; from 0 the default limit allows 4)."""
    result = run(0, queue(messages))
    assert result.decision.desired_replicas == desired
    assert result.decision.steps[-1] is step


def test_at_our_zero_a_missing_metric_neither_wakes_nor_counts() -> None:
    """Unknown is not active: no wake-up on missing data; and not inactive either."""
    result = run(0, MetricUnavailable(reason="Prometheus down"))
    assert result.decision.desired_replicas == 0
    assert result.activity is not None
    assert result.activity.state is ActivityState.UNKNOWN


def test_running_the_hpa_never_goes_below_one_on_its_own() -> None:
    """1 <-> N is the HPA algorithm with the floor at 1: an empty queue proposes 0, the floor
    keeps 1 until the cooldown has passed."""
    fresh = ZeroMemory(scaled_to_zero=False, last_active=NOW - 10)
    result = run(3, queue(0), memory=fresh)
    assert result.decision.desired_replicas == 1
    assert result.idle_until == NOW - 10 + 300


def test_running_inactive_for_the_cooldown_goes_to_zero() -> None:
    """Every activation metric at or below its threshold for cooldownPeriod: to 0, directly."""
    idle = ZeroMemory(scaled_to_zero=False, last_active=NOW - 300)
    result = run(3, queue(2), memory=idle)
    assert result.decision.desired_replicas == 0
    assert result.decision.steps[-1] is Step.DEACTIVATED
    assert "cooldownPeriod" in result.decision.rescale_reason


def test_activity_restarts_the_cooldown() -> None:
    """An active pass moves lastActive to now: the countdown starts over."""
    result = run(3, queue(50), memory=ZeroMemory(last_active=NOW - 1_000))
    assert result.memory.last_active == NOW
    assert result.decision.desired_replicas == 5


def test_first_sight_starts_the_cooldown_and_the_initial_grace_holds() -> None:
    """A target first seen now waits a whole cooldown; the initial cooldown after start holds
    longer when it is longer."""
    first = run(3, queue(0), memory=ZeroMemory())
    assert first.memory.last_active == NOW
    assert first.decision.desired_replicas == 1
    graced = ScaleToZero(activation_thresholds=(Milli(0),), cooldown=60, initial_cooldown=900)
    held = run(3, queue(0), memory=ZeroMemory(last_active=NOW - 600), rules=graced,
               first_seen=NOW - 100)
    assert held.decision.desired_replicas == 1
    assert held.idle_until == NOW - 100 + 900


def test_a_missing_metric_never_takes_a_target_to_zero() -> None:
    """Running with the activation metric invalid: the HPA holds and no countdown runs."""
    result = run(3, MetricUnavailable(reason="refused"),
                 memory=ZeroMemory(last_active=NOW - 5_000))
    assert result.decision.desired_replicas == 3
    assert result.idle_until is None


def test_time_without_a_valid_reading_does_not_count_toward_the_cooldown() -> None:
    """An unknown pass restarts the countdown as an active one does: after an outage, the
    first inactive reading starts a whole cooldown instead of ending one (unlike KEDA)."""
    blind = run(3, MetricUnavailable(reason="Prometheus unavailable"),
                memory=ZeroMemory(last_active=NOW - 5_000))
    assert blind.memory.last_active == NOW
    after = decide_with_zero(
        DecisionInput(spec=SPEC, scale=ScaleState(spec_replicas=3, status_replicas=3),
                      metrics=(queue(0),), pods=(), history=History(), now=NOW + 16),
        rules=RULES, memory=blind.memory, first_seen=0.0)
    assert after.decision.desired_replicas == 1
    assert after.idle_until == NOW + 300


def test_per_pod_metrics_do_not_decide_activity() -> None:
    """CPU and per-pod metrics cannot be read at zero pods: only Object/External count."""
    spec = AutoscalerSpec(min_replicas=0, max_replicas=20, metrics=(QUEUE, RPS))
    rules = ScaleToZero(activation_thresholds=(Milli(0), None))
    result = run(2, queue(0), spec=spec, rules=rules, extra=(PodMetricValues(samples={}),),
                 memory=ZeroMemory(last_active=NOW - 400))
    assert result.activity is not None
    assert result.activity.state is ActivityState.INACTIVE


def test_a_scheduled_floor_keeps_the_target_up_and_wakes_it() -> None:
    """A schedule's minReplicas above 0: no scale to zero; at our zero, back to the floor."""
    floor = Bounds(min_replicas=2, max_replicas=20)
    running = run(3, queue(0), bounds=floor, memory=ZeroMemory(last_active=NOW - 5_000))
    assert running.decision.desired_replicas >= 2
    woken = run(0, queue(0), bounds=floor)
    assert woken.decision.desired_replicas == 2


@pytest.mark.parametrize(
    ("values", "desired", "step"),
    [(queue(0), 3, Step.REPLICA_LIMIT), (queue(15), 3, Step.REPLICA_LIMIT),
     (queue(85), 4, Step.POLICY_LIMITED), (MetricUnavailable(reason="Prometheus down"), 3,
                                           Step.REPLICA_LIMIT)],
    ids=["idle", "below-min", "more-than-min", "metrics-failing"])
def test_min_raised_while_held_at_zero_wakes_to_at_least_min(
        values: MetricValues, desired: int, step: Step) -> None:
    """Upstream (horizontal.go, HPAScaleToZero): at 0 with ScaledToZero True and
    minReplicas raised to 3, the metrics are computed from zero and the result raised to
    3. 85 messages at 10 each ask for 9 from zero; the scale-up limit from 0 (max(2 * 0, 4))
    lets 4, which is above 3: 4. Failing metrics: ours wakes to 3 (upstream stays at 0)."""
    spec = AutoscalerSpec(min_replicas=3, max_replicas=20, metrics=(QUEUE,))
    result = run(0, values, spec=spec, rules=None)
    assert result.decision.desired_replicas == desired
    assert step in result.decision.steps
    assert result.decision.bounds is not None
    assert result.decision.bounds.min_replicas == 3


def test_a_scheduled_floor_at_our_zero_also_follows_the_metrics() -> None:
    """A schedule's floor of 2 at our zero with 85 messages waiting: 4, as for a raised min."""
    woken = run(0, queue(85), bounds=Bounds(min_replicas=2, max_replicas=20))
    assert woken.decision.desired_replicas == 4


@pytest.mark.parametrize(
    ("previous", "new", "rules", "expected"),
    [(3, 0, RULES, True), (0, 1, RULES, False), (3, 4, RULES, False), (3, 0, None, False)],
    ids=["to-zero", "woken", "up", "min-above-zero"])
def test_the_scaled_to_zero_condition(previous: int, new: int, rules: ScaleToZero | None,
                                      expected: bool) -> None:
    """True only for a move from above 0 to 0 of a target allowed to scale to zero."""
    condition = scaled_to_zero_condition(previous=previous, new=new, rules=rules)
    assert condition.type is ConditionType.SCALED_TO_ZERO
    assert condition.status is expected
    assert condition.reason == (Reason.SCALED_TO_ZERO if expected else Reason.NOT_SCALED_TO_ZERO)


def test_a_zero_set_by_hand_after_someone_woke_our_zero_is_left_alone() -> None:
    """We took the target to 0; someone scaled it to 2 by hand (the HPA agreed with 2, so
    nothing was written); then someone set it to 0 by hand. That zero is not ours: it is
    left alone even with an active metric, as any zero we did not make."""
    woken_by_hand = run(2, queue(20))  # 20 messages at 10 each: 2 is right, no write
    assert woken_by_hand.decision.desired_replicas == 2
    paused_by_hand = run(0, queue(500), memory=woken_by_hand.memory)
    assert paused_by_hand.decision.desired_replicas == 0
    assert paused_by_hand.decision.steps == (Step.SCALING_DISABLED,)


def test_at_a_zero_not_ours_activity_is_still_read() -> None:
    """Left alone, but what waits is known: the runtime says it (runtime/zero_owner.py)."""
    result = run(0, queue(50), memory=ZeroMemory())
    assert (result.decision.desired_replicas, result.decision.steps) == (
        0, (Step.SCALING_DISABLED,))
    assert result.activity is not None
    assert result.activity.state is ActivityState.ACTIVE


def test_waking_forgets_an_adopted_zero() -> None:
    """A KEDA zero held as ours: once the target runs, a later zero is ours only if we make
    it (and whoever set the first one owns nothing of ours any more)."""
    held = ZeroMemory(scaled_to_zero=True, last_active=NOW, adopted_from="keda-operator")
    assert run(2, queue(15), memory=held).memory.adopted_from is None
    assert run(0, queue(0), memory=held).memory.adopted_from == "keda-operator"
