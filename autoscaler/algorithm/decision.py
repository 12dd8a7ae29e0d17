"""One reconcile decision for one target: upstream's ``reconcileAutoscaler`` minus its I/O.

``decide`` takes the scale, the pods, each metric's values (or why they are unavailable), the
history and ``now``; it returns the desired count, the conditions upstream would set, each
metric's status and the updated history. The caller writes the scale and, once the write
succeeded, calls ``record_scale_event``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Final

from autoscaler.algorithm.behavior import (
    normalize_with_behavior,
    normalize_without_behavior,
    resolve_behavior,
    tolerances_for,
)
from autoscaler.algorithm.decision_values import (
    Bounds,
    Condition,
    Decision,
    DecisionInput,
    ForecastReport,
    ScaleDownRules,
    StepLimit,
    WindowHold,
)
from autoscaler.algorithm.explain import hold, rate_limit
from autoscaler.algorithm.metric import evaluate_metric
from autoscaler.algorithm.model import (
    AlgorithmSettings,
    AutoscalerSpec,
    History,
    Recommendation,
    Seconds,
)
from autoscaler.algorithm.reasons import ConditionType, Reason, Step
from autoscaler.algorithm.stage_values import MetricOutcome, Normalized, ResolvedBehavior
from autoscaler.record import seal_values

Decide = Callable[[DecisionInput], Decision]
"""A way of deciding: ``decide``, or one that wraps it (predictive scaling)."""


class _Conditions:
    """``setCondition`` within one pass: a type set again replaces its entry in place."""

    def __init__(self) -> None:
        self._by_type: dict[ConditionType, Condition] = {}

    def set(self, type_: ConditionType, status: bool, reason: Reason, message: str) -> None:
        self.put(Condition(type=type_, status=status, reason=reason, message=message))

    def put(self, condition: Condition) -> None:
        self._by_type[condition.type] = condition

    def all(self) -> tuple[Condition, ...]:
        return tuple(self._by_type.values())


def seed_history(history: History, current: int, now: Seconds) -> History:
    """``recordInitialRecommendation``: a target seen for the first time cannot scale down
    on its first pass, because the current count enters the stabilization window."""
    if history.seeded:
        return history
    return History(
        recommendations=(Recommendation(replicas=current, timestamp=now),),
        scale_up_events=history.scale_up_events,
        scale_down_events=history.scale_down_events,
    )


def bridge_gap(history: History, current: int, now: Seconds) -> History:
    """A history restored after an unclean stop lacks the recommendations made since it was
    last saved. Treat that gap as upstream treats a fresh start (``recordInitialRecommendation``):
    the current count enters the windows now. It is conservative both ways: a scale-down
    window's maximum is then at least the current count and a scale-up window's minimum at
    most, so no recommendation lost in the gap can have allowed a step this one forbids."""
    return History(
        recommendations=(*history.recommendations, Recommendation(replicas=current, timestamp=now)),
        scale_up_events=history.scale_up_events,
        scale_down_events=history.scale_down_events,
    )


def decide(given: DecisionInput) -> Decision:
    """Decide the desired replica count for one target, as kube-controller-manager would."""
    staged = decide_staged(given)
    return staged if isinstance(staged, Decision) else staged.decision()


class StagedDecision:
    """A decision that got past its metrics and normalization, before the ``Decision`` (its
    conditions, steps, holds and limits) is built: a caller weighing two decisions (prediction)
    builds only the one it keeps. ``decision()`` gives exactly what ``decide`` returns."""

    __slots__ = ("_active", "_current", "_description", "_error", "_now",
                 "_resolved", "_settings", "bounds", "desired", "metrics", "normalized",
                 "proposal", "rescale_reason")

    def __init__(  # noqa: PLR0917 - private to this module and decide_predictive
        self, active: Condition, current: int, bounds: Bounds, now: Seconds,
        settings: AlgorithmSettings, resolved: ResolvedBehavior | None,
        outcomes: tuple[MetricOutcome, ...], proposal: int, description: str,
        error: str | None, rescale_reason: str, normalized: Normalized,
    ) -> None:
        self._active, self._current, self.bounds = active, current, bounds
        self._now, self._settings = now, settings
        self._resolved, self.metrics, self.proposal = resolved, outcomes, proposal
        self._description, self._error, self.rescale_reason = description, error, rescale_reason
        self.normalized, self.desired = normalized, normalized.desired

    def decision(
        self, *, rescale_reason: str | None = None, extra: Condition | None = None,
        forecast: ForecastReport | None = None,
    ) -> Decision:
        """The ``Decision``; ``rescale_reason``, an ``extra`` condition after the others and a
        ``forecast`` report are what ``decide_predictive`` adds."""
        normalized, resolved, outcomes = self.normalized, self._resolved, self.metrics
        current, proposal, now, settings = self._current, self.proposal, self._now, self._settings
        # setCondition's order: AbleToScale (first set as got-the-scale, then replaced by the
        # stabilization's), ScalingActive, ScalingLimited.
        conditions = (_STABILIZATION[normalized.stabilization_reason], self._active,
                      _LIMIT[normalized.limited, normalized.limit_reason])
        return Decision(
            current_replicas=current, desired_replicas=normalized.desired, decided_at=now,
            bounds=self.bounds,
            conditions=conditions if extra is None else (*conditions, extra),
            history=normalized.history,
            proposal=proposal,
            proposed_by=self._description,
            stabilized=normalized.stabilized,
            rescale_reason=self.rescale_reason if rescale_reason is None else rescale_reason,
            metrics=outcomes,
            error=self._error,
            steps=_steps(outcomes, current, proposal, normalized, invalid=self._error is not None),
            hold=_hold(normalized, resolved, proposal, now, settings),
            limit=_limit(normalized, resolved, current, now),
            scale_down=ScaleDownRules(
                window_seconds=settings.downscale_stabilization if resolved is None
                else resolved.scale_down.stabilization_window_seconds,
                rules=None if resolved is None else resolved.scale_down),
            forecast=forecast,
        )


def decide_staged(given: DecisionInput) -> Decision | StagedDecision:
    """``decide`` up to its normalized count: a ``Decision`` when the pass ended early (scaling
    disabled, outside the bounds, no valid metric), else a ``StagedDecision``."""
    spec, scale, metrics, pods = given.spec, given.scale, given.metrics, given.pods
    now, settings, bounds = given.now, given.settings, given.bounds
    if len(metrics) != len(spec.metrics):
        raise ValueError(f"got {len(metrics)} metric values for {len(spec.metrics)} metric specs")
    bounds = bounds or Bounds(min_replicas=spec.min_replicas, max_replicas=spec.max_replicas)
    current = scale.spec_replicas
    history = seed_history(given.history, current, now)
    conditions = _Conditions()
    conditions.put(GOT_SCALE)

    def done(desired: int, **fields: object) -> Decision:
        return Decision(
            current_replicas=current, desired_replicas=desired, decided_at=now, bounds=bounds,
            conditions=conditions.all(), history=history, **fields,  # type: ignore[arg-type]
        )

    # Whether autoscaling is disabled at 0 is the spec's choice (scale to zero), not a schedule's.
    if current == 0 and spec.min_replicas != 0:
        conditions.set(
            ConditionType.SCALING_ACTIVE, False, Reason.SCALING_DISABLED,
            "scaling is disabled since the replica count of the target is zero",
        )
        return done(0, steps=(Step.SCALING_DISABLED,))
    outside = not bounds.min_replicas <= current <= bounds.max_replicas
    if outside and not bounds.gradual and current > bounds.max_replicas:
        return done(
            bounds.max_replicas, steps=(Step.REPLICA_LIMIT,),
            rescale_reason="Current number of replicas above Spec.MaxReplicas",
        )
    if outside and not bounds.gradual:
        return done(
            bounds.min_replicas, steps=(Step.REPLICA_LIMIT,),
            rescale_reason="Current number of replicas below Spec.MinReplicas",
        )

    tolerances = tolerances_for(spec.behavior, settings)
    metric_settings = _metric_settings(spec, settings)
    outcomes = tuple([  # a list first: cheaper than a generator for two or three metrics
        evaluate_metric(
            metric_spec, values, scale=scale, pods=pods, tolerances=tolerances,
            now=now, settings=metric_settings,
        )
        for metric_spec, values in zip(spec.metrics, metrics, strict=True)
    ])
    combined = _combine(outcomes, scale.spec_replicas)
    if isinstance(combined, _Failure):
        active = Condition(type=ConditionType.SCALING_ACTIVE, status=False,
                           reason=combined.reason, message=combined.message)
        conditions.put(active)
        if not (bounds.gradual and current < bounds.min_replicas):
            return done(
                current, metrics=outcomes, error=combined.error, steps=(Step.INVALID_METRICS,)
            )
        # A scheduled floor still applies without metrics: raising capacity is always safe.
        combined = (bounds.min_replicas, "scheduled minReplicas", combined.error)
    else:
        active = Condition(
            type=ConditionType.SCALING_ACTIVE, status=True, reason=Reason.VALID_METRIC_FOUND,
            message=sys.intern(
                f"the autoscaler was able to compute a replica count from {combined[1]}"),
        )
    proposal, description, error = combined
    if bounds.gradual and outside:
        # After the tolerance check, so a scheduled floor is reached exactly; the move itself
        # goes through stabilization and the rate limits like any other change.
        proposal = min(max(proposal, bounds.min_replicas), bounds.max_replicas)
        description = ("scheduled minReplicas" if current < bounds.min_replicas
                       else "scheduled maxReplicas")
    rescale_reason = ""
    if description.startswith("scheduled"):
        rescale_reason = sys.intern(f"{description} is {proposal}")
    elif proposal > current:
        rescale_reason = sys.intern(f"{description} above target")
    elif proposal < current:
        rescale_reason = "All metrics below target"

    resolved = resolve_behavior(spec.behavior, settings) if spec.behavior else None
    normalized = _normalize(resolved, bounds, history, current, proposal, now, settings)
    return StagedDecision(active, current, bounds, now, settings, resolved,
                          outcomes, proposal, description, error, rescale_reason, normalized)


def _metric_settings(spec: AutoscalerSpec, settings: AlgorithmSettings) -> AlgorithmSettings:
    """The settings the metrics read: the target's own ``utilization_requests`` if it has one."""
    own = spec.utilization_requests
    if own is None or own is settings.utilization_requests:
        return settings
    return replace(settings, utilization_requests=own)


def _hold(
    normalized: Normalized, resolved: ResolvedBehavior | None, proposal: int, now: Seconds,
    settings: AlgorithmSettings,
) -> WindowHold | None:
    """Which window held the proposal back, and until when (only when one did)."""
    if normalized.stabilized == proposal:
        return None
    reason = normalized.stabilization_reason
    if resolved is None:
        window: Seconds = settings.downscale_stabilization
    else:
        rules = resolved.scale_down if reason is Reason.SCALE_DOWN_STABILIZED else (
            resolved.scale_up)
        window = float(rules.stabilization_window_seconds)
    return hold(normalized.history, reason=reason, proposal=proposal,
                stabilized=normalized.stabilized, window=window, now=now)


def _limit(
    normalized: Normalized, resolved: ResolvedBehavior | None, current: int, now: Seconds,
) -> StepLimit | None:
    """Which policy or bound cut the step, and when the next may follow (only if one did)."""
    if not normalized.limited:
        return None
    reason = normalized.limit_reason
    if resolved is None or reason not in (Reason.SCALE_UP_LIMIT, Reason.SCALE_DOWN_LIMIT):
        return StepLimit(reason=reason, limit=normalized.desired)
    rules = resolved.scale_up if reason is Reason.SCALE_UP_LIMIT else resolved.scale_down
    return rate_limit(normalized.history, reason=reason, rules=rules, current=current,
                      limit=normalized.desired, now=now)


@dataclass(init=False, slots=True, unsafe_hash=True)
class _Failure:
    """Why no count came of the metrics: the ScalingActive condition's reason and message."""

    reason: Final[Reason]
    message: Final[str]
    error: Final[str]

    def __init__(self, *, reason: Reason, message: str, error: str) -> None:
        self.reason = reason
        self.message = message
        self.error = error


def _combine(
    outcomes: Sequence[MetricOutcome], spec_replicas: int
) -> tuple[int, str, str | None] | _Failure:
    """``computeReplicasForMetrics``: the largest proposal wins; a scale-down is never based
    on a partial set of metrics."""
    replicas, description = 0, ""
    invalid = [o for o in outcomes if o.proposal is None]
    for outcome in outcomes:
        if outcome.proposal is not None and (
            replicas == 0 or outcome.proposal.replicas > replicas
        ):
            replicas, description = outcome.proposal.replicas, outcome.description
    error = None
    if invalid:
        error = (
            f"invalid metrics ({len(invalid)} invalid out of {len(outcomes)}), "
            f"first error is: {invalid[0].error}"
        )
    if len(invalid) >= len(outcomes) or (invalid and replicas < spec_replicas):
        first = invalid[0] if invalid else None
        return _Failure(
            reason=first.failure_reason if first else Reason.INVALID_METRIC_SOURCE_TYPE,
            message=f"the autoscaler was unable to compute the replica count: {first.error}"
            if first else "the target has no metrics to compute a replica count from",
            error=error or "no metrics configured",
        )
    return replicas, description, error


def _normalize(  # noqa: PLR0917 - private, called once
    resolved: ResolvedBehavior | None,
    bounds: Bounds,
    history: History,
    current: int,
    proposal: int,
    now: Seconds,
    settings: AlgorithmSettings,
) -> Normalized:
    if resolved is None:
        return normalize_without_behavior(
            history=history, current=current, proposal=proposal,
            min_replicas=bounds.min_replicas, max_replicas=bounds.max_replicas,
            downscale_window=settings.downscale_stabilization, now=now,
        )
    return normalize_with_behavior(
        history=history, current=current, proposal=proposal,
        min_replicas=bounds.min_replicas, max_replicas=bounds.max_replicas,
        behavior=resolved, now=now,
    )


def _steps(
    outcomes: Sequence[MetricOutcome],
    current: int,
    proposal: int,
    normalized: Normalized,
    *,
    invalid: bool,
) -> tuple[Step, ...]:
    steps: list[Step] = [Step.INVALID_METRICS] if invalid else []
    valid = [o.proposal for o in outcomes if o.proposal is not None]
    if proposal == current and all(p.within_tolerance for p in valid):
        steps.append(Step.WITHIN_TOLERANCE)
    else:
        steps.append(Step.METRIC_RECOMMENDATION)
    if normalized.stabilized != proposal:
        steps.append(Step.STABILIZED)
    if normalized.limited:
        policy = normalized.limit_reason in (Reason.SCALE_UP_LIMIT, Reason.SCALE_DOWN_LIMIT)
        steps.append(Step.POLICY_LIMITED if policy else Step.REPLICA_LIMIT)
    return tuple(steps)


STABILIZATION_MESSAGES = {
    Reason.READY_FOR_NEW_SCALE: "no stabilization window holds the recommendation back",
    Reason.SCALE_DOWN_STABILIZED: (
        "recent recommendations were higher than current one, "
        "applying the highest recent recommendation"
    ),
    Reason.SCALE_UP_STABILIZED: (
        "recent recommendations were lower than current one, "
        "applying the lowest recent recommendation"
    ),
}

LIMIT_MESSAGES = {
    Reason.DESIRED_WITHIN_RANGE: "the desired count is within the acceptable range",
    Reason.TOO_FEW_REPLICAS: "the desired replica count is less than the minimum replica count",
    Reason.TOO_MANY_REPLICAS: "the desired replica count is more than the maximum replica count",
    Reason.SCALE_UP_LIMIT: (
        "the desired replica count is increasing faster than the maximum scale rate"
    ),
    Reason.SCALE_DOWN_LIMIT: (
        "the desired replica count is decreasing faster than the maximum scale rate"
    ),
}

# The conditions whose text is fixed, built once: a pass sets three of them per target.
GOT_SCALE = Condition(
    type=ConditionType.ABLE_TO_SCALE, status=True, reason=Reason.SUCCEEDED_GET_SCALE,
    message="the autoscaler was able to get the target's current scale",
)
_STABILIZATION = {
    reason: Condition(type=ConditionType.ABLE_TO_SCALE, status=True, reason=reason,
                      message=message)
    for reason, message in STABILIZATION_MESSAGES.items()
}
_LIMIT = {
    (limited, reason): Condition(type=ConditionType.SCALING_LIMITED, status=limited,
                                 reason=reason, message=message)
    for reason, message in LIMIT_MESSAGES.items() for limited in (False, True)
}


seal_values(globals())
