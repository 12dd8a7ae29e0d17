"""What a decision says about the window or policy that shaped it, and when they let go."""

from __future__ import annotations

import pytest

from autoscaler.algorithm import (
    AutoscalerSpec,
    Behavior,
    DecisionInput,
    History,
    MetricSourceType,
    MetricSpec,
    MetricTarget,
    MetricTargetType,
    Milli,
    ObjectMetricValue,
    Pod,
    PolicyType,
    Reason,
    Recommendation,
    ScaleEvent,
    ScaleState,
    ScalingPolicy,
    ScalingRules,
    SelectPolicy,
    decide,
)
from autoscaler.algorithm.decision_values import ScaleDownRules
from autoscaler.algorithm.explain import decision_scale_down, earliest_scale_down
from autoscaler.algorithm.stage_values import Rules
from tests.algorithm.builders import NOW

OBJECT = MetricSpec(type=MetricSourceType.OBJECT, name="rps",
                    target=MetricTarget(type=MetricTargetType.VALUE, value=Milli(100_000)))


def pods(count: int) -> list[Pod]:
    return [Pod(name=f"p{i}", start_time=0.0, ready_transition_time=0.0) for i in range(count)]


def run(*, current: int, usage: int, history: History = History(),  # noqa: B008 - immutable
        behavior: Behavior | None = None, min_replicas: int = 1, max_replicas: int = 100):  # type: ignore[no-untyped-def]
    """One decision for an Object metric at 100 whose value is ``usage`` (so the ratio, and
    the proposal, is usage / 100 x current)."""
    spec = AutoscalerSpec(min_replicas=min_replicas, max_replicas=max_replicas, metrics=(OBJECT,),
                          behavior=behavior)
    return decide(DecisionInput(spec=spec,
                                scale=ScaleState(spec_replicas=current, status_replicas=current),
                                metrics=[ObjectMetricValue(value=Milli(usage * 1000))],
                                pods=pods(current), history=history, now=NOW))


def up_policy(value: int, period: int, kind: PolicyType = PolicyType.PODS) -> Behavior:
    return Behavior(scale_up=ScalingRules(policies=(ScalingPolicy(
        type=kind, value=value, period_seconds=period),)))


def test_a_step_cut_by_a_policy_names_it_and_the_next_step() -> None:
    """1 pod per 60 s from 2 (proposal 8): limited to 3; the next step when this one ages out."""
    decision = run(current=2, usage=400, behavior=up_policy(1, 60))
    assert decision.desired_replicas == 3
    limit = decision.limit
    assert limit is not None
    assert (limit.reason, limit.limit) == (Reason.SCALE_UP_LIMIT, 3)
    assert limit.policy == ScalingPolicy(type=PolicyType.PODS, value=1, period_seconds=60)
    assert limit.next_step_at == NOW + 60


def test_a_spent_policy_waits_for_the_oldest_event_to_age_out() -> None:
    """Two 1-pod steps 50 and 20 s ago under 2 pods per 60 s: no step now, one in 10 s."""
    history = History(scale_up_events=(ScaleEvent(change=1, timestamp=NOW - 50),
                                       ScaleEvent(change=1, timestamp=NOW - 20)))
    decision = run(current=4, usage=400, behavior=up_policy(2, 60), history=history)
    assert decision.desired_replicas == 4
    assert decision.limit is not None
    assert decision.limit.next_step_at == NOW + 10


def test_the_policy_select_picked_is_named() -> None:
    """Max of 1 pod and 100 % per minute from 4: the percent policy (8) is the one used."""
    rules = ScalingRules(select_policy=SelectPolicy.MAX, policies=(
        ScalingPolicy(type=PolicyType.PODS, value=1, period_seconds=60),
        ScalingPolicy(type=PolicyType.PERCENT, value=100, period_seconds=60)))
    decision = run(current=4, usage=1000, behavior=Behavior(scale_up=rules))
    assert decision.limit is not None
    assert decision.limit.policy is not None
    assert (decision.desired_replicas, decision.limit.policy.type) == (8, PolicyType.PERCENT)


def test_without_behavior_the_default_rate_has_no_policy() -> None:
    """max(2 x current, 4) cuts 2 -> 8 to 4: no policy to name, the next pass may step."""
    decision = run(current=2, usage=400)
    assert decision.limit is not None
    assert (decision.limit.reason, decision.limit.policy, decision.limit.next_step_at) == (
        Reason.SCALE_UP_LIMIT, None, None)


@pytest.mark.parametrize(
    ("ages", "released_in"),
    [((30.0,), 270.0), ((200.0, 30.0, 10.0), 290.0), ((299.0,), 1.0)],
    ids=["one-recommendation", "the-newest-holding-one", "about-to-leave"],
)
def test_a_held_scale_down_says_when_the_window_lets_go(
    ages: tuple[float, ...], released_in: float
) -> None:
    """The last recommendation above the proposal leaves the 300 s window then."""
    history = History(recommendations=tuple(Recommendation(replicas=6, timestamp=NOW - age)
                                            for age in ages))
    decision = run(current=6, usage=50, history=history)
    hold = decision.hold
    assert hold is not None
    assert (hold.reason, hold.held_at, hold.window_seconds) == (
        Reason.SCALE_DOWN_STABILIZED, 6, 300.0)
    assert hold.releases_at == NOW + released_in


def test_nothing_held_or_limited_says_nothing() -> None:
    """A step within every limit and window carries neither explanation."""
    decision = run(current=4, usage=150, history=History(recommendations=(
        Recommendation(replicas=4, timestamp=NOW - 400),)))
    assert (decision.desired_replicas, decision.hold, decision.limit) == (6, None, None)


@pytest.mark.parametrize(
    ("recommendations", "events", "rules", "count", "expected"),
    [
        ((), (), None, 5, NOW),
        (((5, -100.0),), (), None, 5, NOW + 200),
        (((4, -100.0), (6, -250.0)), (), None, 5, NOW + 50),
        ((), (), None, 1, None),
        ((), ((1, -10.0),), Rules(stabilization_window_seconds=300, select_policy=SelectPolicy.MAX,
                                  policies=(ScalingPolicy(type=PolicyType.PODS, value=1,
                                                          period_seconds=60),), tolerance=None),
         5, NOW + 50),
        ((), (), Rules(stabilization_window_seconds=300, select_policy=SelectPolicy.DISABLED,
                       policies=(), tolerance=None), 5, None),
    ],
    ids=["free", "held-by-window", "only-counts-at-or-above", "at-min", "policy-spent",
         "disabled"],
)
def test_earliest_scale_down(
    recommendations: tuple[tuple[int, float], ...], events: tuple[tuple[int, float], ...],
    rules: Rules | None, count: int, expected: float | None,
) -> None:
    """The window must drop every recommendation of the count or more, then the policies
    must allow a step; never at minReplicas or with scale-down disabled."""
    history = History(
        recommendations=tuple(Recommendation(replicas=r, timestamp=NOW + t)
                              for r, t in recommendations),
        scale_down_events=tuple(ScaleEvent(change=c, timestamp=NOW + t) for c, t in events))
    found = earliest_scale_down(history, count=count, min_replicas=1, now=NOW,
                                rules=ScaleDownRules(window_seconds=300, rules=rules))
    assert found == expected


def test_a_decision_answers_the_earliest_scale_down() -> None:
    """After a first pass at 5, a drop could scale down once the seeded 5 leaves the window."""
    decision = run(current=5, usage=100)
    assert decision_scale_down(decision) == NOW + 300


def test_the_held_count_is_released_when_upstream_would_first_step_down() -> None:
    """Held at 8 by recommendations of 8 up to 20 s ago and of 5 since (300 s window, the
    proposal 2): by upstream's rule the window stops holding 8 when the last 8 leaves it
    (in 280 s) and the count may then drop to 5; the page's two times (the window's release
    and the earliest scale-down) are that same moment, not the moment the last 5 leaves
    (in 300 s, which the hold used to say)."""
    history = History(recommendations=(
        Recommendation(replicas=8, timestamp=NOW - 100), Recommendation(replicas=8, timestamp=NOW - 20),
        Recommendation(replicas=5, timestamp=NOW - 10), Recommendation(replicas=5, timestamp=NOW)))
    decision = run(current=8, usage=25, history=history)
    hold = decision.hold
    assert hold is not None
    assert (hold.held_at, hold.releases_at) == (8, NOW + 280)
    assert decision_scale_down(decision) == NOW + 280

    def at(moment: float) -> int:  # the same pass made later, on the same history
        return decide(DecisionInput(spec=AutoscalerSpec(min_replicas=1, max_replicas=100, metrics=(OBJECT,)),
                                    scale=ScaleState(spec_replicas=8, status_replicas=8),
                                    metrics=[ObjectMetricValue(value=Milli(25 * 1000))],
                                    pods=pods(8), history=decision.history, now=moment)).desired_replicas

    # Without behavior upstream still counts a recommendation exactly at the window's edge.
    assert (at(NOW + 279), at(NOW + 281)) == (8, 5)
