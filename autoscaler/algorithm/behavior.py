"""Stabilization windows, rate limits and scale events: the normalization in ``horizontal.go``.

Two paths, chosen as upstream chooses them: without ``behavior`` only a downscale
stabilization window, the scale-up limit max(2 x current, 4) and the min/max clamp; with
``behavior`` (defaults filled field by field) both windows and the Pods/Percent policies over
the recorded scale events. History is passed in and returned, never mutated.
"""

from __future__ import annotations

import math

from autoscaler.algorithm.model import (
    AlgorithmSettings,
    Behavior,
    History,
    PolicyType,
    Recommendation,
    ScaleEvent,
    ScalingPolicy,
    ScalingRules,
    Seconds,
    SelectPolicy,
)
from autoscaler.algorithm.reasons import Reason
from autoscaler.algorithm.replicas import MAX_INT32
from autoscaler.algorithm.stage_values import Normalized, ResolvedBehavior, Rules, Tolerances

MIN_INT32 = -(2**31)
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4.0

DEFAULT_SCALE_UP_POLICIES = (
    ScalingPolicy(type=PolicyType.PODS, value=4, period_seconds=15),
    ScalingPolicy(type=PolicyType.PERCENT, value=100, period_seconds=15),
)
DEFAULT_SCALE_DOWN_POLICIES = (
    ScalingPolicy(type=PolicyType.PERCENT, value=100, period_seconds=15),
)


def resolve_behavior(behavior: Behavior, settings: AlgorithmSettings) -> ResolvedBehavior:
    """Fill defaults field by field (``GenerateHPAScale{Up,Down}Rules``).

    An unset scale-down window takes the controller's downscale stabilization
    (``maybeInitScaleDownStabilizationWindow``).
    """
    up = behavior.scale_up or ScalingRules()
    down = behavior.scale_down or ScalingRules()
    return ResolvedBehavior(
        scale_up=Rules(
            stabilization_window_seconds=_or(up.stabilization_window_seconds, 0),
            select_policy=up.select_policy or SelectPolicy.MAX,
            policies=DEFAULT_SCALE_UP_POLICIES if up.policies is None else up.policies,
            tolerance=up.tolerance,
        ),
        scale_down=Rules(
            stabilization_window_seconds=_or(
                down.stabilization_window_seconds, int(settings.downscale_stabilization)
            ),
            select_policy=down.select_policy or SelectPolicy.MAX,
            policies=DEFAULT_SCALE_DOWN_POLICIES if down.policies is None else down.policies,
            tolerance=down.tolerance,
        ),
    )


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def tolerances_for(behavior: Behavior | None, settings: AlgorithmSettings) -> Tolerances:
    """Per-direction tolerances (KEP-4951); an unset one falls back to the global tolerance."""
    up = behavior.scale_up.tolerance if behavior and behavior.scale_up else None
    down = behavior.scale_down.tolerance if behavior and behavior.scale_down else None
    return Tolerances(
        scale_up=settings.tolerance if up is None else up,
        scale_down=settings.tolerance if down is None else down,
    )


# --- recommendations (stabilization) ------------------------------------------------------


def _record(
    history: History, proposal: int, now: Seconds, old_index: int | None
) -> History:
    """Record the unstabilized proposal, reusing the last old slot as upstream does."""
    entry = Recommendation(replicas=proposal, timestamp=now)
    recs = list(history.recommendations)
    if old_index is None:
        recs.append(entry)
    else:
        recs[old_index] = entry
    return History(
        recommendations=tuple(recs),
        scale_up_events=history.scale_up_events,
        scale_down_events=history.scale_down_events,
    )


def _timestamp(rec: Recommendation) -> Seconds:
    return rec.timestamp


def essential_recommendations(
    recommendations: tuple[Recommendation, ...],
) -> tuple[Recommendation, ...]:
    """The recommendations that can still decide a stabilization, oldest first.

    A window only ever asks for the largest (scale-down) or the smallest (scale-up)
    recommendation made after some instant. A recommendation with a later one at least as
    large and a later one at most as small can answer neither, for any window at any later
    ``now``: it leaves every window before them. So dropping it changes no stabilized count
    and no release time; in a steady run (one count recommended pass after pass) one entry
    stands for a whole window. The history store keeps only these."""
    if len({rec.replicas for rec in recommendations}) <= 1:  # steady: the newest stands
        return (max(recommendations, key=_timestamp),) if recommendations else ()
    kept: list[Recommendation] = []
    later_max, later_min = -1, MAX_INT32 + 1
    for rec in sorted(recommendations, key=_timestamp, reverse=True):
        if rec.replicas > later_max or rec.replicas < later_min:
            kept.append(rec)
        later_max, later_min = max(later_max, rec.replicas), min(later_min, rec.replicas)
    kept.reverse()
    return tuple(kept)


def essential_history(history: History) -> History:
    """``history`` with only its ``essential_recommendations`` (the same object when none
    can go): what a daemon keeps between passes. Upstream's list holds every recommendation
    of the longest window (11 a target at a 30 s period and the default 5 minutes); kept so,
    one replica of 10,500 targets held 9 MB more (``bench/ring_scale.py``: 224 MB, 215)."""
    kept = essential_recommendations(history.recommendations)
    if len(kept) == len(history.recommendations):
        return history
    return History(recommendations=kept, scale_up_events=history.scale_up_events,
                   scale_down_events=history.scale_down_events)


def stabilize_downscale(
    history: History, proposal: int, *, now: Seconds, window: Seconds
) -> tuple[int, History]:
    """``stabilizeRecommendation``: the largest recommendation within the window wins."""
    cutoff = now - window
    highest = proposal
    old_index: int | None = None
    for index, rec in enumerate(history.recommendations):
        if rec.timestamp < cutoff:
            old_index = index
        elif rec.replicas > highest:
            highest = rec.replicas
    return highest, _record(history, proposal, now, old_index)


def stabilize_with_behavior(
    history: History, proposal: int, *, current: int, now: Seconds, behavior: ResolvedBehavior
) -> tuple[int, History]:
    """``stabilizeRecommendationWithBehaviors``: clamp current into [min recent, max recent]."""
    up_cutoff = now - behavior.scale_up.stabilization_window_seconds
    down_cutoff = now - behavior.scale_down.stabilization_window_seconds
    up_bound = down_bound = proposal
    old_index: int | None = None
    for index, rec in enumerate(history.recommendations):
        if rec.timestamp > up_cutoff:
            up_bound = min(up_bound, rec.replicas)
        if rec.timestamp > down_cutoff:
            down_bound = max(down_bound, rec.replicas)
        if rec.timestamp < up_cutoff and rec.timestamp < down_cutoff:
            old_index = index
    stabilized = min(max(current, up_bound), down_bound)
    return stabilized, _record(history, proposal, now, old_index)


# --- rate limits --------------------------------------------------------------------------


def replicas_changed_in_period(events: tuple[ScaleEvent, ...], period: int, now: Seconds) -> int:
    """``getReplicasChangePerPeriod``: the sum of changes strictly newer than now - period."""
    cutoff = now - period
    return sum(event.change for event in events if event.timestamp > cutoff)


def _period_start(current: int, history: History, period: int, now: Seconds) -> int:
    added = replicas_changed_in_period(history.scale_up_events, period, now)
    removed = replicas_changed_in_period(history.scale_down_events, period, now)
    return current - added + removed


def scale_up_limit(current: int, history: History, rules: Rules, now: Seconds) -> int:
    """``calculateScaleUpLimitWithScalingRules``."""
    if rules.select_policy is SelectPolicy.DISABLED:
        return current
    pick_min = rules.select_policy is SelectPolicy.MIN
    result = MAX_INT32 if pick_min else MIN_INT32
    for policy in rules.policies:
        start = _period_start(current, history, policy.period_seconds, now)
        if policy.type is PolicyType.PODS:
            proposed = start + policy.value
        else:
            # Rounded up so that a small percentage can still add a pod.
            proposed = math.ceil(float(start) * (1 + float(policy.value) / 100))
        result = min(result, proposed) if pick_min else max(result, proposed)
    return result


def scale_down_limit(current: int, history: History, rules: Rules, now: Seconds) -> int:
    """``calculateScaleDownLimitWithBehaviors``."""
    if rules.select_policy is SelectPolicy.DISABLED:
        return current
    pick_min = rules.select_policy is SelectPolicy.MIN
    result = MIN_INT32 if pick_min else MAX_INT32
    for policy in rules.policies:
        start = _period_start(current, history, policy.period_seconds, now)
        if policy.type is PolicyType.PODS:
            proposed = start - policy.value
        else:
            # int32(float64) truncates toward zero.
            proposed = int(float(start) * (1 - float(policy.value) / 100))
        # "Min" picks the smallest change, which for a scale-down is the largest count.
        result = max(result, proposed) if pick_min else min(result, proposed)
    return result


def convert_with_behavior_rate(  # noqa: PLR0917 - mirrors upstream's NormalizationArg
    history: History,
    current: int,
    stabilized: int,
    min_replicas: int,
    max_replicas: int,
    behavior: ResolvedBehavior,
    now: Seconds,
) -> tuple[int, Reason]:
    """``convertDesiredReplicasWithBehaviorRate``: the policies' rate limits, then min/max
    in the direction of the change only."""
    if stabilized > current:
        # We should not scale up further until old scale-up events fall out of the periods.
        limit = max(scale_up_limit(current, history, behavior.scale_up, now), current)
        ceiling, reason = (
            (limit, Reason.SCALE_UP_LIMIT) if max_replicas > limit
            else (max_replicas, Reason.TOO_MANY_REPLICAS)
        )
        if stabilized > ceiling:
            return ceiling, reason
    elif stabilized < current:
        limit = min(scale_down_limit(current, history, behavior.scale_down, now), current)
        floor, reason = (
            (limit, Reason.SCALE_DOWN_LIMIT) if min_replicas < limit
            else (min_replicas, Reason.TOO_FEW_REPLICAS)
        )
        if stabilized < floor:
            return floor, reason
    return stabilized, Reason.DESIRED_WITHIN_RANGE


def normalize_with_behavior(
    *,
    history: History,
    current: int,
    proposal: int,
    min_replicas: int,
    max_replicas: int,
    behavior: ResolvedBehavior,
    now: Seconds,
) -> Normalized:
    """``normalizeDesiredReplicasWithBehaviors``."""
    stabilized, history = stabilize_with_behavior(
        history, proposal, current=current, now=now, behavior=behavior
    )
    if stabilized == proposal:
        stabilization_reason = Reason.READY_FOR_NEW_SCALE
    elif proposal >= current:
        stabilization_reason = Reason.SCALE_UP_STABILIZED
    else:
        stabilization_reason = Reason.SCALE_DOWN_STABILIZED
    desired, limit_reason = convert_with_behavior_rate(
        history, current, stabilized, min_replicas, max_replicas, behavior, now
    )
    return Normalized(
        stabilized=stabilized,
        desired=desired,
        stabilization_reason=stabilization_reason,
        limit_reason=limit_reason,
        history=history,
    )


def default_scale_up_limit(current: int, *, factor: float = SCALE_UP_LIMIT_FACTOR) -> int:
    """``calculateScaleUpLimit``: max(factor x current, 4) (upstream's tests set factor 8)."""
    return int(max(factor * current, SCALE_UP_LIMIT_MINIMUM))


def convert_with_rules(
    current: int,
    stabilized: int,
    min_replicas: int,
    max_replicas: int,
    *,
    scale_up_limit_factor: float = SCALE_UP_LIMIT_FACTOR,
) -> tuple[int, Reason]:
    """``convertDesiredReplicasWithRules``: min first, then max(2 x current, 4) and max."""
    # Do not scale up too fast: bogus usage reports once caused runaway scale-ups (#32304).
    up_limit = default_scale_up_limit(current, factor=scale_up_limit_factor)
    ceiling, ceiling_reason = (
        (up_limit, Reason.SCALE_UP_LIMIT) if max_replicas > up_limit
        else (max_replicas, Reason.TOO_MANY_REPLICAS)
    )
    if stabilized < min_replicas:
        return min_replicas, Reason.TOO_FEW_REPLICAS
    if stabilized > ceiling:
        return ceiling, ceiling_reason
    return stabilized, Reason.DESIRED_WITHIN_RANGE


def rate_limited(  # noqa: PLR0917 - the normalization's own arguments
    history: History,
    current: int,
    desired: int,
    min_replicas: int,
    max_replicas: int,
    behavior: ResolvedBehavior | None,
    now: Seconds,
) -> int:
    """How far the rate limits and bounds let ``current`` move toward ``desired`` now, with
    no stabilization: the limits a decision applies after its windows (``behavior`` None:
    upstream's rules without one). A step decided earlier is allowed now iff this returns
    its count."""
    if behavior is None:
        return convert_with_rules(current, desired, min_replicas, max_replicas)[0]
    return convert_with_behavior_rate(history, current, desired, min_replicas, max_replicas,
                                      behavior, now)[0]


def normalize_without_behavior(
    *,
    history: History,
    current: int,
    proposal: int,
    min_replicas: int,
    max_replicas: int,
    downscale_window: Seconds,
    now: Seconds,
) -> Normalized:
    """``normalizeDesiredReplicas`` and ``convertDesiredReplicasWithRules``."""
    stabilized, history = stabilize_downscale(
        history, proposal, now=now, window=downscale_window
    )
    stabilization_reason = (
        Reason.READY_FOR_NEW_SCALE if stabilized == proposal else Reason.SCALE_DOWN_STABILIZED
    )
    desired, limit_reason = convert_with_rules(current, stabilized, min_replicas, max_replicas)
    return Normalized(
        stabilized=stabilized,
        desired=desired,
        stabilization_reason=stabilization_reason,
        limit_reason=limit_reason,
        history=history,
    )


# --- scale events -------------------------------------------------------------------------


def record_scale_event(
    history: History,
    *,
    behavior: Behavior | None,
    previous: int,
    new: int,
    now: Seconds,
    settings: AlgorithmSettings,
) -> History:
    """``storeScaleEvent``: call after a successful scale write. Without behavior, nothing."""
    if behavior is None or new == previous:
        return history
    resolved = resolve_behavior(behavior, settings)
    scaling_up = new > previous
    rules = resolved.scale_up if scaling_up else resolved.scale_down
    events = history.scale_up_events if scaling_up else history.scale_down_events
    longest = max((p.period_seconds for p in rules.policies), default=0)
    cutoff = now - longest
    # Events older than the longest period are marked outdated; the last one's slot is reused.
    marked = [
        ScaleEvent(change=e.change, timestamp=e.timestamp, outdated=True)
        if e.timestamp < cutoff else e
        for e in events
    ]
    reusable = [i for i, event in enumerate(marked) if event.outdated]
    entry = ScaleEvent(change=abs(new - previous), timestamp=now)
    if reusable:
        marked[reusable[-1]] = entry
    else:
        marked.append(entry)
    if scaling_up:
        return History(
            recommendations=history.recommendations,
            scale_up_events=tuple(marked),
            scale_down_events=history.scale_down_events,
        )
    return History(
        recommendations=history.recommendations,
        scale_up_events=history.scale_up_events,
        scale_down_events=tuple(marked),
    )
