"""A target's status conditions between passes, as upstream's HPA keeps them.

Conditions are merged as upstream's ``setConditionInList`` does: a condition keeps its
``lastTransitionTime`` while its status stays the same, so users see since when a target has
been limited or unable to scale. The core's decision brings its conditions each pass; the
runtime adds what only it knows: a read or write that failed, a rescale that landed.
"""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.algorithm import Condition, ConditionType, Reason


@dataclass(slots=True, kw_only=True)
class StatusCondition:
    type: ConditionType
    status: bool
    reason: str
    message: str
    last_transition_time: float


def merge_conditions(
    existing: list[StatusCondition], new: tuple[Condition, ...], now: float
) -> list[StatusCondition]:
    merged = list(existing)
    at: dict[ConditionType, int] = {}
    for i, c in enumerate(merged):
        at.setdefault(c.type, i)
    for condition in new:
        index = at.get(condition.type)
        if index is None:
            at[condition.type] = len(merged)
            merged.append(StatusCondition(
                type=condition.type, status=condition.status, reason=condition.reason,
                message=condition.message, last_transition_time=now))
            continue
        old = merged[index]
        if (old.status, old.reason, old.message) == (
                condition.status, condition.reason, condition.message):
            continue  # unchanged (most passes): keep the entry as it is
        merged[index] = StatusCondition(
            type=condition.type, status=condition.status, reason=condition.reason,
            message=condition.message,
            last_transition_time=old.last_transition_time if old.status == condition.status
            else now,
        )
    return merged


def unable_to_scale(existing: list[StatusCondition], reason: str, message: str,
                    now: float) -> list[StatusCondition]:
    """AbleToScale False with ``reason`` first, the others kept; since the first failure
    while it keeps failing."""
    failed = StatusCondition(type=ConditionType.ABLE_TO_SCALE, status=False, reason=reason,
                             message=message, last_transition_time=now)
    others = [c for c in existing if c.type is not ConditionType.ABLE_TO_SCALE]
    previous = next((c for c in existing if c.type is ConditionType.ABLE_TO_SCALE), None)
    if previous is not None and not previous.status:
        failed.last_transition_time = previous.last_transition_time
    return [failed, *others]


def rescaled(existing: list[StatusCondition], replicas: int,
             now: float) -> list[StatusCondition]:
    """After a write that landed: AbleToScale True, SucceededRescale, in its place."""
    return [StatusCondition(
        type=c.type, status=True, reason=Reason.SUCCEEDED_RESCALE,
        message=f"the autoscaler was able to update the target scale to {replicas}",
        last_transition_time=c.last_transition_time if c.status else now)
        if c.type is ConditionType.ABLE_TO_SCALE else c for c in existing]
