"""A target's status conditions between passes, as upstream's HPA keeps them.

Conditions are merged as upstream's ``setConditionInList`` does: a condition keeps its
``lastTransitionTime`` while its status stays the same, so users see since when a target has
been limited or unable to scale. The core's decision brings its conditions each pass; the
runtime adds what only it knows: a read or write that failed, a rescale that landed.

Each condition also says which generation of the target's table it was set on
(``observedGeneration``, as upstream stamps its conditions since kubernetes#138653): every
condition a pass sets, changed or not, waits unstamped (``None``) until the pass records its
outcome (``stamp_generation``); one the pass did not set keeps the generation it was set on,
so a ScaledToZero from before an edit says so.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass

from autoscaler.algorithm import Condition, ConditionType, Reason


@dataclass(slots=True, kw_only=True)
class StatusCondition:
    type: ConditionType
    status: bool
    reason: str
    message: str
    last_transition_time: float
    observed_generation: str | None = None
    """The target's generation when a pass last set it; ``None`` until that pass ends."""


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
                message=_shared(condition.message), last_transition_time=now))
            continue
        old = merged[index]
        if (old.status, old.reason, old.message) == (
                condition.status, condition.reason, condition.message):
            # Unchanged (most passes): the entry as it is, set again on this generation.
            if old.observed_generation is not None:
                merged[index] = dataclasses.replace(old, observed_generation=None)
            continue
        merged[index] = StatusCondition(
            type=condition.type, status=condition.status, reason=condition.reason,
            message=_shared(condition.message),
            last_transition_time=old.last_transition_time if old.status == condition.status
            else now,
        )
    return merged


def _shared(message: str) -> str:
    """One copy of a message kept by many targets ("... from cpu resource utilization
    (percentage of request)"): about 150 bytes a target. Set only when a condition changes."""
    return sys.intern(message)


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


def stamp_generation(conditions: list[StatusCondition], generation: str) -> None:
    """The pass that set the unstamped conditions acted on ``generation``."""
    for i, condition in enumerate(conditions):
        if condition.observed_generation is None:
            conditions[i] = dataclasses.replace(condition, observed_generation=generation)
