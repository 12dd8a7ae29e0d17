"""Scale to zero's values: what the rules remember of a target between passes, the activity they
read this pass, and what they decided (``activation`` holds the rules).

Native value types, as every value the core makes each pass (``autoscaler/record.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from autoscaler.algorithm.decision_values import Decision
from autoscaler.algorithm.model import Milli, Seconds
from autoscaler.algorithm.quantity import format_milli
from autoscaler.record import seal_values


@dataclass(init=False, slots=True, unsafe_hash=True)
class ZeroMemory:
    """What the rules remember of a target between passes (persisted with its history)."""

    scaled_to_zero: Final[bool]
    """This daemon took the target to 0 (upstream's ScaledToZero=True)."""
    last_active: Final[Seconds | None]
    """The last pass any activation metric was active or could not be read (or when the
    target was first seen): the cooldown counts only time every one was seen inactive."""
    adopted_from: Final[str | None]
    """A zero another autoscaler made that this daemon holds as its own (KEDA's, seen in
    shadow mode): the field manager that set it, while it stays set by that manager."""

    def __init__(self, *, scaled_to_zero: bool = False, last_active: Seconds | None = None,
                 adopted_from: str | None = None) -> None:
        self.scaled_to_zero = scaled_to_zero
        self.last_active = last_active
        self.adopted_from = adopted_from


class ActivityState(StrEnum):
    ACTIVE = "Active"
    INACTIVE = "Inactive"
    UNKNOWN = "Unknown"


@dataclass(init=False, slots=True, unsafe_hash=True)
class Activity:
    """Whether any activation metric is above its threshold this pass (KEDA's ``IsActive``)."""

    state: Final[ActivityState]
    metric: Final[str]
    """The metric that is active (the first), or the first that is invalid when unknown."""
    value: Final[Milli | None]
    threshold: Final[Milli | None]

    def __init__(self, *, state: ActivityState, metric: str = "", value: Milli | None = None,
                 threshold: Milli | None = None) -> None:
        self.state = state
        self.metric = metric
        self.value = value
        self.threshold = threshold

    def describe(self) -> str:
        if self.state is ActivityState.ACTIVE and self.value is not None:
            return (f"{self.metric} is {format_milli(self.value)}, above its activation "
                    f"threshold {format_milli(self.threshold or 0)}")
        if self.state is ActivityState.UNKNOWN:
            return f"{self.metric} is not available, so activity is unknown"
        return "every activation metric is at or below its threshold"


@dataclass(init=False, slots=True, unsafe_hash=True)
class ZeroDecision:
    """The decision, with what the rules now remember of the target and the activity read."""

    decision: Final[Decision]
    memory: Final[ZeroMemory]
    activity: Final[Activity | None]
    idle_until: Final[Seconds | None]
    """When the target may go to zero if it stays inactive (``None``: not counting down)."""

    def __init__(self, *, decision: Decision, memory: ZeroMemory,
                 activity: Activity | None = None, idle_until: Seconds | None = None) -> None:
        self.decision = decision
        self.memory = memory
        self.activity = activity
        self.idle_until = idle_until


seal_values(globals())
