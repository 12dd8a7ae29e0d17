"""Scale to and from zero (``minReplicas = 0``): KEDA's activation around the exact HPA core,
with upstream's ScaledToZero rule for whose zero it is.

Upstream (HPAScaleToZero, beta and on by default since Kubernetes 1.37) evaluates a target at
0 replicas only if the controller itself scaled it there, as its ``ScaledToZero`` condition
records; a target found at 0 otherwise was switched off by hand and is left alone ("scaling is
disabled"). KEDA adds the activation phase users of queue workers rely on: a workload goes
0 -> 1 as soon as any trigger is above its ``activationThreshold`` and back to 0 only after
every trigger has been inactive for ``cooldownPeriod``. Here:

- **1 <-> N is ``decide`` exactly**, with the floor raised to 1 while the target runs: the
  HPA algorithm never takes it to zero on its own.
- **Activity** is read from the Object and External metrics only, from their raw values (an
  Object's value, the sum of an External query's series), as KEDA reads its triggers: CPU,
  memory and per-pod metrics cannot be measured at zero pods. A metric is *active* above its
  threshold (default 0), *inactive* at or below it, *unknown* when it is invalid. Unknown is
  never inactive: missing data never takes a target to zero, and it cannot wake one either.
- **At 0, scaled there by us**: any metric active -> the HPA's proposal from zero, at least 1
  (rate limits apply); otherwise it stays at 0.
- **Above 0**: every metric inactive for ``cooldown`` seconds (counted from the last pass
  any was active or unknown, or from when this run first saw the target, whichever is
  later) and ``initial_cooldown`` seconds since ``first_seen`` (the caller's: the later of
  the daemon's start and the target's first pass, kept across moves) -> 0,
  directly, as KEDA does. Unlike KEDA, time without a valid reading does not count toward
  the cooldown: an outage says nothing about the queue, so after one the target needs a
  whole cooldown of inactive readings (KEDA moves its ``lastActiveTime`` only for an active
  trigger, and a failing trigger is not active).
- A scheduled floor above 0 in force keeps the target up. A ``minReplicas`` raised above 0
  (or a schedule's floor) while we hold the target at 0 wakes it as upstream does: the
  metrics are evaluated from zero and the result raised to the floor (more than the floor
  when they ask for more). Where every metric fails, upstream leaves the target at 0 until
  one reads again; we wake it to the floor: the floor is the user's word, and an outage
  says nothing against it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from autoscaler.algorithm.decision import GOT_SCALE, Decide, decide, seed_history
from autoscaler.algorithm.decision_values import Bounds, Condition, Decision, DecisionInput
from autoscaler.algorithm.model import (
    AutoscalerSpec,
    ExternalMetricValues,
    History,
    MetricValues,
    Milli,
    ObjectMetricValue,
    Seconds,
)
from autoscaler.algorithm.reasons import ConditionType, Reason, Step
from autoscaler.algorithm.zero_values import Activity, ActivityState, ZeroDecision, ZeroMemory
from autoscaler.record import record

DEFAULT_COOLDOWN = 300.0
"""KEDA's default ``cooldownPeriod``."""


@record
class ScaleToZero:
    """A target's scale-to-zero settings."""

    activation_thresholds: tuple[Milli | None, ...]
    """Aligned with ``spec.metrics``; ``None`` for a metric that cannot activate (not Object
    or External)."""
    cooldown: Seconds = DEFAULT_COOLDOWN
    initial_cooldown: Seconds = 0.0


PAUSED_AT_ZERO = ("scaling is disabled since the replica count of the target is zero and the "
                  "autoscaler did not scale it to zero (set replicas above 0 to resume)")


def activity(spec: AutoscalerSpec, metrics: Sequence[MetricValues],
             thresholds: Sequence[Milli | None]) -> Activity:
    """Whether any activation metric is above its threshold (KEDA's ``IsActive``)."""
    unknown: str | None = None
    for metric, values, threshold in zip(spec.metrics, metrics, thresholds, strict=True):
        if threshold is None:
            continue
        value = raw_value(values)
        if value is None:
            unknown = unknown or metric.name
        elif value > threshold:
            return Activity(state=ActivityState.ACTIVE, metric=metric.name, value=value,
                            threshold=threshold)
    if unknown is not None:
        return Activity(state=ActivityState.UNKNOWN, metric=unknown)
    return Activity(state=ActivityState.INACTIVE)


def raw_value(values: MetricValues) -> Milli | None:
    """An Object metric's value or the sum of an External metric's series; ``None`` when the
    metric is unavailable (or is not a single value)."""
    if isinstance(values, ObjectMetricValue):
        return values.value
    if isinstance(values, ExternalMetricValues) and values.values:
        return Milli(sum(values.values))
    return None


def decide_with_zero(
    given: DecisionInput, *, rules: ScaleToZero | None, memory: ZeroMemory, first_seen: Seconds,
    core: Decide = decide,
) -> ZeroDecision:
    """``decide`` with the scale-to-zero rules of this module; ``rules`` is ``None`` for a
    target whose ``minReplicas`` is above 0. ``core`` stands for ``decide`` (the runtime
    passes predictive scaling's, which wraps it)."""
    spec, metrics, history, now = given.spec, given.metrics, given.history, given.now
    bounds = given.bounds or Bounds(min_replicas=spec.min_replicas,
                                    max_replicas=spec.max_replicas)
    current = given.scale.spec_replicas
    if current > 0 and memory.scaled_to_zero:
        # Running again (woken by us, or by hand): a later zero is ours only if we make it.
        memory = dataclasses.replace(memory, scaled_to_zero=False, adopted_from=None)
    if current == 0 and not memory.scaled_to_zero and rules is not None:
        # Activity is still read: a zero set by hand while work waits is said, loudly.
        return ZeroDecision(decision=_paused_at_zero(history, now), memory=memory,
                            activity=activity(spec, metrics, rules.activation_thresholds))
    if current == 0 and memory.scaled_to_zero and (rules is None or bounds.min_replicas > 0):
        # We hold it at 0 and the floor went up since (min raised, a schedule): wake it.
        return ZeroDecision(decision=_woken_to_floor(given, bounds, core), memory=memory)
    if rules is None or bounds.min_replicas > 0:
        plain = core(given if given.bounds is bounds else given.with_bounds(bounds))
        return ZeroDecision(decision=plain, memory=memory)
    running = bounds if current == 0 else dataclasses.replace(bounds, min_replicas=1)
    decision = core(given.with_bounds(running))
    act = activity(spec, metrics, rules.activation_thresholds)
    # Unknown restarts the cooldown as active does: only inactivity seen counts toward it.
    seen_inactive = act.state is ActivityState.INACTIVE
    last = memory.last_active if seen_inactive and memory.last_active is not None else now
    memory = dataclasses.replace(memory, last_active=last)
    if current == 0:
        return ZeroDecision(decision=_from_zero(decision, act), memory=memory, activity=act)
    return _toward_zero(decision, act, memory=memory, rules=rules, now=now,
                        first_seen=first_seen)


def _from_zero(decision: Decision, act: Activity) -> Decision:
    """At 0 (ours): an active metric wakes the target to the HPA's proposal, at least 1."""
    if act.state is not ActivityState.ACTIVE:
        return dataclasses.replace(decision, desired_replicas=0,
                                   steps=(*decision.steps, Step.INACTIVE), rescale_reason="")
    return dataclasses.replace(
        decision, desired_replicas=max(1, decision.desired_replicas),
        steps=(*decision.steps, Step.ACTIVATED), rescale_reason=f"{act.describe()}: activating")


def _toward_zero(decision: Decision, act: Activity, *, memory: ZeroMemory,
                 rules: ScaleToZero, now: Seconds, first_seen: Seconds) -> ZeroDecision:
    """Running: to 0 once every activation metric has been inactive for the cooldown."""
    if act.state is not ActivityState.INACTIVE or memory.last_active is None:
        return ZeroDecision(decision=decision, memory=memory, activity=act)
    idle_until = max(memory.last_active + rules.cooldown, first_seen + rules.initial_cooldown)
    if now < idle_until:
        return ZeroDecision(decision=decision, memory=memory, activity=act,
                            idle_until=idle_until)
    return ZeroDecision(decision=dataclasses.replace(
        decision, desired_replicas=0, steps=(*decision.steps, Step.DEACTIVATED),
        rescale_reason=(f"{act.describe()} for {rules.cooldown:g}s (cooldownPeriod): "
                        "scaling to zero")), memory=memory, activity=act, idle_until=idle_until)


def scaled_to_zero_condition(*, previous: int, new: int, rules: ScaleToZero | None) -> Condition:
    """Upstream's ScaledToZero condition after a successful rescale: True only for a move from
    above 0 to 0 of a target that may scale to zero."""
    if previous > 0 and new == 0 and rules is not None:
        return Condition(type=ConditionType.SCALED_TO_ZERO, status=True,
                         reason=Reason.SCALED_TO_ZERO,
                         message="the autoscaler scaled the workload to zero")
    return Condition(type=ConditionType.SCALED_TO_ZERO, status=False,
                     reason=Reason.NOT_SCALED_TO_ZERO,
                     message="the autoscaler did not scale the workload to zero")


def _paused_at_zero(history: History, now: Seconds) -> Decision:
    return Decision(
        current_replicas=0, desired_replicas=0, steps=(Step.SCALING_DISABLED,),
        history=seed_history(history, 0, now),
        conditions=(GOT_SCALE, Condition(
            type=ConditionType.SCALING_ACTIVE, status=False, reason=Reason.SCALING_DISABLED,
            message=PAUSED_AT_ZERO)),
    )


def _woken_to_floor(given: DecisionInput, bounds: Bounds, core: Decide) -> Decision:
    """Upstream (``shouldComputeMetricsForZeroReplicas``: ``minReplicas != 0`` and
    ScaledToZero True): "compute metrics" from zero, normalize, and "if desiredReplicas <
    minReplicas, desiredReplicas = minReplicas"."""
    floor = max(1, bounds.min_replicas)
    from_zero = core(DecisionInput(
        spec=dataclasses.replace(given.spec, min_replicas=0), scale=given.scale,
        metrics=given.metrics, pods=given.pods, history=given.history, now=given.now,
        settings=given.settings,
        bounds=Bounds(min_replicas=0, max_replicas=bounds.max_replicas)))
    if from_zero.desired_replicas >= floor:
        return dataclasses.replace(from_zero, bounds=bounds)
    return dataclasses.replace(
        from_zero, desired_replicas=floor, bounds=bounds,
        steps=(*from_zero.steps, Step.REPLICA_LIMIT),
        rescale_reason="Current number of replicas below Spec.MinReplicas")
