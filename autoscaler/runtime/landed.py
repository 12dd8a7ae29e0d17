"""A scale write that landed, counted in the target's state.

Whether it was confirmed by the API server's answer or found later by a fresh read (an
intent whose outcome was unknown), a landed write is a scale event in the history (its
policy periods count from now), the time of the last scale, and upstream's ScaledToZero
condition: whether this daemon took the target to 0, for only then is a target at 0 ours
to wake up.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from autoscaler.algorithm import AlgorithmSettings, record_scale_event
from autoscaler.algorithm.activation import scaled_to_zero_condition
from autoscaler.runtime.conditions import merge_conditions
from autoscaler.runtime.status import TargetState

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig


def count_scale(state: TargetState, target: TargetConfig, *, previous: int, new: int,
                now: float, settings: AlgorithmSettings) -> None:
    """Fold the scale ``previous`` -> ``new`` into the target's history and conditions."""
    state.history = record_scale_event(
        state.history, behavior=target.spec.behavior, previous=previous, new=new, now=now,
        settings=settings)
    state.last_scale_time = now
    state.note_scale(previous=previous, new=new, at=now)
    condition = scaled_to_zero_condition(previous=previous, new=new, rules=target.scale_to_zero)
    state.zero = dataclasses.replace(state.zero, scaled_to_zero=condition.status)
    state.conditions = merge_conditions(state.conditions, (condition,), now)
