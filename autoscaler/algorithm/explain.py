"""Why a step was cut and when the history lets go: the explanation ``Decision`` carries.

Upstream's conditions say *that* a stabilization window held a recommendation or a policy
limited a step; an operator also needs *which* policy, and *when* the next step or the held
scale-down can happen. These are pure functions of what ``decide`` already has (history,
rules, counts, ``now``), computed only when a window held or a limit cut (``hold``,
``step_limit``) or when someone asks (``earliest_scale_down``), so a pass at rest pays nothing.

Every time answers "if nothing else changes": the metrics keep proposing what they propose
now and no other scale event is recorded. A window or period ends at ``timestamp + length``;
upstream's windows exclude an entry exactly at the edge with or without behavior by one
comparison's difference, which is below one pass and not shown.
"""

from __future__ import annotations

from collections.abc import Iterable

from autoscaler.algorithm.behavior import scale_down_limit, scale_up_limit
from autoscaler.algorithm.decision_values import Decision, ScaleDownRules, StepLimit, WindowHold
from autoscaler.algorithm.model import (
    History,
    ScaleEvent,
    ScalingPolicy,
    Seconds,
    SelectPolicy,
)
from autoscaler.algorithm.reasons import Reason
from autoscaler.algorithm.stage_values import Rules


def hold(
    history: History, *, reason: Reason, proposal: int, stabilized: int, window: Seconds,
    now: Seconds,
) -> WindowHold:
    """The window that moved ``proposal`` to ``stabilized``, and when it lets ``stabilized``
    go (the same moment ``earliest_scale_down`` finds for a scale-down below it).

    ``history`` already holds this pass's recommendation (which equals ``proposal``)."""
    down = reason is Reason.SCALE_DOWN_STABILIZED
    return WindowHold(reason=reason, window_seconds=window, held_at=stabilized,
                      releases_at=window_release(history, count=stabilized, window=window,
                                                 now=now, down=down))


def window_release(
    history: History, *, count: int, window: Seconds, now: Seconds, down: bool,
) -> Seconds | None:
    """When a stabilization window stops holding ``count``: the moment its last
    recommendation of ``count`` or more (``down``; of ``count`` or fewer for a scale-up)
    leaves it; ``None`` if none is in it now.

    Upstream counts a recommendation while ``timestamp`` is after ``now - window``
    (``stabilizeRecommendationWithBehaviors``): a stabilized count below the current one
    needs every recommendation at or above it gone, whatever lower ones remain; so the
    window lets ``count`` go at ``timestamp + window`` of the newest of those, not when the
    proposal itself is reached.
    """
    holding = [rec.timestamp + window for rec in history.recommendations
               if rec.timestamp + window > now
               and (rec.replicas >= count if down else rec.replicas <= count)]
    return max(holding, default=None)


def rate_limit(
    history: History, *, reason: Reason, rules: Rules, current: int, limit: int,
    now: Seconds,
) -> StepLimit:
    """The behavior policy that set ``limit`` for a step from ``current``, and when the
    next step may follow (``limit`` reached now, then each period end in turn)."""
    up = reason is Reason.SCALE_UP_LIMIT
    if rules.select_policy is SelectPolicy.DISABLED or not rules.policies:
        return StepLimit(reason=reason, limit=limit, select_policy=rules.select_policy)
    chosen = _selected_policy(history, rules=rules, current=current, now=now, up=up)
    after = _after_step(history, previous=current, new=limit, now=now)
    return StepLimit(
        reason=reason, limit=limit, policy=chosen, select_policy=rules.select_policy,
        next_step_at=_first_time(after, rules=rules, count=limit, now=now, up=up))


def _selected_policy(
    history: History, *, rules: Rules, current: int, now: Seconds, up: bool
) -> ScalingPolicy:
    """The policy whose own limit is the one ``select_policy`` picked (the first on a tie)."""
    def alone(policy: ScalingPolicy) -> int:
        single = Rules(stabilization_window_seconds=rules.stabilization_window_seconds,
                       select_policy=SelectPolicy.MAX, policies=(policy,),
                       tolerance=rules.tolerance)
        return (scale_up_limit if up else scale_down_limit)(current, history, single, now)

    limits = [(alone(policy), policy) for policy in rules.policies]
    loosest = rules.select_policy is not SelectPolicy.MIN
    target = (max if loosest == up else min)(value for value, _ in limits)
    return next(policy for value, policy in limits if value == target)


def _after_step(history: History, *, previous: int, new: int, now: Seconds) -> History:
    """``history`` as it will be once a step from ``previous`` to ``new`` is recorded now
    (outdated slots are never counted, so appending is the same as reusing one)."""
    if new == previous:
        return history
    event = ScaleEvent(change=abs(new - previous), timestamp=now)
    if new > previous:
        return History(recommendations=history.recommendations,
                       scale_up_events=(*history.scale_up_events, event),
                       scale_down_events=history.scale_down_events)
    return History(recommendations=history.recommendations,
                   scale_up_events=history.scale_up_events,
                   scale_down_events=(*history.scale_down_events, event))


def _period_ends(history: History, rules: Rules, after: Seconds) -> list[Seconds]:
    """Every moment after ``after`` at which a scale event leaves a policy's period."""
    events: Iterable[ScaleEvent] = (*history.scale_up_events, *history.scale_down_events)
    return sorted({event.timestamp + policy.period_seconds
                   for event in events for policy in rules.policies
                   if event.timestamp + policy.period_seconds > after})


def _first_time(
    history: History, *, rules: Rules, count: int, now: Seconds, up: bool,
    candidates: Iterable[Seconds] = (),
) -> Seconds | None:
    """The first moment (of ``candidates``, then the period ends) at which the policies
    let a step go past ``count``; ``None`` if waiting never does."""
    for moment in (*candidates, *_period_ends(history, rules, now)):
        if up and scale_up_limit(count, history, rules, moment) > count:
            return moment
        if not up and scale_down_limit(count, history, rules, moment) < count:
            return moment
    return None


def earliest_scale_down(
    history: History, *, count: int, min_replicas: int, rules: ScaleDownRules,
    now: Seconds,
) -> Seconds | None:
    """The earliest moment a scale-down below ``count`` can happen if the metrics dropped
    now: every recommendation of ``count`` or more has left the scale-down window, and the
    scale-down policies allow a step. ``None`` at ``min_replicas`` or with scale-down
    disabled. ``history`` is the decision's (this pass's recommendation and step included).
    """
    if count <= min_replicas:
        return None
    released = window_release(history, count=count, window=rules.window_seconds, now=now,
                              down=True)
    opens = now if released is None else max(now, released)
    policies = rules.rules
    if policies is None:
        return opens
    if policies.select_policy is SelectPolicy.DISABLED or not policies.policies:
        return None
    return _first_time(history, rules=policies, count=count, now=opens, up=False,
                       candidates=(opens,))


def decision_scale_down(decision: Decision) -> Seconds | None:
    """The earliest moment a scale-down can happen if the metrics dropped now, from what
    ``decision`` kept (``earliest_scale_down``); ``None`` at minReplicas, with scale-down
    disabled, or when the decision did not get that far (no valid metrics)."""
    if decision.scale_down is None or decision.decided_at is None or decision.bounds is None:
        return None
    return earliest_scale_down(
        decision.history, count=decision.desired_replicas,
        min_replicas=decision.bounds.min_replicas, rules=decision.scale_down,
        now=decision.decided_at)

