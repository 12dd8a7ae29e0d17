"""One reconcile pass over a set of targets: observe, fetch, settle, make durable, write.

A pass reads every target's ``/scale``, owners and pods (from the caches in one loop, else
from the API server within half the time left), asks the metrics source once for all of
them (so shared PromQL is issued once; a share's pass over many pods, once a part, each
part's answer gone before the next is read: ``observe.read_parts``), decides every target
in one plain loop, puts the pass's scale writes on record with one store write, then sends
each target's Events and write. Each target's failure stays its own: it becomes a
condition, an Event and a log line, never an exception that stops the others.

What a pass touches lives beside it: ``observe`` (reading the targets: scale, owners,
pods, drift, intents settled), ``workers`` (the bounded pool all passes share),
``pause``, ``intents`` (writes on record before they are sent, settled after),
``writes`` (the PUT, its 409s and 429s, dry-run), ``landed`` (a scale that landed, with
ScaledToZero), ``shadow``, ``conditions`` and ``reporting`` (outcomes, Events, evaluation
failures said once). The fallback rule is the core's (``algorithm.fallback``).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import structlog

from autoscaler.algorithm import (
    AlgorithmSettings,
    Bounds,
    Decide,
    Decision,
    DecisionInput,
    EventReason,
    History,
    MetricUnavailable,
    MetricValues,
    Pod,
    Reason,
    ScaleState,
    Step,
    bridge_gap,
    decide,
    rate_limited,
    resolve_behavior,
)
from autoscaler.algorithm.activation import decide_with_zero
from autoscaler.algorithm.behavior import essential_history
from autoscaler.algorithm.decision import GOT_SCALE
from autoscaler.algorithm.fallback import fallback_reason, fallback_replicas
from autoscaler.algorithm.rescale import step_reason
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.observability.repeats import RepeatedWarnings
from autoscaler.runtime.conditions import merge_conditions
from autoscaler.runtime.heap import collector_paused
from autoscaler.runtime.history import with_fold_ins
from autoscaler.runtime.intents import OutcomeRecorder, put_on_record, settle_intent
from autoscaler.runtime.observe import Observed, Observer, in_pass, read_parts, with_pods
from autoscaler.runtime.pause import Pause
from autoscaler.runtime.ports import (
    EventPort,
    FetchedMetrics,
    MetricsPort,
    MetricsWanted,
    OwnersPort,
    PodPort,
    Scale,
    ScalePort,
)
from autoscaler.runtime.prediction import decide_with_prediction
from autoscaler.runtime.reconcile_options import ReconcileOptions
from autoscaler.runtime.reporting import Reporter
from autoscaler.runtime.shadow import compare_in_shadow
from autoscaler.runtime.status import TargetState, schedule_status
from autoscaler.runtime.workers import WorkerPool
from autoscaler.runtime.writes import (
    DecideAgain,
    ScaleWrite,
    ScaleWriter,
    resend,
    retry_after_hold,
)
from autoscaler.runtime.zero_owner import (
    stranded_condition,
    stranded_message,
)
from autoscaler.schedules import bounds_at
from autoscaler.snapshot import Intent

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig

log = structlog.get_logger("autoscaler.reconcile")

__all__ = ["ReconcileOptions", "Reconciler"]


@dataclass(slots=True, kw_only=True)
class _Pending:
    """A settled target's network work: metric-error events, then the write, then its outcome."""

    observed: Observed
    state: TargetState
    outcome: str
    error: str | None
    events: tuple[tuple[str, str], ...] = ()
    write: ScaleWrite | None = None
    held: str | None = None
    """Why a write the decision wanted is not sent this pass."""
    started: float = 0.0


def _may_resend(intent: Intent, decision: Decision, target: TargetConfig, history: History,
                *, now: float, settings: AlgorithmSettings) -> bool:
    """Whether a pass that decided ``decision`` (from ``history``) may send ``intent``'s
    write again: not on a pass with an invalid metric (it acts on no earlier decision), nor
    beyond what the bounds and rate limits in force now allow (a reload or a schedule may
    have changed them since; unchanged, they allow it: no step was taken since)."""
    if Step.INVALID_METRICS in decision.steps or Step.SCALING_DISABLED in decision.steps:
        return False
    spec = target.spec
    bounds = decision.bounds or Bounds(min_replicas=spec.min_replicas,
                                       max_replicas=spec.max_replicas)
    behavior = resolve_behavior(spec.behavior, settings) if spec.behavior else None
    return intent.desired == rate_limited(history, intent.previous, intent.desired,
                                          bounds.min_replicas, bounds.max_replicas,
                                          behavior, now)


class Reconciler:
    def __init__(
        self,
        *,
        scales: ScalePort,
        pods: PodPort,
        metrics: MetricsPort,
        events: EventPort,
        owners: OwnersPort,
        options: ReconcileOptions,
        telemetry: DaemonMetrics,
        clock: Callable[[], float] = time.time,
        wall: Callable[[], float] | None = None,
    ) -> None:
        self.metrics = metrics
        self.telemetry = telemetry
        self.clock = clock
        """``now`` for the core, the history and the conditions (the daemon's timeline)."""
        self.started = clock()
        """This run's start: no target's initial cooldown counts from earlier."""
        self.wall = wall or clock
        """The wall clock: what schedules' windows are read against."""
        self.states: dict[str, TargetState] = {}
        self.workers = WorkerPool(options.concurrency)
        self.report = Reporter(events=events, telemetry=telemetry, clock=clock)
        self.outcomes = OutcomeRecorder(lambda: self.options.persist, self._unrecorded)
        self.unrecorded = RepeatedWarnings(log)
        self.writer = ScaleWriter(scales=scales, report=self.report, telemetry=telemetry,
                                  clock=clock, configured=self._configured,
                                  known=self.outcomes.want)
        self.observer = Observer(
            scales=scales, pods=pods, owners=owners, states=self.states, workers=self.workers,
            report=self.report, telemetry=telemetry, options=options, clock=clock,
            wants_record=self.outcomes.want)
        self.options = options

    @property
    def options(self) -> ReconcileOptions:
        return self._options

    @options.setter
    def options(self, options: ReconcileOptions) -> None:
        """Options may be replaced between passes (a config reload); the worker pool keeps
        the concurrency it started with."""
        self._options = self.observer.options = options
        self.report.record_events = options.record_events
        self.report.settings = options.algorithm

    def state(self, key: str) -> TargetState:
        state = self.states.get(key)
        if state is None:
            state = self.states[key] = TargetState(key=key)
        return state

    def viewed(self, key: str) -> TargetState:
        """The state a view shows (``/status``): the target's own, or a pending one that is
        not kept. A view never makes a state: /status is written a target at a time, and
        one made for a target a reload or a move removed meanwhile would hide the history
        kept for it."""
        return self.states.get(key) or TargetState(key=key)

    def remove(self, key: str) -> TargetState | None:
        """A target left the config (a reload; its state is returned, to be kept) or this
        ring member's holdings (dropped: its next owner reads its history). A pass
        still running over it neither re-creates the state (an empty history that would
        hide the kept one) nor writes the target; its ongoing warnings end with it."""
        self.unreadable.forget(key)
        self.writer.failing.forget(key)
        return self.states.pop(key, None)

    @property
    def owners(self) -> OwnersPort:
        """Who else autoscales a target: read while observing, and in shadow mode."""
        return self.observer.owners

    @owners.setter
    def owners(self, owners: OwnersPort) -> None:
        self.observer.owners = owners

    @property
    def unreadable(self) -> RepeatedWarnings:
        """The targets that cannot be read now, each warned of while it lasts."""
        return self.observer.unreadable

    def _configured(self, state: TargetState) -> bool:
        """Whether ``state`` is still its target's (no reload removed it meanwhile)."""
        return self.states.get(state.key) is state

    async def run_pass(self, targets: Sequence[TargetConfig], *, deadline: float) -> None:
        """Reconcile ``targets`` once; ``deadline`` is a ``time.monotonic()`` instant."""
        with collector_paused():
            await self._run_pass(targets, deadline=deadline)

    async def _run_pass(self, targets: Sequence[TargetConfig], *, deadline: float) -> None:
        started = time.monotonic()
        flying = [self.state(target.key) for target in targets]
        for state in flying:
            state.in_flight = True
            state.begin_pass()
        unsettled = [state for state in flying if state.intent is not None]
        try:
            observed = await self.observer.observe_all(targets, deadline)
            # A fresh read settled these: the store must not hold their intents any more.
            settled = any(state.intent is None for state in unsettled)
            pending: list[_Pending] = []
            for part in read_parts(observed, self.options.pods_per_read):
                fetched = await self._fetch(part, deadline)
                # Deciding is CPU only: one plain loop (a coroutine and a worker slot per
                # target cost ~5 ms a pass at 1,000 targets); only what must write or record
                # an event goes on to the workers.
                pending.extend(p for p in (
                    self._settle(with_pods(o, fetched.pods.get(o.target.key)),
                                 fetched.values.get(o.target.key))
                    for o in part) if p is not None and self._configured(p.state))
                del fetched  # this part's answer goes before the next part is read
            # Every pass goes on record (its recommendations: a later window may need them),
            # in its intents' write if it has one, else in a write of its own.
            if not await self._make_durable(pending) and (settled or observed):
                self.outcomes.want()
            await self.workers.each(pending, self._complete)
            await self.outcomes.flush()
        finally:
            for state in flying:
                state.in_flight = False
            self.telemetry.observe_pass(period=targets[0].sync_period if targets else 0.0,
                                        seconds=time.monotonic() - started)

    # --- observe ----------------------------------------------------------------------

    def _say_stranded(self, state: TargetState, target: TargetConfig,
                      decision: Decision) -> None:
        """Work waits at a zero this daemon may not wake: said on the ScalingActive
        condition every pass, as a Warning Event and a log line when it starts."""
        message = stranded_message(target, decision, state.activity, state.zero_owner)
        if message is None:
            if state.stranded is not None:
                log.info("no work waits at the zero any more", target=target.key)
            state.stranded = None
            return
        state.conditions = merge_conditions(state.conditions, (stranded_condition(message),),
                                            self.clock())
        if state.stranded is None:
            log.warning("work waits at a zero the autoscaler did not make", target=target.key,
                        message=message)
            self.report.spawn(target, warning=True, reason=EventReason.STRANDED_AT_ZERO,
                              message=message)
        state.stranded = message

    # --- metrics ----------------------------------------------------------------------

    async def _fetch(self, observed: Sequence[Observed], deadline: float) -> FetchedMetrics:
        wanted = [
            MetricsWanted(target=o.target, pods=o.pods, scale_selector=o.scale.selector)
            for o in observed if o.pause is None
        ]
        if not wanted:
            return FetchedMetrics(values={}, pods={})
        started = time.monotonic()
        try:  # the port never raises: what it cannot read is MetricUnavailable
            return await self.metrics.fetch_metrics(wanted, deadline=deadline)
        finally:
            self.telemetry.query_duration.observe(time.monotonic() - started)

    # --- decide and act ---------------------------------------------------------------

    def _settle(
        self, observed: Observed, values: tuple[MetricValues, ...] | None
    ) -> _Pending | None:
        """Decide and record one target; what is left to do over the network, if anything."""
        target = observed.target
        state = self.states.get(target.key)
        if state is None or not state.in_flight:
            # Removed since the pass began (a reload; a bucket no longer held), or replaced
            # (the bucket claimed again and its history read anew, with a pending write this
            # pass never read fresh): its work is dropped, no decision, no Event.
            return None
        started = time.monotonic()
        try:
            if observed.pause is not None:
                pending = self._settle_paused(observed, observed.pause, state)
            else:
                pending = self._settle_autoscaled(observed, state, values)
        except Exception as error:  # a bug or an unexpected fault: hold this target only
            self.report.failed(state, target, error)
            pending = None
        if pending is None:
            self.telemetry.reconcile_duration.observe(time.monotonic() - started)
            return None
        pending.started = started
        return pending

    def _settle_paused(self, observed: Observed, pause: Pause,
                       state: TargetState) -> _Pending | None:
        state.desired_replicas = pause.replicas  # held there, or left alone (None)
        state.shadow = None
        # Read this pass: an earlier pass's FailedGetScale no longer holds. Upstream says
        # SucceededGetScale after every read; a paused target gets no decision to say more.
        state.conditions = merge_conditions(state.conditions, (GOT_SCALE,), self.clock())
        hold = pause.write_to(observed.scale.spec_replicas, shadow=observed.target.shadow)
        if hold is None:
            self.report.finish(state, observed.target, "paused", error=None)
            return None
        again = None  # the count held stands whatever the target holds after a conflict
        if observed.on_its_way is not None:
            # Nothing is decided here: the history at the conflict (None), with what a store
            # conflict folded in meanwhile, is the one to settle the write on its way in.
            again = self._settling_first(observed, state, None, lambda _: lambda _: hold)
        return _Pending(observed=observed, state=state, outcome="paused", error=None,
                        write=ScaleWrite(target=observed.target, state=state,
                                         scale=observed.scale, desired=hold,
                                         reason=pause.reason, decide_again=again,
                                         supersedes=observed.on_its_way))

    def _settle_autoscaled(
        self, observed: Observed, state: TargetState, values: tuple[MetricValues, ...] | None
    ) -> _Pending | None:
        target = observed.target
        if values is None:
            values = (MetricUnavailable(reason="no metrics were fetched"),) * len(
                target.spec.metrics)
        if state.bridge_gap:
            # Lost with the gap: recommendations, and whether the target was active.
            now = self.clock()
            state.bridge_gap = False
            state.history = bridge_gap(state.history, observed.scale.spec_replicas, now)
            state.zero = dataclasses.replace(state.zero, last_active=now)
        history_before = state.history
        decision = self._decide(target, observed.scale, observed.pods, values, history_before)
        desired = self._count_invalid(target, state, decision)
        self._record_decision(target, state, decision)
        state.decided(decision, desired)
        self._say_stranded(state, target, decision)
        if target.shadow:
            compare_in_shadow(state, target, decision, desired, owners=self.owners,
                              report=self.report)
            return None
        outcome = "invalid_metrics" if Step.INVALID_METRICS in decision.steps else "ok"
        events = _metric_error_events(decision)
        write = None
        if desired != decision.current_replicas:
            reason = (fallback_reason(state.consecutive_invalid) if state.fallback_active
                      else step_reason(decision, desired))
            again = self._decide_again(observed, state, values, history_before)
            if observed.on_its_way is not None:
                again = self._settling_first(
                    observed, state, history_before,
                    lambda counted: self._decide_again(observed, state, values, counted))
            write = ScaleWrite(target=target, state=state, scale=observed.scale,
                               desired=desired, reason=reason, decide_again=again,
                               supersedes=observed.on_its_way)
        elif observed.on_its_way is not None and _may_resend(
                observed.on_its_way, decision, target, history_before, now=self.clock(),
                settings=self.options.algorithm):
            # Our write on record may still reach the server; the object is written this
            # pass so that it cannot land later, from whoever sent it (intents.py).
            log.info("sending again a scale write that may still be on its way",
                     target=target.key, previous=observed.on_its_way.previous,
                     desired=observed.on_its_way.desired)
            write = resend(target, state, observed.scale, observed.on_its_way,
                           settled=self._settling_first(
                               observed, state, None, lambda _: lambda fresh: fresh.spec_replicas))
        if write is None and not events:
            self.report.finish(state, target, outcome, error=decision.error)
            return None
        return _Pending(observed=observed, state=state, outcome=outcome, error=decision.error,
                        events=events, write=write)

    async def _make_durable(self, pending: Sequence[_Pending]) -> bool:
        """Put every scale write of this pass on record before any is sent: one store write
        for all of them (True if it was made). If that fails none is sent (a write not on
        record could be forgotten by a crash and a forbidden step follow); a target told to
        wait by the API server (429) is held until then."""
        now = self.clock()
        for item in pending:
            if item.write is not None:
                item.held = retry_after_hold(item.state, now)
                item.write = item.write if item.held is None else None
        writes = [item for item in pending if item.write is not None]
        persist = self.options.persist
        if not writes or persist is None or self.options.dry_run:
            return False
        refused = [item for item in writes if item.write is not None
                   and not self.options.may_write(item.write.target.key)]
        if refused:
            # Not the leader now: none of these goes on record, so none may be sent, even
            # if the lease comes back before they would have been (the restore it starts
            # would forget them).
            log.info("not the leader any more: this pass's writes are not sent",
                     targets=len(refused))
            for item in refused:
                item.write = None
            writes = [item for item in writes if item.write is not None]
            if not writes:
                return False
        try:
            await put_on_record([(item.write.state, item.write.scale, item.write.desired,
                                  now if item.write.decided is None else item.write.decided)
                                 for item in writes if item.write is not None], persist)
            return True
        except Exception as error:
            log.error("cannot put this pass's scale writes on record: not sending them",
                      error=str(error), targets=len(writes))
            self.telemetry.errors.labels(reason="state_save").inc()
            for item in writes:
                item.write, item.held = None, (
                    f"the scale write was held: the history could not be saved first ({error})")
            return False

    async def _complete(self, pending: _Pending) -> None:
        """The settled target's events and write, in that order, then its outcome."""
        target, state = pending.observed.target, pending.state
        structlog.contextvars.bind_contextvars(target=target.key)
        try:
            for reason, message in pending.events:
                await self.report.event(target, warning=True, reason=reason, message=message)
            if pending.held is not None:
                self.report.fail(state, target, Reason.FAILED_UPDATE_SCALE, pending.held)
                await self.report.event(target, warning=True, reason=EventReason.FAILED_RESCALE,
                                        message=pending.held)
                return
            if pending.write is not None:
                await self.writer.write(pending.write, self.options)
            if not state.failed_this_pass:  # a failed write said its own outcome: error
                self.report.finish(state, target, pending.outcome, error=pending.error)
        except Exception as error:  # a bug or an unexpected fault: hold this target only
            self.report.failed(state, target, error)
        finally:
            structlog.contextvars.unbind_contextvars("target")
            self.telemetry.reconcile_duration.observe(time.monotonic() - pending.started)

    def _unrecorded(self, error: Exception | None) -> None:
        if error is None:
            self.unrecorded.clear("outcomes", "the outcomes of scale writes are on record again")
            return
        self.unrecorded.warn("outcomes", "cannot put the outcome of scale writes on record; "
                             "it is kept here and tried again every pass", reason=str(error))
        self.telemetry.errors.labels(reason="state_save").inc()

    def _decide_again(self, observed: Observed, state: TargetState,
                      values: tuple[MetricValues, ...], history: History) -> DecideAgain:
        """After a write conflict: the decision made again from the fresh scale, with the
        same metrics and history, and what a store conflict folded into the state's history
        since the pass recorded its decision (another writer's steps)."""
        # What each redo decides on: ``history`` and every fold-in so far, carried from one
        # redo to the next (a second 409 must not drop what the first one's redo saw).
        base, recorded = [history], [state.history]  # recorded: as the pass or last redo left it

        def again(scale: Scale) -> int:
            base[0] = with_fold_ins(base[0], recorded[0], state.history)
            redo = self._decide(observed.target, scale, observed.pods, values, base[0])
            self._record_decision(observed.target, state, redo)
            recorded[0] = state.history
            desired = self._apply_fallback(observed.target, state, redo)
            state.current_replicas = scale.spec_replicas
            state.decided(redo, desired)
            return desired
        return again

    def _settling_first(self, observed: Observed, state: TargetState, history: History | None,
                        decide: Callable[[History], DecideAgain]) -> DecideAgain:
        """What to write after a conflict, for a pass whose write replaces one that may
        still be on its way (``observed.on_its_way``), or sends it again: at the first
        conflict, that write may be what landed, so the fresh read settles it first (counted
        if it landed) and the count is decided again (``decide``) from ``history`` (for a
        new decision, the pass's before it; ``None``: the history as it is at the conflict,
        with whatever a store conflict folded in meanwhile) with that write counted."""
        on_its_way = observed.on_its_way
        assert on_its_way is not None
        recorded = state.history  # as the pass left it: what it lacks later was folded in
        decider: list[DecideAgain] = []  # made at the first conflict, on the history then

        def again(scale: Scale) -> int:
            if not decider:
                state.intent = on_its_way
                if history is not None:
                    state.history = with_fold_ins(history, recorded, state.history)
                settle_intent(state, observed.target, scale, now=self.clock(),
                              settings=self.options.algorithm)
                decider.append(decide(state.history))
            return decider[0](scale)
        return again

    def _record_decision(
        self, target: TargetConfig, state: TargetState, decision: Decision
    ) -> None:
        # Only what can still decide a window stays in memory, as in the store.
        state.history = essential_history(decision.history)
        state.conditions = merge_conditions(state.conditions, decision.conditions, self.clock())

    def _decide(
        self, target: TargetConfig, scale: Scale, pods: Sequence[Pod],
        values: tuple[MetricValues, ...], history: History,
    ) -> Decision:
        now = self.clock()
        state = in_pass(self.states, target.key)
        rules = target.scale_to_zero
        if state.first_seen is None:
            state.first_seen = now
        # Kept in the store only where an initial cooldown needs it (a reload may add one).
        state.keeps_first_seen = rules is not None and rules.initial_cooldown > 0

        # Predictive scaling (issue #27): its one call site (autoscaler/runtime/prediction.py).
        core: Decide = decide if not target.predictions else functools.partial(
            decide_with_prediction, state, target,
            emit=lambda reason, message: self.report.spawn(
                target, warning=True, reason=reason, message=message))
        result = decide_with_zero(
            DecisionInput(
                spec=target.spec,
                scale=ScaleState(spec_replicas=scale.spec_replicas,
                                 status_replicas=scale.status_replicas),
                metrics=values, pods=pods, history=history, now=now,
                settings=self.options.algorithm, bounds=self._bounds(target)),
            rules=rules, memory=state.zero,
            first_seen=max(self.started, state.first_seen),
            core=core,
        )
        state.zero, state.activity, state.idle_until = (
            result.memory, result.activity, result.idle_until)
        return result.decision

    def _bounds(self, target: TargetConfig) -> Bounds | None:
        """The bounds in force: active schedules replace the spec's (None: the spec's)."""
        series = self.telemetry.target(target.key)
        if not target.schedules:
            series.bounds, series.schedules = None, ()
            in_pass(self.states, target.key).schedules = None  # none now (a reload removed them)
            return None
        at = datetime.fromtimestamp(self.wall(), UTC)  # a time of day: the wall clock's
        bounds, active = bounds_at(target.schedules, target.spec, at)
        if active is not None:
            state = in_pass(self.states, target.key)
            state.schedules = schedule_status(target.schedules, active, at)
            series.bounds = (active.min_replicas, active.max_replicas)
            series.schedules = tuple((s.name, s.name in active.active) for s in target.schedules)
        return bounds

    def _count_invalid(self, target: TargetConfig, state: TargetState, decision: Decision) -> int:
        """Count passes with every metric invalid, then apply the fallback if one is due."""
        state.consecutive_invalid = (
            state.consecutive_invalid + 1 if decision.all_metrics_invalid else 0)
        return self._apply_fallback(target, state, decision)

    def _apply_fallback(self, target: TargetConfig, state: TargetState, decision: Decision) -> int:
        """The decision's count, or the fallback's when it applies (see algorithm.fallback)."""
        replicas = fallback_replicas(decision, target.fallback,
                                     consecutive_invalid=state.consecutive_invalid)
        state.fallback_active = replicas is not None
        return decision.desired_replicas if replicas is None else replicas


def _metric_error_events(decision: Decision) -> tuple[tuple[str, str], ...]:
    """(reason, message) of the warnings a decision's failed metrics are recorded as."""
    events = [(outcome.failure_reason.value, outcome.error)
              for outcome in decision.metrics if outcome.error is not None]
    if decision.proposal is None and decision.error:
        events.append((EventReason.FAILED_COMPUTE_METRICS_REPLICAS.value, decision.error))
    return tuple(events)
