"""What a pass tells of each target: its outcome, its failures and its Events.

The outcome (``finish``) goes on the target's state for ``/status`` and on ``/metrics``; a
read or write that failed (``fail``) also sets AbleToScale False. Events are sent without
ever failing a pass (``event``, or ``spawn`` in the background). A target whose evaluation
raised (``failed``) is said once per change of the error, not every pass.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

from autoscaler.algorithm import AlgorithmSettings, EventReason
from autoscaler.algorithm.zero_values import ActivityState
from autoscaler.observability.logs import debug_traceback
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.conditions import unable_to_scale
from autoscaler.runtime.ports import EventPort
from autoscaler.runtime.status import TargetState

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig

log = structlog.get_logger("autoscaler.reconcile")


class Reporter:
    """Outcomes, failures and Events of the targets one reconciler runs."""

    def __init__(self, *, events: EventPort, telemetry: DaemonMetrics,
                 clock: Callable[[], float] = time.time) -> None:
        self.events, self.telemetry, self.clock = events, telemetry, clock
        self.record_events = True
        self.settings = AlgorithmSettings()
        """The algorithm's settings, for the tolerances ``/metrics`` shows."""
        self._background: set[asyncio.Task[None]] = set()  # strong refs to event tasks

    def finish(self, state: TargetState, target: TargetConfig, outcome: str,
               error: str | None = None) -> None:
        """The pass's outcome for the target, on its state, and ``/metrics`` from that same
        state (``TargetState.settle``: what the pass decided, if it did, is the latest)."""
        now = self.clock()
        state.last_reconcile, state.last_outcome, state.last_error = now, outcome, error
        state.settle(target.generation)
        series = self.telemetry.target(target.key)
        series.settled(
            outcome, at=now, spec=target.spec, settings=self.settings,
            conditions=state.conditions, paused=state.pause is not None,
            fallback_active=state.fallback_active)
        shadow, activity = state.shadow, state.activity
        series.show(current=state.current_replicas, desired=state.desired_replicas,
                    decision=state.latest_decision(),
                    shadow=None if shadow is None else (shadow.ours, shadow.theirs),
                    metrics=target.spec.metrics,
                    activation_active=None if activity is None
                    or activity.state is ActivityState.UNKNOWN
                    else activity.state is ActivityState.ACTIVE)

    def fail(self, state: TargetState, target: TargetConfig, reason: str, message: str) -> None:
        """The target could not be read or written: AbleToScale False, outcome ``error``."""
        state.failed_this_pass = True
        state.conditions = unable_to_scale(state.conditions, reason, message, self.clock())
        self.finish(state, target, "error", error=message)

    def failed(self, state: TargetState, target: TargetConfig, error: Exception) -> None:
        """A target whose evaluation raised (a schedule, a template, a bug) is held. Said
        once per change of the error (a log line, the condition, an Event) rather than every
        pass; the traceback only with debug logs. Counted every pass."""
        message = f"evaluating the target failed: {type(error).__name__}: {error}"
        self.telemetry.errors.labels(reason="reconcile").inc()
        if message != state.last_error:
            log.error("target evaluation failed: holding it", target=target.key,
                      error=message, exc_info=debug_traceback(error))
            self.spawn(target, warning=True, reason=EventReason.FAILED_EVALUATION,
                       message=message)
        self.fail(state, target, EventReason.FAILED_EVALUATION, message)

    async def event(self, target: TargetConfig, *, warning: bool, reason: str,
                    message: str) -> None:
        """Record an Event on the target; a failure is logged at debug and dropped."""
        if not self.record_events:
            return
        try:
            await self.events.record(target.namespace, target.scale_target_ref,
                                     warning=warning, reason=reason, message=message)
        except Exception as error:  # an event is never worth failing a pass for
            log.debug("event not recorded", reason=reason, error=str(error))

    def spawn(self, target: TargetConfig, *, warning: bool, reason: str, message: str) -> None:
        """``event`` in the background: the pass does not wait for it."""
        task = asyncio.get_running_loop().create_task(
            self.event(target, warning=warning, reason=reason, message=message))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
