"""A target's scale write: what upstream's HPA and KEDA do, and what they leave out.

A write is a PUT of the Scale carrying the resourceVersion read. A 409 means someone wrote
in between: the target is read again from the server and the count decided again from what
it holds now, never written over blindly; each retry is a new write, on record before it is
sent, and the retries are bounded. A 429's Retry-After holds the target's writes until then
(capped). Dry-run writes nothing and says what it would have written; an instance that is
no longer the leader writes nothing. A write on record that may still be on its way is sent
again (``resend``, when the pass would not write the target otherwise: ``intents`` says
why). A failure is the target's alone: a condition, an Event and a log line.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import structlog

from autoscaler.algorithm import EventReason, Reason, rescale_message
from autoscaler.errors import (
    AccessDeniedError,
    ConflictError,
    NotFoundError,
    RejectedError,
    ThrottledError,
)
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.observability.repeats import RepeatedWarnings
from autoscaler.runtime.conditions import rescaled
from autoscaler.runtime.intents import put_on_record
from autoscaler.runtime.landed import count_scale
from autoscaler.runtime.ports import Scale, ScalePort
from autoscaler.runtime.reconcile_options import ReconcileOptions
from autoscaler.runtime.reporting import Reporter
from autoscaler.runtime.status import TargetState
from autoscaler.snapshot import Intent

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig

log = structlog.get_logger("autoscaler.reconcile")

CONFLICT_RETRIES = 3
MAX_RETRY_AFTER = 600.0
"""A Retry-After longer than this is capped: a misconfigured proxy must not freeze a target."""
NOT_SENT = (ConflictError, AccessDeniedError, RejectedError, NotFoundError, ThrottledError)
"""Write failures that prove the PUT did not land; after any other (a timeout, a 5xx, a
garbled answer) it may have, and the target's intent stays until a fresh read tells."""

DecideAgain = Callable[[Scale], int]
"""Given the Scale read again after a conflict, the count to write now."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleWrite:
    """One target's write this pass."""

    target: TargetConfig
    state: TargetState
    scale: Scale
    """The Scale as read: the write carries its resourceVersion."""
    desired: int
    reason: str
    """The rescale reason, for the Events."""
    decide_again: DecideAgain | None = None
    """``None``: the count stands whatever the target holds after a conflict (a pause)."""
    decided: float | None = None
    """When the count was decided, if before this pass (a write sent again): its intent
    keeps that time, so ``IN_FLIGHT_HORIZON`` counts from the decision."""
    supersedes: Intent | None = None
    """A write that may still be on its way, which this one replaces on record (it carries
    the same resourceVersion): if this PUT is refused, that one is still on record."""


def resend(target: TargetConfig, state: TargetState, scale: Scale, intent: Intent, *,
           settled: DecideAgain) -> ScaleWrite:
    """The write on record in ``intent``, sent again over ``scale`` (read fresh, unchanged
    since that write was decided; ``intents`` says why). A 409 means the object changed
    meanwhile, perhaps by that very write: ``settled`` settles the intent on the fresh read
    (counted if it landed) and gives the fresh count, so nothing is written over it."""
    when = datetime.fromtimestamp(intent.at, UTC).strftime("%H:%M:%S")
    return ScaleWrite(target=target, state=state, scale=scale, desired=intent.desired,
                      reason=f"sent again: decided at {when} UTC, its first request may still "
                             "reach the API server", decide_again=settled, decided=intent.at,
                      supersedes=intent)


def retry_after_hold(state: TargetState, now: float) -> str | None:
    """Why the target may not be written yet (the API server asked us to wait), or None."""
    wait_until = state.write_not_before
    if wait_until is None or now >= wait_until:
        return None
    return (f"the API server asked us to wait before writing again (429 Retry-After);"
            f" next write in {wait_until - now:.0f}s")


class ScaleWriter:
    """Sends the reconciler's scale writes through the scale port."""

    def __init__(self, *, scales: ScalePort, report: Reporter, telemetry: DaemonMetrics,
                 clock: Callable[[], float] = time.time,
                 configured: Callable[[TargetState], bool] = lambda state: True,
                 known: Callable[[], None] = lambda: None) -> None:
        self.scales, self.report, self.telemetry, self.clock = scales, report, telemetry, clock
        self.configured = configured
        """Whether a state is still its target's (a reload may remove it mid-pass)."""
        self.known = known
        """Called the moment a write's outcome is known and its intent on record is stale
        (it landed, or it cannot have), before its Event: to put the outcome on record."""
        # A write that fails the same way every pass is said when it starts, changes or
        # ends, and every few minutes in between (its Event and condition say it each time).
        self.failing = RepeatedWarnings(log)

    async def write(self, write: ScaleWrite, options: ReconcileOptions) -> None:
        target, state, desired = write.target, write.state, write.desired
        current = write.scale.spec_replicas
        if options.dry_run:
            log.info("would scale", current=current, desired=desired, reason=write.reason)
            self.telemetry.target(target.key).would_scale(current, desired)
            await self.report.event(target, warning=False, reason=EventReason.WOULD_SCALE,
                                    message=f"{rescale_message(desired, write.reason)} (dry-run)")
            return
        try:
            written = await self._put(write, options)
        except Exception as error:
            await self._failed(write, desired, error, options)
            return
        if written is None:
            return  # refused: any intent stays, for a fresh read to settle
        previous, desired = written
        state.intent = None
        state.write_not_before = None
        if self.failing:
            self.failing.clear(target.key, "scale write succeeded again")
        if previous == desired:  # after a conflict the target already has the count we want
            self._known(options)
            return
        self._landed(target, state, previous=previous, new=desired, options=options)
        self._known(options)
        log.info("scaled", previous=previous, desired=desired, reason=write.reason)
        await self.report.event(target, warning=False, reason=EventReason.SUCCESSFUL_RESCALE,
                                message=rescale_message(desired, write.reason))

    def _known(self, options: ReconcileOptions) -> None:
        if options.persist is not None:
            self.known()

    async def _put(self, write: ScaleWrite,
                   options: ReconcileOptions) -> tuple[int, int] | None:
        """PUT with the resourceVersion we read; on 409 re-read, decide again, try again.

        Returns the replica count we wrote over and the count written, or None if a PUT was
        refused (``_refused``). Never overwrites blindly: after a conflict the decision is
        made again from the fresh scale.
        """
        target, state, scale, desired = write.target, write.state, write.scale, write.desired
        for attempt in range(CONFLICT_RETRIES + 1):
            if (refused := self._refused(target, state, scale, desired, options)) is not None:
                log.info(f"not writing the scale: {refused}", desired=desired)
                return None
            try:
                await self.scales.update_scale(
                    target.namespace, target.scale_target_ref, desired, scale.resource_version)
            except ConflictError:
                if attempt == CONFLICT_RETRIES:
                    raise
                log.info("conflict writing the scale: re-reading", attempt=attempt + 1)
                # A 409: that write did not land. One it replaced, on its way when the pass
                # read the target, may be what did: kept until a read settles it (the re-read
                # next, or a later pass's if this one fails), never forgotten uncounted.
                state.intent = write.supersedes if attempt == 0 else None
                scale = await self.scales.get_scale(target.namespace, target.scale_target_ref,
                                                    fresh=True)
                state.expected_replicas = scale.spec_replicas
                if write.decide_again is not None:
                    desired = write.decide_again(scale)
                if desired == scale.spec_replicas:
                    return desired, desired
                if options.persist is not None:  # the retry is a new write: on record first
                    await put_on_record([(state, scale, desired, self.clock())],
                                        options.persist)
                continue
            return scale.spec_replicas, desired
        raise AssertionError("unreachable")  # pragma: no cover

    def _refused(self, target: TargetConfig, state: TargetState, scale: Scale, desired: int,
                 options: ReconcileOptions) -> str | None:
        """Why this PUT may not go out now, or None. Checked right before every PUT, the
        first and each retry after a 409, since any await before it may have changed it."""
        if not options.may_write(target.key):
            return "not the leader any more"
        if not self.configured(state):
            return "the target was removed from the config"
        intent = state.intent
        if options.persist is not None and (
                intent is None or intent.desired != desired
                or intent.resource_version != scale.resource_version):
            return "it is not on record (a crash could forget it)"
        return None

    async def _failed(self, write: ScaleWrite, desired: int, error: Exception,
                      options: ReconcileOptions) -> None:
        target, state = write.target, write.state
        if isinstance(error, NOT_SENT):
            # The refused PUT did not land; one it replaced, if it carried the same
            # resourceVersion (no conflict came between), may still.
            replaced = write.supersedes
            state.intent = replaced if replaced is not None and state.intent is not None and (
                state.intent.resource_version == replaced.resource_version) else None
            self._known(options)
        if isinstance(error, ThrottledError) and error.retry_after is not None:
            state.write_not_before = self.clock() + min(error.retry_after, MAX_RETRY_AFTER)
        self.failing.warn(target.key, "scale write failed", reason=str(error), desired=desired)
        self.telemetry.errors.labels(reason="update_scale").inc()
        self.report.fail(state, target, Reason.FAILED_UPDATE_SCALE,
                         f"the autoscaler was unable to update the target scale: {error}")
        await self.report.event(target, warning=True, reason=EventReason.FAILED_RESCALE,
                                message=f"{rescale_message(desired, write.reason)}; error: {error}")

    def _landed(self, target: TargetConfig, state: TargetState, *, previous: int, new: int,
                options: ReconcileOptions) -> None:
        now = self.clock()
        count_scale(state, target, previous=previous, new=new, now=now,
                    settings=options.algorithm)
        state.expected_replicas = new
        state.conditions = rescaled(state.conditions, new, now)
        self.telemetry.target(target.key).scaled(previous, new)
