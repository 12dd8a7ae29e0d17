"""Per-target runtime state and the status view ``/status`` and ``plan`` show.

Conditions are merged as upstream's ``setConditionInList`` does: a condition keeps its
``lastTransitionTime`` while its status stays the same, so users see since when a target has
been limited or unable to scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from autoscaler.algorithm import Condition, ConditionType, Decision, History
from autoscaler.algorithm.activation import Activity, ZeroMemory
from autoscaler.algorithm.forecast import Series, TargetPredictor
from autoscaler.algorithm.metric import MetricOutcome
from autoscaler.schedules import ActiveBounds, Schedule, next_activation
from autoscaler.state import Intent


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


@dataclass(frozen=True, slots=True, kw_only=True)
class ShadowReport:
    """Shadow mode's comparison at the last pass."""

    ours: int
    theirs: int | None
    owner: str | None

    @property
    def agree(self) -> bool | None:
        return None if self.theirs is None else self.ours == self.theirs

    def to_json(self) -> dict[str, Any]:
        return {"desiredReplicas": self.ours, "theirDesiredReplicas": self.theirs,
                "owner": self.owner, "agree": self.agree}


@dataclass(slots=True, kw_only=True)
class TargetState:
    """What the daemon remembers about one target between passes."""

    key: str
    history: History = field(default_factory=History)
    conditions: list[StatusCondition] = field(default_factory=list)
    last_decision: Decision | None = None
    last_reconcile: float | None = None
    last_outcome: str = "pending"
    last_error: str | None = None
    last_scale_time: float | None = None
    expected_replicas: int | None = None
    """The replica count we last wrote or observed: a different count next pass is drift."""
    drift: str | None = None
    blocked_by: tuple[str, ...] = ()
    """Other autoscalers (HPA, ScaledObject) that own this target; we leave it alone."""
    consecutive_invalid: int = 0
    fallback_active: bool = False
    in_flight: bool = False
    pause: str | None = None
    """Why the target is paused (config or annotation), if it is."""
    schedules: dict[str, Any] | None = None
    """Bounds in force from schedules, and each schedule's next activation."""
    intent: Intent | None = None
    """A scale write made durable before it was sent and not yet known to have landed or
    not: resolved against a fresh read of the target before its next decision."""
    bridge_gap: bool = False
    """Restored from a store written before an unclean stop: the first decision bridges the
    gap of lost recommendations (``autoscaler.algorithm.bridge_gap``)."""
    write_not_before: float | None = None
    """The API server asked us to wait (429 Retry-After): no scale write before then."""
    zero: ZeroMemory = field(default_factory=ZeroMemory)
    """Scale to zero: whether we took the target to 0, when it was last active (persisted)."""
    first_seen: float | None = None
    """When this run first decided on the target (the initial cooldown counts from it)."""
    activity: Activity | None = None
    idle_until: float | None = None
    """When the target may go to zero if it stays inactive."""
    shadow: ShadowReport | None = None
    forecasts: dict[str, Series] = field(default_factory=dict)
    """Predictive scaling: each predicted metric's history, persisted with ``history``."""
    predictor: TargetPredictor | None = None
    """The models over ``forecasts`` (``runtime/prediction.py``); rebuilt after a restore."""

    def to_json(self) -> dict[str, Any]:
        decision = self.last_decision
        body: dict[str, Any] = {
            "lastReconcileTime": _iso(self.last_reconcile),
            "lastOutcome": self.last_outcome,
            "lastScaleTime": _iso(self.last_scale_time),
            "conditions": [
                {"type": c.type.value, "status": "True" if c.status else "False",
                 "reason": c.reason, "message": c.message,
                 "lastTransitionTime": _iso(c.last_transition_time)}
                for c in self.conditions
            ],
        }
        if decision is not None:
            body.update(
                currentReplicas=decision.current_replicas,
                desiredReplicas=decision.desired_replicas,
                proposal=decision.proposal,
                stabilized=decision.stabilized,
                steps=[s.value for s in decision.steps],
                currentMetrics=[metric_json(m) for m in decision.metrics],
            )
        for name, value in (("error", self.last_error), ("drift", self.drift)):
            if value:
                body[name] = value
        if self.blocked_by:
            body["blockedBy"] = list(self.blocked_by)
        if self.fallback_active:
            body["fallbackActive"] = True
        if self.schedules is not None:
            body["schedules"] = self.schedules
        if self.pause is not None:
            body["paused"] = self.pause
        if self.activity is not None or self.zero.scaled_to_zero:
            body["scaleToZero"] = self._zero_json()
        if self.shadow is not None:
            body["shadow"] = self.shadow.to_json()
        return body

    def _zero_json(self) -> dict[str, Any]:
        activity = self.activity
        body: dict[str, Any] = {"scaledToZero": self.zero.scaled_to_zero,
                                "lastActiveTime": _iso(self.zero.last_active)}
        if activity is not None:
            body["activity"] = activity.state.value
            body["reason"] = activity.describe()
        if self.idle_until is not None:
            body["scaleToZeroAfter"] = _iso(self.idle_until)
        return body


def schedule_status(
    schedules: Sequence[Schedule], active: ActiveBounds, at: datetime
) -> dict[str, Any]:
    """What ``/status`` shows of a target's schedules at ``at``."""
    return {
        "minReplicas": active.min_replicas,
        "maxReplicas": active.max_replicas,
        "active": list(active.active),
        "next": {s.name: _iso_dt(next_activation(s, at)) for s in schedules},
    }


def _iso_dt(moment: datetime | None) -> str | None:
    return None if moment is None else _iso(moment.timestamp())


def metric_json(outcome: MetricOutcome) -> dict[str, Any]:
    spec = outcome.spec
    target = spec.target
    body: dict[str, Any] = {
        "type": spec.type.value,
        "name": spec.name,
        "description": outcome.description,
        "target": {k: v for k, v in (
            ("type", target.type.value), ("averageUtilization", target.average_utilization),
            ("averageValue", target.average_value), ("value", target.value)) if v is not None},
    }
    if outcome.proposal is None:
        body["error"] = outcome.error
        return body
    current = outcome.proposal.current
    body["current"] = {k: v for k, v in (
        ("averageUtilization", current.average_utilization),
        ("averageValue", current.average_value), ("value", current.value)) if v is not None}
    body["proposal"] = outcome.proposal.replicas
    return body


def _iso(moment: float | None) -> str | None:
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
