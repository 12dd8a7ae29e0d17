"""A pass's first step: read each target (its ``/scale``, owners and pods) into an
``Observed``, or say why it cannot be read.

What the caches hold is read in one plain loop; only targets they cannot answer for take a
worker and ask the API server, within half the pass's time left. On the way the read settles
an intent whose outcome was unknown (``intents.settle_intent``), notes drift, whose zero the
target is (``zero_owner``) and another autoscaler on it (the target is then held). A target
that cannot be read gets a condition, an Event and a warning said when it starts, changes or
ends; never an exception that stops the others.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence
from enum import Enum
from typing import TYPE_CHECKING

import structlog

from autoscaler.algorithm import EventReason, Pod, Reason
from autoscaler.algorithm.zero_values import ZeroMemory
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.observability.repeats import RepeatedWarnings
from autoscaler.record import record
from autoscaler.runtime.conditions import merge_conditions
from autoscaler.runtime.intents import settle_intent
from autoscaler.runtime.pause import Pause, pause_of
from autoscaler.runtime.ports import OwnersPort, PodPort, Scale, ScalePort
from autoscaler.runtime.reconcile_options import ReconcileOptions
from autoscaler.runtime.reporting import Reporter
from autoscaler.runtime.status import TargetState
from autoscaler.runtime.workers import WorkerPool
from autoscaler.runtime.zero_owner import (
    adopt_keda_zero,
    owned_memory,
    ownership_condition,
    zero_ownership,
)
from autoscaler.snapshot import Intent

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig

log = structlog.get_logger("autoscaler.reconcile")  # the pass's lines, as before the split


class _Ask(Enum):
    ASK = "ask"
    """The caches cannot answer for this target: read it from the API server."""


_ASK = _Ask.ASK


@record
class Observed:
    target: TargetConfig
    scale: Scale
    pods: Sequence[Pod]
    pause: Pause | None = None
    on_its_way: Intent | None = None
    """An earlier write of ours that may still reach the server (``settle_intent``): this
    pass writes the object, so that it cannot land later."""


class Observer:
    """Reads targets for the reconciler: the ``states`` it shares, its ``workers`` and
    ``report``; ``wants_record`` asks for a store write at the end of the pass."""

    def __init__(
        self,
        *,
        scales: ScalePort,
        pods: PodPort,
        owners: OwnersPort,
        states: dict[str, TargetState],
        workers: WorkerPool,
        report: Reporter,
        telemetry: DaemonMetrics,
        options: ReconcileOptions,
        clock: Callable[[], float],
        wants_record: Callable[[], None],
    ) -> None:
        self.scales, self.pods, self.owners = scales, pods, owners
        self.states, self.workers, self.report = states, workers, report
        self.telemetry, self.options, self.clock = telemetry, options, clock
        self.wants_record = wants_record
        # A target that cannot be read fails the same way every pass: its warning is said
        # when it starts, changes or ends, and every few minutes in between.
        self.unreadable = RepeatedWarnings(log)

    async def observe_all(self, targets: Sequence[TargetConfig],
                           deadline: float) -> list[Observed]:
        """What the caches hold is read in one plain loop; only targets they cannot answer
        for (a kind not watched, a list to fetch) take a worker and a coroutine each."""
        read = [self._observe_cached(target) for target in targets]
        asking = [target for target, got in zip(targets, read, strict=True) if got is _ASK]
        if asking:
            # Observation may use at most half the time left, so targets whose API calls
            # hang cannot hold back the metrics, decisions and writes of all the others.
            budget = max(0.5, (deadline - time.monotonic()) / 2)
            until = asyncio.get_running_loop().time() + budget
            answered = iter(await self.workers.each(
                asking, self._observe, until=until,
                timed_out=lambda t: self._observe_timed_out(t, budget)))
            read = [next(answered) if got is _ASK else got for got in read]
        return [got for got in read if isinstance(got, Observed)]

    def _observe_timed_out(self, target: TargetConfig, budget: float) -> None:
        message = (f"reading the target did not finish within the pass's {budget:.1f}s "
                   "for observation; skipped this pass")
        self.unreadable.warn(target.key, "target skipped", target=target.key,
                             reason="reading the target did not finish within the pass's "
                                    "time for observation", budget_seconds=round(budget, 1))
        self.telemetry.errors.labels(reason="observe_timeout").inc()
        self.report.fail(in_pass(self.states, target.key), target, Reason.FAILED_GET_SCALE, message)

    def _observe_cached(self, target: TargetConfig) -> Observed | _Ask | None:
        """``_observe`` from memory alone, or ``_ASK`` when the API server must be asked."""
        namespace, ref = target.namespace, target.scale_target_ref
        state = self.states.get(target.key)
        if state is not None and state.intent is not None:
            return _ASK  # only a fresh read can tell whether that write landed
        try:
            scale = self.scales.cached_scale(namespace, ref)
            owners = self.owners.cached_owners(namespace, ref) if scale is not None else None
        except Exception:  # the asking path meets the same fault and reports it
            return _ASK
        if scale is None or owners is None:
            return _ASK
        return self._observed(target, scale, owners)

    async def _observe(self, target: TargetConfig) -> Observed | None:
        state = in_pass(self.states, target.key)
        try:
            scale = await self.scales.get_scale(target.namespace, target.scale_target_ref,
                                                fresh=state.intent is not None)
        except Exception as error:  # any adapter fault: this target only, this pass only
            self.unreadable.warn(target.key, "cannot read the target's scale", target=target.key,
                                 reason=str(error))
            self.report.fail(
                state, target, Reason.FAILED_GET_SCALE,
                f"the autoscaler was unable to get the target's current scale: {error}")
            await self.report.event(target, warning=True, reason=Reason.FAILED_GET_SCALE,
                                    message=str(error))
            return None
        try:
            owners = await self.owners.owners_of(target.namespace, target.scale_target_ref)
        except Exception as error:
            # Not knowing whether another autoscaler owns the target: do not act on it.
            owners = (f"unknown (cannot list autoscalers: {error})",)
        return self._observed(target, scale, owners)

    def _observed(self, target: TargetConfig, scale: Scale,
                  owners: tuple[str, ...]) -> Observed | None:
        """The target read: its drift noted; ``None`` if another autoscaler owns it or its
        pods cannot be listed yet."""
        state = in_pass(self.states, target.key)
        state.current_replicas = scale.spec_replicas
        on_its_way = None
        if state.intent is not None:
            on_its_way = settle_intent(state, target, scale, now=self.clock(),
                                      settings=self.options.algorithm)
        if not target.shadow:  # in shadow mode the other autoscaler is the one writing
            self._check_drift(state, target, scale.spec_replicas)
            state.shadow = None  # shadow mode switched off (a reload): its comparison goes too
        else:
            self._remember_zero(state, adopt_keda_zero(state.zero, scale, owners))
        self._own_zero(state, target, scale)
        state.blocked_by = () if target.shadow else owners
        if state.blocked_by:
            self._readable_again(target)
            self._blocked(state, target, scale)
            return None
        try:
            pods = self.pods.pods_for(target.namespace, scale.selector) if scale.selector else ()
        except Exception as error:  # namespace not synced yet, or a selector we cannot parse
            self.unreadable.warn(target.key, "cannot list the target's pods", target=target.key,
                                 reason=str(error))
            self.report.fail(state, target, Reason.FAILED_GET_SCALE,
                             f"the pods of the target cannot be listed yet: {error}")
            return None
        self._readable_again(target)
        pause = pause_of(target, scale.annotations)
        # Said from the read on: /status may be read while the pass awaits other targets.
        state.pause = pause.source if pause is not None else None
        return Observed(target=target, scale=scale, pods=pods, pause=pause,
                        on_its_way=on_its_way)

    def _own_zero(self, state: TargetState, target: TargetConfig, scale: Scale) -> None:
        """At 0 replicas: whose zero it is, by who last set the count (the cluster's
        record) and where that cannot tell by our memory; the memory follows."""
        if scale.spec_replicas != 0:
            state.zero_owner = None
            return
        ownership = zero_ownership(scale.replicas_managers, state.zero)
        state.zero_owner = ownership
        if self._remember_zero(state, owned_memory(state.zero, ownership)):
            log.info("whose zero the target is, as the cluster records who set its replicas",
                     target=target.key, owner=ownership.owner.value,
                     replicas_set_by=ownership.set_by)
            state.conditions = merge_conditions(
                state.conditions, (ownership_condition(ownership),), self.clock())

    def _remember_zero(self, state: TargetState, memory: ZeroMemory) -> bool:
        """Keep ``memory`` as the target's; a change is put on record (a store write at the
        end of the pass) so that a restart knows it too. Whether it changed."""
        if memory == state.zero:
            return False
        state.zero = memory
        if self.options.persist is not None and not self.options.dry_run:
            self.wants_record()
        return True

    def _readable_again(self, target: TargetConfig) -> None:
        if self.unreadable:  # only while some target is unreadable: a calm pass pays nothing
            self.unreadable.clear(target.key, "target readable again", target=target.key)

    def _check_drift(self, state: TargetState, target: TargetConfig, observed: int) -> None:
        expected = state.expected_replicas
        state.drift = None
        if expected is not None and observed != expected:
            state.drift = f"replicas changed from {expected} to {observed} outside the autoscaler"
            self.telemetry.target(target.key).drift += 1
            log.warning("drift", target=target.key, expected=expected, observed=observed)
            self.report.spawn(target, warning=False, reason=EventReason.SCALE_DRIFT,
                              message=state.drift)
        state.expected_replicas = observed

    def _blocked(self, state: TargetState, target: TargetConfig, scale: Scale) -> None:
        message = "another autoscaler targets this object: " + ", ".join(state.blocked_by)
        if state.last_outcome != "blocked":
            log.warning("not acting: target owned elsewhere", target=target.key,
                        owners=state.blocked_by)
            self.report.spawn(target, warning=True, reason=EventReason.AUTOSCALER_CONFLICT,
                              message=message)
        state.desired_replicas = None  # the other autoscaler decides
        self.report.finish(state, target, "blocked", error=message)


def in_pass(states: dict[str, TargetState], key: str) -> TargetState:
    """The target's state during a pass: the one in ``states`` if the pass began with it,
    else (removed since, or replaced by a new state) a detached one whose work is dropped."""
    state = states.get(key)
    return state if state is not None and state.in_flight else TargetState(key=key)


def with_pods(observed: Observed, pods: Sequence[Pod] | None) -> Observed:
    if pods is None:
        return observed
    return dataclasses.replace(observed, pods=pods)


def read_parts(observed: Sequence[Observed],
               pods_per_read: int | None) -> list[Sequence[Observed]]:
    """The pass's targets in the parts whose metrics are read one after another: each part's
    answer goes once its targets are decided, before the next part is read. A per-pod answer
    is most of a pass's memory over the caches (a ring member of 47,000 pods: 15 of the 25 MB
    a pass held at its peak), so a pass over more than ``pods_per_read`` pods reads in
    ``ceil(pods / pods_per_read)`` parts of about equal pods (``None``: one part).

    A namespace's targets stay in one part: a share's query is cut to the namespaces of the
    targets reading it (``adapters.prometheus.share``), so a namespace in two parts would be
    read twice; so a part with a namespace above the bound is above it too. Paused targets
    read no metrics and count no pods."""
    def weight(one: Observed) -> int:
        return 0 if one.pause is not None else len(one.pods)

    total = sum(weight(one) for one in observed)
    if pods_per_read is None or total <= pods_per_read:
        return [observed]
    by_namespace: dict[str, list[Observed]] = {}
    for one in observed:
        by_namespace.setdefault(one.target.namespace, []).append(one)
    count = -(-total // pods_per_read)
    parts: list[list[Observed]] = [[]]
    read = 0
    for namespace_targets in by_namespace.values():
        if parts[-1] and read >= total * len(parts) / count:
            parts.append([])  # this part has its share of the pods: the next begins
        parts[-1].extend(namespace_targets)
        read += sum(weight(one) for one in namespace_targets)
    return list(parts)
