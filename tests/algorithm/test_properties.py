"""Invariants of the core, checked with hypothesis over random pods, metrics, specs and histories."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.algorithm import (
    AutoscalerSpec,
    Behavior,
    ConditionStatus,
    Container,
    Decision,
    DecisionInput,
    ExternalMetricValues,
    History,
    MetricSourceType,
    MetricUnavailable,
    MetricValues,
    Milli,
    Pod,
    PodMetricValues,
    PodPhase,
    PodSample,
    PolicyType,
    Recommendation,
    ScaleEvent,
    ScaleState,
    ScalingPolicy,
    ScalingRules,
    SelectPolicy,
    decide,
    record_scale_event,
    resolve_behavior,
)
from autoscaler.algorithm.behavior import (
    essential_history,
    essential_recommendations,
    normalize_with_behavior,
    stabilize_downscale,
    stabilize_with_behavior,
    tolerances_for,
)
from autoscaler.algorithm.explain import window_release
from autoscaler.algorithm.stage_values import ResolvedBehavior, Rules
from tests.algorithm.builders import (
    COOL,
    HOT,
    NOW,
    TESTING,
    ZERO,
    cpu_spec,
    external_spec,
    pods_spec,
    sample,
)

MODEST = settings(max_examples=200, deadline=None)

# --- strategies ---------------------------------------------------------------------------

policies = st.builds(
    ScalingPolicy,
    type=st.sampled_from(PolicyType),
    value=st.integers(1, 200),
    period_seconds=st.integers(1, 300),
)
rules = st.builds(
    ScalingRules,
    stabilization_window_seconds=st.none() | st.integers(0, 600),
    select_policy=st.none() | st.sampled_from(SelectPolicy),
    policies=st.none() | st.lists(policies, max_size=3).map(tuple),
    tolerance=st.none() | st.floats(0.0, 0.5),
)
behaviors = st.none() | st.builds(Behavior, scale_up=st.none() | rules, scale_down=st.none() | rules)
ages = st.floats(0.0, 900.0)
histories = st.builds(
    History,
    recommendations=st.lists(
        st.builds(lambda r, a: Recommendation(replicas=r, timestamp=NOW - a), st.integers(0, 40), ages),
        max_size=6,
    ).map(tuple),
    scale_up_events=st.lists(
        st.builds(lambda c, a: ScaleEvent(change=c, timestamp=NOW - a), st.integers(1, 10), ages),
        max_size=4,
    ).map(tuple),
    scale_down_events=st.lists(
        st.builds(lambda c, a: ScaleEvent(change=c, timestamp=NOW - a), st.integers(1, 10), ages),
        max_size=4,
    ).map(tuple),
)


@st.composite
def pods_and_samples(draw: st.DrawFn) -> tuple[tuple[Pod, ...], dict[str, PodSample]]:
    """Pods in every phase and readiness state, some without a sample, some superfluous."""
    count = draw(st.integers(1, 8))
    pods, samples = [], {}
    for i in range(count):
        name = f"p{i}"
        pods.append(Pod(
            name=name,
            phase=draw(st.sampled_from(PodPhase)),
            ready=draw(st.sampled_from([ConditionStatus.TRUE, ConditionStatus.FALSE, None])),
            start_time=draw(st.sampled_from([None, ZERO, HOT, COOL])),
            ready_transition_time=draw(st.sampled_from([ZERO, HOT, COOL])),
            deleting=draw(st.booleans()),
            containers=(Container(name="c", requests={"cpu": draw(st.integers(1, 4000))}),),
        ))
        if draw(st.booleans()) or i == 0:
            samples[name] = sample(draw(st.integers(0, 20000)), timestamp=NOW)
    if draw(st.booleans()):
        samples["stale"] = sample(draw(st.integers(0, 20000)))
    return tuple(pods), samples


@st.composite
def specs(draw: st.DrawFn, metric_count: int) -> tuple[AutoscalerSpec, int]:
    """A spec with cpu/pods/external metrics and a current count within [min, max]."""
    low = draw(st.integers(0, 5))
    high = draw(st.integers(max(low, 1), 30))
    choices = [cpu_spec(draw(st.integers(1, 200))), pods_spec(draw(st.integers(1, 20000))),
               external_spec(value=draw(st.integers(1, 20000)))]
    metrics = tuple(draw(st.sampled_from(choices)) for _ in range(metric_count))
    current = draw(st.integers(max(low, 1), high))
    hpa = AutoscalerSpec(min_replicas=low, max_replicas=high, metrics=metrics,
                         behavior=draw(behaviors))
    return hpa, current


def values_for(hpa: AutoscalerSpec, samples: dict[str, PodSample], usage: int) -> list[MetricValues]:
    out: list[MetricValues] = []
    for metric in hpa.metrics:
        if metric.type is MetricSourceType.EXTERNAL:
            out.append(ExternalMetricValues(values=(Milli(usage),)))
        else:
            out.append(PodMetricValues(samples=samples))
    return out


def run(hpa: AutoscalerSpec, current: int, metrics: list[MetricValues], pods: tuple[Pod, ...],
        history: History) -> Decision:
    return decide(DecisionInput(spec=hpa,
                                scale=ScaleState(spec_replicas=current, status_replicas=current),
                                metrics=metrics, pods=pods, history=history, now=NOW,
                                settings=TESTING))


# --- properties -----------------------------------------------------------------------------


@MODEST
@given(specs(metric_count=2), pods_and_samples(), histories, st.integers(0, 40000))
def test_result_within_bounds(
    drawn: tuple[AutoscalerSpec, int], pods: tuple[tuple[Pod, ...], dict[str, PodSample]],
    history: History, usage: int,
) -> None:
    """Whatever the metrics and history, a count within [min, max] stays within [min, max]."""
    hpa, current = drawn
    decision = run(hpa, current, values_for(hpa, pods[1], usage), pods[0], history)
    assert hpa.min_replicas <= decision.desired_replicas <= hpa.max_replicas


@MODEST
@given(specs(metric_count=1), st.integers(1, 8), st.integers(20, 20000), histories, st.data())
def test_no_change_within_tolerance(
    drawn: tuple[AutoscalerSpec, int], count: int, target: int, history: History,
    data: st.DataObject,
) -> None:
    """Ready pods averaging within the tolerances keep the current count: with behavior for
    any history, without it for a history no higher than the current count."""
    hpa, current = drawn
    hpa = AutoscalerSpec(min_replicas=hpa.min_replicas, max_replicas=hpa.max_replicas,
                         metrics=(pods_spec(target),), behavior=hpa.behavior)
    tol = tolerances_for(hpa.behavior, TESTING)  # per-direction tolerances count (KEP-4951)
    low = math.ceil(target * (1 - 0.99 * tol.scale_down))
    band = st.integers(low, max(low, math.floor(target * (1 + 0.99 * tol.scale_up))))
    values = data.draw(st.lists(band, min_size=count, max_size=count))
    pods = tuple(Pod(name=f"p{i}") for i in range(count))
    samples = PodMetricValues(samples={f"p{i}": sample(v) for i, v in enumerate(values)})
    if hpa.behavior is None:
        history = History(recommendations=(Recommendation(replicas=current, timestamp=NOW - 1),))
    assert run(hpa, current, [samples], pods, history).desired_replicas == current


@MODEST
@given(specs(metric_count=2), pods_and_samples(), histories, st.integers(0, 40000),
       st.integers(0, 1))
def test_invalid_metrics_never_scale_down(
    drawn: tuple[AutoscalerSpec, int], pods: tuple[tuple[Pod, ...], dict[str, PodSample]],
    history: History, usage: int, broken: int,
) -> None:
    """With any metric unavailable, the count never drops below the current one."""
    hpa, current = drawn
    metrics = values_for(hpa, pods[1], usage)
    metrics[broken] = MetricUnavailable(reason="query failed")
    decision = run(hpa, current, metrics, pods[0], history)
    assert decision.desired_replicas >= current


@MODEST
@given(behaviors.filter(lambda b: b is not None), histories, st.integers(0, 40),
       st.integers(0, 40))
def test_stabilization_with_behavior_never_overshoots(
    behavior: Behavior, history: History, current: int, proposal: int
) -> None:
    """A scale-down lands on the highest recommendation in the down window, a scale-up on the
    lowest in the up window, and the result never moves against the proposal."""
    resolved = resolve_behavior(behavior, TESTING)
    got, _ = stabilize_with_behavior(history, proposal, current=current, now=NOW,
                                     behavior=resolved)
    down_cut = NOW - resolved.scale_down.stabilization_window_seconds
    up_cut = NOW - resolved.scale_up.stabilization_window_seconds
    in_down = [proposal] + [r.replicas for r in history.recommendations if r.timestamp > down_cut]
    in_up = [proposal] + [r.replicas for r in history.recommendations if r.timestamp > up_cut]
    if got < current:
        assert got == max(in_down)
        assert proposal < current
    if got > current:
        assert got == min(in_up)
        assert proposal > current


@MODEST
@given(histories, st.integers(0, 40), st.floats(0.0, 900.0))
def test_downscale_window_keeps_the_highest(history: History, proposal: int, window: float) -> None:
    """Without behavior the result is the highest recommendation within the window."""
    got, updated = stabilize_downscale(history, proposal, now=NOW, window=window)
    recent = [r.replicas for r in history.recommendations if r.timestamp >= NOW - window]
    assert got == max([proposal, *recent])
    assert Recommendation(replicas=proposal, timestamp=NOW) in updated.recommendations


direction_rules = st.builds(
    ScalingRules,
    stabilization_window_seconds=st.integers(0, 120),
    select_policy=st.sampled_from(SelectPolicy),
    policies=st.lists(policies, min_size=1, max_size=3).map(tuple),  # API validation: >= 1
)


@settings(max_examples=100, deadline=None)
@given(direction_rules, direction_rules, st.integers(1, 60),
       st.lists(st.tuples(st.integers(0, 150), st.floats(1.0, 40.0)), min_size=5, max_size=60))
def test_policies_hold_over_every_period(
    up: ScalingRules, down: ScalingRules, start: int, steps: list[tuple[int, float]]
) -> None:
    """Over many passes, every change respects its direction's policies over their periods
    (Max: the most permissive policy, Min: the strictest, Disabled: none), counted from our
    own log of changes, not from the history the core keeps."""
    behavior = Behavior(scale_up=up, scale_down=down)
    resolved = resolve_behavior(behavior, TESTING)
    history, now, current = History(), NOW, start
    log: list[tuple[float, int]] = []  # our own record: (time, signed change)
    for proposal, dt in steps:
        now += dt
        result = normalize_with_behavior(
            history=history, current=current, proposal=proposal, min_replicas=1,
            max_replicas=150, behavior=resolved, now=now,
        )
        history = result.history
        if result.desired != current:
            rising = result.desired > current
            bound = _policy_bound(log, now, current, up if rising else down, up=rising)
            assert bound is not None, "a disabled direction changed"
            assert (result.desired <= bound) if rising else (result.desired >= bound)
            log.append((now, result.desired - current))
            history = record_scale_event(history, behavior=behavior, previous=current,
                                         new=result.desired, now=now, settings=TESTING)
            current = result.desired


def _policy_bound(
    log: list[tuple[float, int]], now: float, current: int, rules: ScalingRules, *, up: bool
) -> int | None:
    """The furthest count the policies allow from ``current``; None if none allows a change."""
    assert rules.policies
    if rules.select_policy is SelectPolicy.DISABLED:
        return None
    bounds = []
    for policy in rules.policies:
        # The count when the policy's period started (strictly newer changes are undone).
        start = current - sum(change for at, change in log if at > now - policy.period_seconds)
        if policy.type is PolicyType.PODS:
            bounds.append(start + policy.value if up else start - policy.value)
        elif up:
            bounds.append(math.ceil(start * (1 + policy.value / 100)))
        else:
            bounds.append(int(start * (1 - policy.value / 100)))
    most_change = max if up else min
    least_change = min if up else max
    return (most_change if rules.select_policy is SelectPolicy.MAX else least_change)(bounds)


RECOMMENDATION_LISTS = st.lists(
    st.builds(lambda replicas, at: Recommendation(replicas=replicas, timestamp=float(at)),
              st.integers(0, 8), st.integers(0, 600)),
    max_size=25)


@settings(max_examples=300, deadline=None)
@given(recs=RECOMMENDATION_LISTS, proposal=st.integers(0, 8), current=st.integers(0, 8),
       later=st.integers(0, 700), up=st.integers(0, 400), down=st.integers(0, 400))
def test_the_stored_recommendations_decide_every_later_window_as_all_of_them(
    *, recs: list[Recommendation], proposal: int, current: int, later: int, up: int, down: int,
) -> None:
    """The history store keeps only ``essential_recommendations``: every stabilization at
    any later instant, for any windows, and every window's release time, are the same as
    with all of them (what makes writing the history after every pass cheap)."""
    everything = History(recommendations=tuple(recs))
    kept = History(recommendations=essential_recommendations(tuple(recs)))
    now = float(max((r.timestamp for r in recs), default=0.0) + later)
    rules = ResolvedBehavior(
        scale_up=Rules(stabilization_window_seconds=up, select_policy=SelectPolicy.MAX,
                       policies=(), tolerance=None),
        scale_down=Rules(stabilization_window_seconds=down, select_policy=SelectPolicy.MAX,
                         policies=(), tolerance=None))
    assert (stabilize_with_behavior(everything, proposal, current=current, now=now,
                                    behavior=rules)[0]
            == stabilize_with_behavior(kept, proposal, current=current, now=now,
                                       behavior=rules)[0])
    assert (stabilize_downscale(everything, proposal, now=now, window=down)[0]
            == stabilize_downscale(kept, proposal, now=now, window=down)[0])
    for count in range(9):
        for is_down, window in ((True, float(down)), (False, float(up))):
            assert (window_release(everything, count=count, window=window, now=now,
                                   down=is_down)
                    == window_release(kept, count=count, window=window, now=now, down=is_down))
    assert len(kept.recommendations) <= len({r.replicas for r in recs}) * 2


@settings(max_examples=200, deadline=None)
@given(passes=st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8), st.integers(1, 90)),
                       min_size=1, max_size=40),
       up=st.integers(0, 400), down=st.integers(0, 400), with_behavior=st.booleans())
def test_a_history_cut_to_its_essentials_after_every_pass_decides_every_pass_alike(
    *, passes: list[tuple[int, int, int]], up: int, down: int, with_behavior: bool,
) -> None:
    """What the daemon keeps between passes (``essential_history``, after each) stabilizes
    every pass of a run as upstream's whole list does, and lets each window go at the same
    moment: no step earlier, none later."""
    rules = ResolvedBehavior(
        scale_up=Rules(stabilization_window_seconds=up, select_policy=SelectPolicy.MAX,
                       policies=(), tolerance=None),
        scale_down=Rules(stabilization_window_seconds=down, select_policy=SelectPolicy.MAX,
                         policies=(), tolerance=None))
    everything = kept = History()
    now = 0.0
    for proposal, current, step in passes:
        now += step
        if with_behavior:
            stabilized, everything = stabilize_with_behavior(
                everything, proposal, current=current, now=now, behavior=rules)
            again, kept = stabilize_with_behavior(kept, proposal, current=current, now=now,
                                                  behavior=rules)
        else:
            stabilized, everything = stabilize_downscale(everything, proposal, now=now,
                                                         window=down)
            again, kept = stabilize_downscale(kept, proposal, now=now, window=down)
        assert again == stabilized
        kept = essential_history(kept)
        for count in range(9):
            assert (window_release(everything, count=count, window=float(down), now=now,
                                   down=True)
                    == window_release(kept, count=count, window=float(down), now=now,
                                      down=True))
    assert len(kept.recommendations) <= 9 * 2
