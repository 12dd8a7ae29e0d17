"""Per-target runtime state and the status view ``/status`` and ``plan`` show.

The body of ``/status`` carries everything ``autoscaler status`` renders (it renders nothing
else): bounds, each metric with its query, per-pod values and named pod groups, each stage of
the last decision with the window or policy that shaped it and when they let go, the
earliest possible scale-down, the recent scale events and the conditions. Quantities are
Kubernetes quantity strings and times RFC 3339 UTC, as HPA status shows them.

One state, two views: the body here and the target's ``/metrics`` series
(``TargetState.publish``) are both read from this state, which each pass settles whatever
its mode: ``current_replicas`` is the count the pass read, ``desired_replicas`` the count it
settled on (the decision's, the fallback's, a pause's hold, ours in shadow mode), and what
comes from a decision (metrics, proposal, windows, forecast) is shown as current only while
that decision is the latest pass's (``decision_is_latest``); a mode switched off (shadow,
schedules) leaves nothing behind.

Conditions are kept by ``conditions``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from autoscaler.algorithm import (
    ConditionType,
    Decision,
    EventReason,
    History,
    PodValues,
    format_milli,
)
from autoscaler.algorithm.decision_values import ForecastReport, StepLimit
from autoscaler.algorithm.explain import decision_scale_down
from autoscaler.algorithm.forecast import Series, TargetPredictor
from autoscaler.algorithm.stage_values import MetricOutcome
from autoscaler.algorithm.zero_values import Activity, ZeroMemory
from autoscaler.runtime.conditions import StatusCondition, stamp_generation
from autoscaler.schedules import ActiveBounds, Schedule, next_activation
from autoscaler.snapshot import Intent

MAX_SCALE_EVENTS = 10
"""The most recent scale events ``/status`` lists per target."""

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig
    from autoscaler.runtime.zero_owner import ZeroOwnership


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
    """This state object is in a running pass (set as the pass begins, cleared as it ends).
    A state made while a pass runs (a ring claim's restore after the bucket was lost and
    claimed again, a reload removing and adding the target) is not that pass's: the pass
    drops the target rather than decide on a history whose pending write it never read."""
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
    zero_owner: ZeroOwnership | None = None
    """At 0 replicas: whose zero it is, as the cluster and our memory tell (``zero_owner``)."""
    stranded: str | None = None
    """At a zero not ours while work waits: what is said of it (``zero_owner``)."""
    first_seen: float | None = None
    """When a run first decided on the target, kept in the store (``keeps_first_seen``)
    across restarts, takeovers and ring moves: the initial cooldown counts from it or from
    this run's start, whichever is later (so a move does not start it again, a restart
    does, and so does a reload adding the target back)."""
    keeps_first_seen: bool = False
    """The target has an initial cooldown: only then is ``first_seen`` written to the store
    (10,000 targets: 117 KB of store would be 209 KB with it on every target)."""
    activity: Activity | None = None
    idle_until: float | None = None
    """When the target may go to zero if it stays inactive."""
    shadow: ShadowReport | None = None
    forecasts: dict[str, Series] = field(default_factory=dict)
    """Predictive scaling: each predicted metric's history, persisted with ``history``."""
    predictor: TargetPredictor | None = None
    """The models over ``forecasts`` (``runtime/prediction.py``); rebuilt after a restore."""
    current_replicas: int | None = None
    """``spec.replicas`` as the last pass that read the target read it."""
    desired_replicas: int | None = None
    """The count the last pass settled on (after the fallback, a pause's hold, ours in
    shadow mode); ``None`` when it decided nothing (left alone, owned elsewhere)."""
    decided_this_pass: bool = False
    failed_this_pass: bool = False
    """A read or write of this pass failed: its outcome is ``error``, said once."""
    decision_is_latest: bool = False
    """``last_decision`` is the latest pass's (not one from before a pause, an owner, a
    failed read): set when a pass ends (``settle``), so a view never sees half a pass."""
    scaled: tuple[tuple[float, int, int], ...] = ()
    """The scale writes this process saw land, newest last: (time, previous, new); the
    last ``MAX_SCALE_EVENTS``. A tuple, not a deque: an empty deque held 0.24 KB a target
    (most never scale; bench/daemon_scale.py ``BENCH_HEAP=1`` at 3,000 targets)."""
    observed_generation: str | None = None
    """The generation of the target's table the last pass that ended acted on (upstream's
    ``status.observedGeneration``); ``None`` before the first."""

    def decided(self, decision: Decision, desired: int) -> None:
        """This pass's decision, and the count it settles on (after the fallback)."""
        self.last_decision, self.desired_replicas = decision, desired
        self.decided_this_pass = True

    def begin_pass(self) -> None:
        self.decided_this_pass = self.failed_this_pass = False

    def settle(self, generation: str) -> None:
        """The pass over this target ended, acting on ``generation`` of its table: what it
        decided (if anything) is the latest, and so are the conditions it set."""
        self.decision_is_latest = self.decided_this_pass
        self.observed_generation = generation
        stamp_generation(self.conditions, generation)

    def note_scale(self, *, previous: int, new: int, at: float) -> None:
        """A scale write landed (whether the policies keep an event of it or not)."""
        self.scaled = (*self.scaled[1 - MAX_SCALE_EVENTS:], (at, previous, new))

    def latest_decision(self) -> Decision | None:
        return self.last_decision if self.decision_is_latest else None

    def to_json(self, *, planned: bool = False) -> dict[str, Any]:
        """The ``/status`` body for this target; ``planned``: nothing was written (``plan``,
        a dry run), so the conditions say what a pass would do rather than what it did."""
        decision = self.last_decision
        body: dict[str, Any] = {
            "target": self.key,
            "lastReconcileTime": _iso(self.last_reconcile),
            "lastOutcome": self.last_outcome,
            "lastScaleTime": _iso(self.last_scale_time),
            "observedGeneration": self.observed_generation,
            "conditions": [condition_json(c) for c in self.conditions],
        }
        if decision is not None:
            bounds = decision.bounds
            if bounds is not None:
                body.update(minReplicas=bounds.min_replicas, maxReplicas=bounds.max_replicas)
            body["decision"] = decision_json(decision)
            body["decision"]["latest"] = self.decision_is_latest
        latest = self.latest_decision()
        if latest is not None:
            body.update(
                proposal=latest.proposal,
                stabilized=latest.stabilized,
                steps=[s.value for s in latest.steps],
                currentMetrics=[metric_json(m) for m in latest.metrics],
                scaleDown=scale_down_json(latest),
            )
            if planned and self.last_outcome != "error":
                body["conditions"] = would_conditions(body["conditions"], latest,
                                                      self.desired_replicas)
        if self.current_replicas is not None:
            body["currentReplicas"] = self.current_replicas
        if self.desired_replicas is not None:
            body["desiredReplicas"] = self.desired_replicas
        events = scale_events_json(self.history, self.scaled)
        if events:
            body["scaleEvents"] = events
        for name, value in (("error", self.last_error), ("drift", self.drift)):
            if value:
                body[name] = value
        if self.blocked_by:
            body["blockedBy"] = list(self.blocked_by)
        body.update(self._features_json())
        return body

    def _features_json(self) -> dict[str, Any]:
        """What fallback, schedules, pause, scale to zero, shadow mode and prediction add."""
        body: dict[str, Any] = {}
        if self.fallback_active:
            body["fallbackActive"] = True
            body["consecutiveInvalid"] = self.consecutive_invalid
        if self.schedules is not None:
            body["schedules"] = self.schedules
        if self.pause is not None:
            body["paused"] = self.pause
        if self.activity is not None or self.zero.scaled_to_zero:
            body["scaleToZero"] = self._zero_json()
        if self.shadow is not None:
            body["shadow"] = self.shadow.to_json()
        latest = self.latest_decision()
        forecast = latest.forecast if latest is not None else None
        if forecast is not None:
            body["forecast"] = forecast_json(forecast)
        return body

    def _zero_json(self) -> dict[str, Any]:
        activity = self.activity
        body: dict[str, Any] = {"scaledToZero": self.zero.scaled_to_zero,
                                "lastActiveTime": _iso(self.zero.last_active)}
        if self.zero_owner is not None and self.zero_owner.set_by is not None:
            body["replicasSetBy"] = self.zero_owner.set_by
        if activity is not None:
            body["activity"] = activity.state.value
            body["reason"] = activity.describe()
        if self.idle_until is not None:
            body["scaleToZeroAfter"] = _iso(self.idle_until)
        return body


def forecast_json(report: ForecastReport) -> dict[str, Any]:
    """Predictive scaling at the last pass: what the live metrics asked for, what the
    forecasts would make of it, and each predicted metric's model and error."""
    return {
        "acting": report.acting,
        "reactiveReplicas": report.reactive_replicas,
        "predictiveReplicas": report.predictive_replicas,
        "changed": report.changed,
        "metrics": [None if m is None else {
            "model": m.model, "horizonSeconds": m.horizon, "forecast": m.value, "live": m.live,
            "errorPercent": m.error_percent, "used": m.used, "reason": m.reason or None,
            "proposal": m.proposal} for m in report.metrics],
    }


def condition_json(condition: StatusCondition) -> dict[str, Any]:
    body = {"type": condition.type.value, "status": "True" if condition.status else "False",
            "reason": condition.reason, "message": condition.message,
            "lastTransitionTime": _iso(condition.last_transition_time)}
    if condition.observed_generation is not None:
        body["observedGeneration"] = condition.observed_generation
    return body


def would_conditions(conditions: list[dict[str, Any]], decision: Decision,
                     desired: int | None = None) -> list[dict[str, Any]]:
    """In a plan or a dry run nothing is written: a decision to rescale (to ``desired``:
    the settled count, the fallback's when it applies) is said as what would happen, in
    place of upstream's AbleToScale text for a target at rest."""
    desired = decision.desired_replicas if desired is None else desired
    if desired == decision.current_replicas:
        return conditions
    message = f"would rescale {decision.current_replicas} -> {desired}"
    if decision.rescale_reason:
        message += f": {decision.rescale_reason}"
    would = {"type": ConditionType.ABLE_TO_SCALE.value, "status": "True",
             "reason": EventReason.WOULD_SCALE.value, "message": message,
             "lastTransitionTime": None}
    return [would if c["type"] == ConditionType.ABLE_TO_SCALE.value else c
            for c in conditions]


def decision_json(decision: Decision) -> dict[str, Any]:
    """Each stage of the decision, as numbers and times (``status`` renders the words)."""
    body: dict[str, Any] = {
        "time": _iso(decision.decided_at),
        "current": decision.current_replicas,
        "proposal": decision.proposal,
        "proposedBy": decision.proposed_by or None,
        "stabilized": decision.stabilized,
        "desired": decision.desired_replicas,
        "steps": [s.value for s in decision.steps],
    }
    if decision.rescale_reason:
        body["rescaleReason"] = decision.rescale_reason
    if decision.bounds is not None:
        body["bounds"] = {"minReplicas": decision.bounds.min_replicas,
                          "maxReplicas": decision.bounds.max_replicas,
                          "scheduled": decision.bounds.gradual}
    if decision.hold is not None:
        hold = decision.hold
        body["stabilization"] = {
            "reason": hold.reason.value, "windowSeconds": _whole(hold.window_seconds),
            "heldAt": hold.held_at, "releasesAt": _iso(hold.releases_at)}
    if decision.limit is not None:
        body["limit"] = limit_json(decision.limit)
    if decision.error:
        body["error"] = decision.error
    return body


def limit_json(limit: StepLimit) -> dict[str, Any]:
    policy = limit.policy
    return {
        "reason": limit.reason.value, "limit": limit.limit,
        "policy": None if policy is None else {
            "type": policy.type.value, "value": policy.value,
            "periodSeconds": policy.period_seconds},
        "selectPolicy": None if limit.select_policy is None else limit.select_policy.value,
        "nextStepAt": _iso(limit.next_step_at),
    }


def scale_down_json(decision: Decision) -> dict[str, Any]:
    """The earliest a scale-down can happen if the metrics dropped now, or what forbids it."""
    earliest = decision_scale_down(decision)
    if earliest is not None:
        return {"earliest": _iso(earliest)}
    bounds, rules = decision.bounds, decision.scale_down
    if rules is None:
        why = "no valid metrics this pass: nothing is scaled down"
    elif bounds is not None and decision.desired_replicas <= bounds.min_replicas:
        why = f"at minReplicas ({bounds.min_replicas})"
    else:
        why = "scale-down is disabled (behavior.scaleDown.selectPolicy = Disabled)"
    return {"earliest": None, "blockedBy": why}


def scale_events_json(history: History,
                      scaled: Sequence[tuple[float, int, int]] = ()) -> list[dict[str, Any]]:
    """The recent scale writes that landed, newest first: those this process saw (counted
    by a policy or not: without ``behavior`` upstream keeps no event) and those the history
    still counts (from before a restart), each once."""
    events = {(at, "up" if new > previous else "down", abs(new - previous))
              for at, previous, new in scaled}
    events |= {(event.timestamp, "up", event.change) for event in history.scale_up_events
               if not event.outdated}
    events |= {(event.timestamp, "down", event.change) for event in history.scale_down_events
               if not event.outdated}
    newest = sorted(events, reverse=True)[:MAX_SCALE_EVENTS]
    return [{"time": _iso(at), "direction": direction, "change": change}
            for at, direction, change in newest]


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
    """A metric as HPA status shows it (quantities as Kubernetes quantity strings), with the
    query that was read (as the target's template renders it: a ring member runs a share's
    cut of a fleet-wide one) and, for per-pod metrics, each pod's value and group."""
    spec = outcome.spec
    body: dict[str, Any] = {
        "type": spec.type.value,
        "name": spec.name,
        "description": outcome.description,
        "target": _present(type=spec.target.type.value,
                           averageUtilization=spec.target.average_utilization,
                           averageValue=_quantity(spec.target.average_value),
                           value=_quantity(spec.target.value)),
    }
    if spec.container:
        body["container"] = spec.container
    values = outcome.values
    if values is not None and values.query is not None:
        body["query"] = values.query
    proposal = outcome.proposal
    if proposal is None:
        body["error"] = outcome.error
    else:
        current = proposal.current
        body["current"] = _present(averageUtilization=current.average_utilization,
                                   averageValue=_quantity(current.average_value),
                                   value=_quantity(current.value))
        body["proposal"] = proposal.replicas
        body["ratio"] = _ratio(proposal.ratio)
        if proposal.rebalanced_ratio is not None:
            body["rebalancedRatio"] = _ratio(proposal.rebalanced_ratio)
        body["withinTolerance"] = proposal.within_tolerance
    pods = _pods_json(outcome)
    if pods is not None:
        body["pods"] = pods
    return body


def _pods_json(outcome: MetricOutcome) -> dict[str, Any] | None:
    """Per-pod values and the named groups of a per-pod metric (None for the others)."""
    values = outcome.values
    if not isinstance(values, PodValues):
        return None
    groups = outcome.proposal.pods if outcome.proposal is not None else None
    unready = groups.unready if groups else frozenset()
    ignored = groups.ignored if groups else frozenset()
    body: dict[str, Any] = {
        "ready": sorted(set(values.values) - unready - ignored),
        "unready": sorted(unready),
        "missing": sorted(groups.missing) if groups else [],
        "ignored": sorted(ignored),
        "values": {name: format_milli(value) for name, value in sorted(values.values.items())},
    }
    if groups is None:
        del body["unready"], body["missing"], body["ignored"]  # unknown: no proposal made
    return body


def _present(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


def _quantity(milli: int | None) -> str | None:
    return None if milli is None else format_milli(milli)


def _ratio(ratio: float) -> float | None:
    """Rounded for reading; an infinite ratio (no replicas to divide by) is ``null``."""
    return round(ratio, 4) if math.isfinite(ratio) else None


def _whole(seconds: float) -> float:
    """Whole seconds as an integer, as Kubernetes spells its *Seconds fields (a window may be
    a float or an int in memory: the compiled core holds every one as a float)."""
    return int(seconds) if float(seconds).is_integer() else seconds


def _iso(moment: float | None) -> str | None:
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def target_status(state: TargetState, target: TargetConfig, *, planned: bool) -> dict[str, Any]:
    """The target's ``/status`` body (``plan``'s too): its bounds from the config while no
    decision says them (a target paused or unreadable since the start). ``planned``: a dry
    run or ``plan`` writes nothing, so its conditions say what a pass would write."""
    body = state.to_json(planned=planned)
    body["generation"] = target.generation
    body.setdefault("minReplicas", target.spec.min_replicas)
    body.setdefault("maxReplicas", target.spec.max_replicas)
    return body
