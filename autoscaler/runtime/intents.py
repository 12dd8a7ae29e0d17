"""Scale writes on record before they are sent, their outcome on record as soon as known.

An intent (previous and desired count, the resourceVersion the PUT carries) is made
durable with the history before its PUT, so a process killed at any moment after the write
leaves a record. Once the write's outcome is known (the API server's answer: landed, or
refused), the ``OutcomeRecorder`` writes the history again, so the store holds the landed
write as a scale event at the time it landed and no longer holds the intent: a restart
after that does not take the write for news. Only a write whose outcome truly is unknown
(a 5xx or a timeout, or a kill between the PUT and that record) stays an intent, and is
settled by a fresh read before the target's next decision (``settle_intent``), from what
the object says: its ``spec.replicas``, never its resourceVersion alone (a controller's
status update, an annotation, moves that all the time).

A write found not landed on an object unchanged since (its resourceVersion is the one the
PUT carries) may still be on its way: an API server holding the request, or a process
frozen between its last check and its socket (a ring member that lost the target
meanwhile). Such a PUT could land later, from whoever sent it, as a step no history knows.
So the pass that finds it writes the object (docs/design/active-active.md §4.5, F3): with
its own decision if that scales, else by sending the write on record again if the rules in
force now allow it. Either carries that resourceVersion, so only one of the two PUTs can
land and the other is a 409 (a 409 on ours settles the first before deciding again); a
write of ours lands only while we hold the target, and is counted when it does. Until a
pass writes the object or a read settles it, the write stays on record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from enum import Enum
from typing import TYPE_CHECKING

import structlog

from autoscaler.algorithm import AlgorithmSettings
from autoscaler.runtime.landed import count_scale
from autoscaler.runtime.ports import Scale
from autoscaler.runtime.reconcile_options import Persist
from autoscaler.runtime.status import TargetState
from autoscaler.snapshot import Intent

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig

log = structlog.get_logger("autoscaler.reconcile")


async def put_on_record(writes: Sequence[tuple[TargetState, Scale, int, float]],
                        persist: Persist) -> None:
    """Each (state, scale read, desired count, when it was decided) gets its intent, then
    one store write makes them all durable. If that fails, each state gets back the intent
    it had (one still on its way stays on record) and the error is raised: none of these
    writes may be sent."""
    replaced = [state.intent for state, _, _, _ in writes]
    for state, scale, desired, decided in writes:
        state.intent = Intent(previous=scale.spec_replicas, desired=desired,
                              resource_version=scale.resource_version, at=decided,
                              also=_still_landable(state.intent, scale, desired))
    try:
        await persist()
    except Exception:
        for (state, _, _, _), intent in zip(writes, replaced, strict=True):
            state.intent = intent
        raise


def _still_landable(replaced: Intent | None, scale: Scale, desired: int) -> tuple[int, ...]:
    """The counts of the earlier writes a new one replaces that may still land: those sent
    over the resourceVersion the new one carries (the object unchanged since; at most one of
    them all can land). The store keeps one intent a target: forgetting them, a late landing
    of one would read as someone else's count and its step go uncounted."""
    if replaced is None or replaced.resource_version != scale.resource_version:
        return ()
    return tuple(dict.fromkeys(
        count for count in (replaced.desired, *replaced.also)
        if count not in (desired, scale.spec_replicas)))


class Outcome(Enum):
    """What a fresh read says of a write whose answer was lost."""

    LANDED = "landed"
    """The object holds the count the write carried."""
    NOT_LANDED = "did not land"
    """The object is unchanged, or holds the count the write would have replaced."""
    OVERRIDDEN = "overridden"
    """The object holds a third count: someone else set it, whatever became of ours."""


def outcome_of(intent: Intent, scale: Scale) -> Outcome:
    """Whether the write ``intent`` describes landed, from ``scale`` read fresh.

    The resourceVersion only says the object changed, not how: controllers' status updates
    and annotations move it all the time. The count says what happened. If it is the one
    we wrote, the step was taken (had someone else set exactly that count meanwhile, the
    target still took that step). If it is the one we would have replaced, the write did
    not land (a write that landed and was set back by hand within the moment cannot be
    told apart, and is taken as not made). A third count was set by someone else: that is
    drift, reported as such, and our write is not counted (neither reading is safe both
    ways: a step counted wrongly loosens the opposite direction's policy, upstream's
    ``periodStartReplicas``; this needs a lost answer and an outside change in one pass).
    """
    if scale.resource_version == intent.resource_version:
        return Outcome.NOT_LANDED
    if scale.spec_replicas == intent.desired or scale.spec_replicas in intent.also:
        return Outcome.LANDED  # ours, or an earlier write of ours it replaced
    if scale.spec_replicas == intent.previous:
        return Outcome.NOT_LANDED
    return Outcome.OVERRIDDEN


IN_FLIGHT_HORIZON = 60.0
"""Seconds after its decision that a write found not landed is still taken as possibly on
its way: the API server's default ``--request-timeout``, past which it has served or
dropped a request. Older, it is dropped as not made: sending a decision that old would act
on metrics long gone (a daemon down for an hour, say). A write sent again keeps the time
of its decision."""


def settle_intent(state: TargetState, target: TargetConfig, scale: Scale, *, now: float,
                  settings: AlgorithmSettings) -> Intent | None:
    """Settle the target's intent against ``scale``, read fresh from the server. A landed
    write is counted now, the latest it can have happened, so its policy period ends no
    earlier than upstream's would (only a write whose answer was lost gets here).

    Returns the intent if its write did not land on an object unchanged since, within
    ``IN_FLIGHT_HORIZON`` of its decision: it may still be on its way, and this pass must
    write the object (the module's docstring says why). Such an intent stays on record
    until a pass writes the object or a read settles it: if the pass cannot write (no
    metrics, paused, held by a 429...), a late landing is still counted at the next read."""
    intent, state.intent = state.intent, None
    assert intent is not None
    outcome = outcome_of(intent, scale)
    if outcome is not Outcome.LANDED:
        on_its_way = (scale.resource_version == intent.resource_version
                      and now - intent.at <= IN_FLIGHT_HORIZON)
        log.info("an earlier scale write whose answer was lost "
                 + ("has not landed; it may still be on its way" if on_its_way
                    else outcome.value),
                 target=target.key, previous=intent.previous, desired=intent.desired,
                 replicas=scale.spec_replicas)
        if not on_its_way:
            return None
        state.intent = intent
        return intent
    # The count that landed: the intent's, or one of the earlier writes it replaced.
    count_scale(state, target, previous=intent.previous, new=scale.spec_replicas, now=now,
                settings=settings)
    state.expected_replicas = scale.spec_replicas
    log.warning("an earlier scale write whose answer was lost landed: counted now",
                target=target.key, previous=intent.previous, desired=scale.spec_replicas,
                replicas=scale.spec_replicas)
    return None


LINGER = 1.0
"""Seconds an answered write may wait for the pass's other answers before its outcome is
written anyway (a hung PUT must not keep the others' outcomes off the record)."""


class OutcomeRecorder:
    """Writes the history once writes' outcomes are known, without holding the writes up.

    ``want()`` says an outcome is known and not yet on record. The outcomes known are
    written together, when the pass's last write is answered (``flush``) or ``LINGER``
    after the first of them, whichever comes first. A pass with scale writes thus costs two
    store writes, its intents' and its outcomes', and one more for each further second its
    writes take to be answered; a kill leaves an answered write off the record for at most
    that long (its intent is then settled by a fresh read). A failed record is reported
    (``report(error)``, and ``report(None)`` once one succeeds again) and tried again at
    the next ``flush``; the outcome is known in memory meanwhile.
    """

    def __init__(self, persist: Callable[[], Persist | None],
                 report: Callable[[Exception | None], None], *,
                 linger: float = LINGER) -> None:
        self._persist, self._report, self._linger = persist, report, linger
        self._wanted = self._lingering = self._failing = False
        self._timer: asyncio.Task[None] | None = None

    def want(self) -> None:
        self._wanted = True
        if self._timer is None or self._timer.done():
            self._lingering = True  # until its sleep ends: cancelling it then loses nothing
            self._timer = asyncio.get_running_loop().create_task(self._after_linger())

    async def _after_linger(self) -> None:
        try:
            await asyncio.sleep(self._linger)
        finally:
            self._lingering = False
        await self._record()

    async def _record(self) -> None:
        persist = self._persist()
        if not self._wanted or persist is None:
            return
        self._wanted = False
        try:
            await persist()
        except Exception as error:
            self._wanted = self._failing = True
            self._report(error)
            return
        if self._failing:
            self._failing = False
            self._report(None)

    async def flush(self) -> None:
        """Write what is known now (a record that failed is tried again); return once it
        is on record or has failed. A pass cancelled at a stop leaves a record under way
        to finish (shielded)."""
        timer = self._timer
        if timer is not None and not timer.done():
            if self._lingering:
                timer.cancel()
            else:
                await asyncio.shield(timer)
        if self._wanted:
            await asyncio.shield(self._record())
