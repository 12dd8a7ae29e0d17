"""The /status body of a target: everything `status` renders, as HPA status spells it."""

from __future__ import annotations

import json

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
    Pod,
    PodMetricValues,
    PodPhase,
    PodSample,
    PodValues,
    PolicyType,
    ScaleEvent,
    ScaleState,
    ScalingPolicy,
    ScalingRules,
    decide,
)
from autoscaler.algorithm.decision import GOT_SCALE
from autoscaler.runtime.conditions import merge_conditions
from autoscaler.runtime.status import MAX_SCALE_EVENTS, TargetState

NOW = 1_800_000_000.0
RPS = MetricSpec(type=MetricSourceType.PODS, name="rps",
                 target=MetricTarget(type=MetricTargetType.AVERAGE_VALUE,
                                     average_value=Milli(100_000)))


def state_after_one_pass(*, behavior: Behavior | None = None) -> TargetState:
    """web at 2 with pods a (400) and b (400) ready, c pending, d without a sample."""
    pods = [Pod(name="a", start_time=0.0), Pod(name="b", start_time=0.0),
            Pod(name="c", phase=PodPhase.PENDING), Pod(name="d", start_time=0.0)]
    samples = {name: PodSample(value=Milli(400_000), timestamp=NOW) for name in ("a", "b", "c")}
    values = PodMetricValues(samples=samples, query='rps{pod=~"a|b|c|d"}')
    decision = decide(DecisionInput(spec=AutoscalerSpec(min_replicas=1, max_replicas=10, metrics=(RPS,),
                                          behavior=behavior),
                                    scale=ScaleState(spec_replicas=2, status_replicas=2),
                                    metrics=[values], pods=pods, history=History(), now=NOW))
    state = TargetState(key="shop/Deployment/web", last_reconcile=NOW, last_outcome="ok",
                        history=decision.history, current_replicas=2)
    state.decided(decision, decision.desired_replicas)
    state.settle("5e1f2a3b4c6d")
    state.conditions = merge_conditions([], decision.conditions, NOW)
    return state


def test_metrics_carry_quantity_strings_query_and_named_pods() -> None:
    """Current and target as quantities, the query as run, each pod's value and group."""
    (metric,) = state_after_one_pass().to_json()["currentMetrics"]
    assert metric["target"] == {"type": "AverageValue", "averageValue": "100"}
    assert metric["current"] == {"averageValue": "400"}
    assert metric["query"] == 'rps{pod=~"a|b|c|d"}'
    assert metric["pods"] == {"ready": ["a", "b"], "unready": ["c"], "missing": ["d"],
                              "ignored": [], "values": {"a": "400", "b": "400", "c": "400"}}


def test_the_kept_decision_holds_each_pods_value_not_its_sample() -> None:
    """A target's last decision lives until its next pass: per-pod metrics keep each pod's
    value (what status shows), not the samples they were read as, nor their times."""
    state = state_after_one_pass()
    assert state.last_decision is not None
    (outcome,) = state.last_decision.metrics
    kept = outcome.values
    assert isinstance(kept, PodValues)
    assert kept.values == {"a": Milli(400_000), "b": Milli(400_000), "c": Milli(400_000)}
    assert kept.query == 'rps{pod=~"a|b|c|d"}'
    assert all(type(value) is int for value in kept.values.values())


def test_bounds_and_each_stage_of_the_decision() -> None:
    """min/max in force, the proposal, and the policy that cut the step with its next time."""
    behavior = Behavior(scale_up=ScalingRules(policies=(
        ScalingPolicy(type=PolicyType.PODS, value=1, period_seconds=60),)))
    body = state_after_one_pass(behavior=behavior).to_json()
    assert (body["minReplicas"], body["maxReplicas"], body["desiredReplicas"]) == (1, 10, 3)
    assert body["decision"]["limit"] == {
        "reason": "ScaleUpLimit", "limit": 3, "selectPolicy": "Max",
        "policy": {"type": "Pods", "value": 1, "periodSeconds": 60},
        "nextStepAt": "2027-01-15T08:01:00Z"}
    assert body["scaleDown"] == {"earliest": "2027-01-15T08:05:00Z"}
    json.dumps(body, allow_nan=False)  # every value is JSON: no NaN, no Infinity, no None key


def test_a_plan_says_what_it_would_do() -> None:
    """In a plan AbleToScale says the rescale that would happen, not upstream's at-rest text."""
    planned = state_after_one_pass().to_json(planned=True)
    able = next(c for c in planned["conditions"] if c["type"] == "AbleToScale")
    assert (able["reason"], able["message"]) == (
        "WouldScale", "would rescale 2 -> 4: pods metric rps above target")
    daemon = state_after_one_pass().to_json()
    assert next(c for c in daemon["conditions"]
                if c["type"] == "AbleToScale")["reason"] == "ReadyForNewScale"


def test_recent_scale_events_newest_first() -> None:
    """Scale events still counted by a policy period are listed, newest first."""
    state = TargetState(key="k", history=History(
        scale_up_events=(ScaleEvent(change=2, timestamp=NOW - 60),),
        scale_down_events=(ScaleEvent(change=1, timestamp=NOW - 10),
                           ScaleEvent(change=3, timestamp=NOW - 900, outdated=True))))
    assert state.to_json()["scaleEvents"] == [
        {"time": "2027-01-15T07:59:50Z", "direction": "down", "change": 1},
        {"time": "2027-01-15T07:59:00Z", "direction": "up", "change": 2}]


def test_a_target_never_decided_shows_what_was_observed() -> None:
    """No decision yet (paused): the observed count, no invented desired count."""
    body = TargetState(key="k", current_replicas=2, pause="config paused",
                       last_outcome="paused").to_json()
    assert (body["currentReplicas"], body["paused"]) == (2, "config paused")
    assert "desiredReplicas" not in body


def test_the_generation_a_pass_acted_on_is_shown_with_its_conditions() -> None:
    """Upstream's status.observedGeneration and conditions[].observedGeneration: none
    before a pass has ended; then the generation of the table the pass acted on."""
    state = TargetState(key="k")
    assert state.to_json()["observedGeneration"] is None
    state.conditions = merge_conditions([], (GOT_SCALE,), NOW)
    assert "observedGeneration" not in state.to_json()["conditions"][0]  # mid-pass
    state.settle("5e1f2a3b4c6d")
    body = state.to_json()
    assert body["observedGeneration"] == "5e1f2a3b4c6d"
    assert body["conditions"][0]["observedGeneration"] == "5e1f2a3b4c6d"


def test_a_stabilization_window_is_whole_seconds() -> None:
    """windowSeconds is an integer, from a config's behavior or the default window alike, and
    in either build: the compiled core holds every window as a float (setup.py)."""
    quiet = {name: PodSample(value=Milli(10_000), timestamp=NOW + 15) for name in "abcd"}
    pods = [Pod(name=name, start_time=0.0) for name in "abcd"]
    for behavior, window in (
            (None, 300),
            (Behavior(scale_down=ScalingRules(stabilization_window_seconds=600)), 600)):
        busy = state_after_one_pass(behavior=behavior).last_decision
        assert busy is not None
        scaled = busy.desired_replicas
        held = decide(DecisionInput(spec=AutoscalerSpec(min_replicas=1, max_replicas=10, metrics=(RPS,),
                                          behavior=behavior),
                                    scale=ScaleState(spec_replicas=scaled, status_replicas=scaled),
                                    metrics=[PodMetricValues(samples=quiet)], pods=pods,
                                    history=busy.history, now=NOW + 15))
        body = TargetState(key="k", last_decision=held, last_reconcile=NOW + 15,
                           history=held.history).to_json()
        stabilization = body["decision"]["stabilization"]
        assert stabilization["windowSeconds"] == window
        assert type(stabilization["windowSeconds"]) is int, stabilization


def test_a_target_keeps_the_newest_scale_writes_it_saw_land() -> None:
    """The last ``MAX_SCALE_EVENTS`` writes, newest last; ``/status`` shows them newest
    first."""
    state = TargetState(key="shop/Deployment/web")
    for step in range(MAX_SCALE_EVENTS + 2):
        state.note_scale(previous=step + 1, new=step + 2, at=1_000.0 + step)
    assert len(state.scaled) == MAX_SCALE_EVENTS
    assert state.scaled[0] == (1_002.0, 3, 4)
    assert state.scaled[-1] == (1_011.0, 12, 13)
    shown = state.to_json()["scaleEvents"]
    assert len(shown) == MAX_SCALE_EVENTS
    assert shown[0]["time"] > shown[-1]["time"]
