"""The daemon's memory of every target across restarts, failovers and reloads.

One place owns each rule about the ``StateStore``:

- **Reading** happens when this instance starts acting (at start, or on gaining leadership).
  A transient failure is retried with backoff for as long as it takes; until the store is
  read, proven absent or set aside, ``restored`` stays unset, so no pass runs (no scale-down,
  no scale-up) and nothing is written: a failed read can never be mistaken for an empty
  history and then overwrite the real one.
- **Writing** happens only (1) before a pass's scale writes, carrying their intents, so a
  write is on record before it can have happened; (2) as soon as their outcomes are known
  (``runtime.intents.OutcomeRecorder``); (3) after a pass that scales nothing, with its
  recommendations (so a store left by a kill holds every one a later window may need: no
  gap to bridge); (4) at a graceful stop or hand-over, marked clean; (5) once when this
  instance starts acting: to mark a clean store in use (a crash after that must not pass
  for a clean stop) and, with leader election, always, to claim the store. Writes asked
  for while one is under way are carried by the next one (one write at a time, each with
  the latest state).
- **Fencing** (with leader election): every write is sent only while this instance holds
  the lease by its own monotonic clock, checked right before it and before each retry. The
  store's optimistic concurrency (the version read) does the rest: the claim gives the
  store a version no write of a deposed leader, still in flight, can carry. A conflict
  (another writer since our read) is never written over: at the claim the store is read and
  applied again (nothing was acted on yet); later, it is read again and folded into ours
  (scale events and recommendations of both: ``_fold_in``), then written, fenced again.
- **Removed targets** (a reload or a restart without them) keep their history for
  ``RETAIN_REMOVED`` seconds after its newest entry, upstream's longest stabilization window
  (longer than any policy period), so adding one back inside its window or period finds its
  recommendations and scale events; after that they are pruned at the next write.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from typing import TypeVar

import structlog
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    retry_if_not_exception_type,
    wait_exponential_jitter,
)

from autoscaler.algorithm import History, ScaleEvent
from autoscaler.errors import (
    ConflictError,
    NotLeaderError,
    StateInUseError,
    StateSetAsideError,
    StateUnavailableError,
)
from autoscaler.runtime.ports import StateStore
from autoscaler.runtime.status import TargetState
from autoscaler.runtime.timeline import STEP_TOLERANCE, Interval, history_shift, restamp
from autoscaler.snapshot import SavedTarget, Snapshot, encode_entries, encode_entry

log = structlog.get_logger("autoscaler.history")
T = TypeVar("T")

RETAIN_REMOVED = 3600.0
"""Seconds a removed target's history is kept after its newest entry (upstream's maximum
stabilization window; policy periods are at most 1,800 s)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Restored:
    """What a restore found."""

    targets: int
    """Targets of the current config whose history was in the store."""
    retired: int
    """Histories kept for targets not in the config."""
    clean: bool
    set_aside: StateSetAsideError | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Retired:
    saved: SavedTarget
    bridge_gap: bool


class HistoryKeeper:
    def __init__(
        self,
        store: StateStore,
        states: dict[str, TargetState],
        *,
        clock: Callable[[], float] = time.time,
        retry_wait: wait_exponential_jitter | None = None,
        leader: Callable[[], bool] | None = None,
        skew: Callable[[], Interval | None] = lambda: None,
        corrected: Callable[[], None] = lambda: None,
        scope: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        self.store = store
        self._states = states
        self._scope = scope
        """The keys of ``states`` this store holds, asked at each write (None: all). A ring
        member keeps one store per bucket of targets over the one ``states`` of its
        reconciler: each write walks its bucket's keys, not every state (a predicate over
        every state cost each pass buckets x targets steps: 51 x 10,000 at 50,000 targets
        over 5 replicas)."""
        self._clock = clock
        self._skew = skew
        """Our clock minus the API server's (``runtime.timeline``): written with the store,
        compared with a stored one's at every read."""
        self._corrected = corrected
        """Told each time a read store's timestamps had to be moved or clamped."""
        self._leader = leader
        """With leader election: whether this instance holds the lease now (its own clock)."""
        self._retired: dict[str, _Retired] = {}
        self._lock = asyncio.Lock()
        self._asked = self._carried = 0
        """Writes asked for, and how many of those asks the last write carried."""
        self._wait = retry_wait or wait_exponential_jitter(multiplier=0.5, max=30.0, jitter=0.5)
        self._fragments: dict[
            str, tuple[object, object, object, object, object, float | None, str]] = {}
        """Per target: its recommendations, scale events, intent and zero memory at the last
        write (compared by identity), its first pass, and the entry written for them."""
        self._written: tuple[list[str], Interval | None, bool] | None = None
        """The entries, skew and clean flag of our last write since the store was read."""
        self.restored = asyncio.Event()
        """Set once the store was read (or proven absent, or set aside) and applied."""
        self.last_save: float | None = None
        self.last_error: str | None = None
        self.read_failures = 0
        self.save_failures = 0
        self.saves = 0
        self.conflicts = 0

    # --- reading ----------------------------------------------------------------------

    async def restore(self, keys: Collection[str] | Callable[[], Collection[str]]) -> Restored:
        """Read the store (retrying failures with backoff, indefinitely: cancel the task to
        give up), apply it to the targets in ``keys``, keep the others.

        ``keys`` may be a function: it is called once the read is done, so a reload while the
        read was retried gives the targets configured by then their history.
        """
        self.restored.clear()
        self._written = None
        while True:
            set_aside: StateSetAsideError | None = None
            snapshot: Snapshot | None
            try:
                snapshot = await self._retrying(self.store.load, doing="read")
            except StateSetAsideError as error:
                set_aside, snapshot = error, None
            # No await from here to the end of the loop: the keys are applied as they are now.
            current = set(keys() if callable(keys) else keys)
            clean = snapshot is not None and snapshot.clean
            # Only a store written around scale writes alone, left by an unclean stop, lacks
            # recommendations a pass made: one written after every pass holds them all.
            gap = snapshot is not None and not snapshot.clean and not snapshot.journaled
            saved = self._on_our_clock(snapshot)
            for key in current:
                state = self._states.setdefault(key, TargetState(key=key))
                self._apply(state, saved.get(key), bridge_gap=gap)
            self._retired = {key: _Retired(saved=entry, bridge_gap=gap)
                             for key, entry in saved.items() if key not in current}
            if not clean and self._leader is None:
                break
            # In use from now on: a crash must not leave a store that claims a clean stop;
            # and claimed, so a deposed leader's write still in flight can no longer land.
            try:
                await self._retrying(self._claim, doing="mark in use")
            except ConflictError as error:
                log.warning("the saved history changed between our read and our first "
                            "write (a write of the previous leader in flight): reading it "
                            "again", store=self.store.description, error=str(error))
                self.conflicts += 1
                continue
            break
        self.restored.set()
        return Restored(targets=len(current & saved.keys()), retired=len(self._retired),
                        clean=clean, set_aside=set_aside)

    def _on_our_clock(self, snapshot: Snapshot | None) -> dict[str, SavedTarget]:
        """The snapshot's targets with their timestamps moved onto our clock: by the
        difference of the writer's skew and ours when the two clocks can be told apart,
        and none later than now (``runtime.timeline``). Said and counted when it mattered."""
        if snapshot is None:
            return {}
        now = self._clock()
        ours = self._skew()
        shift = history_shift(snapshot.skew, ours)
        if shift is None:
            shift = 0.0
            if snapshot.targets:
                log.info("the saved history's clock cannot be compared with ours (its writer's "
                         "or ours against the API server's is not known): its timestamps are "
                         "taken as they are, none later than now", store=self.store.description,
                         writer_skew=snapshot.skew, our_skew=ours)
        moved: dict[str, SavedTarget] = {}
        clamped = 0
        for key, entry in snapshot.targets.items():
            moved[key], late = restamp(entry, shift=shift, now=now)
            clamped += late
        if abs(shift) > STEP_TOLERANCE or clamped:
            log.warning("the saved history was written on a clock that differs from ours: "
                        "its timestamps are moved onto ours, on the side that holds windows "
                        "and periods longer", store=self.store.description,
                        shift_seconds=round(shift, 3), clamped_to_now=clamped,
                        writer_skew=snapshot.skew, our_skew=ours)
            self._corrected()
        return moved

    async def _claim(self) -> None:
        await self._save(clean=False, fold_in=False)

    def invalidate(self) -> None:
        """Leadership lost: the store is someone else's to write until read again."""
        self.restored.clear()
        self._written = None

    async def _retrying(self, call: Callable[[], Awaitable[T]], *, doing: str) -> T:
        """``call`` until it succeeds, with backoff. Any failure but a set-aside store is
        retried: a 500, a timeout or a full disk pass, and a 403 is mended by granting the
        role while the daemon waits (it neither scales nor writes meanwhile: /status says
        ``restored: false``); giving up would leave a leader that never acts."""
        # Exceptions only: a cancellation (leadership lost mid-read) must end the restore,
        # never be taken for a failed read and retried.
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(Exception)
            & retry_if_not_exception_type((StateSetAsideError, ConflictError, StateInUseError)),
            wait=self._wait,
            before_sleep=functools.partial(self._report_retry, doing=doing), reraise=True)
        return await retrying(call)

    def _report_retry(self, retry_state: RetryCallState, *, doing: str) -> None:
        error = retry_state.outcome.exception() if retry_state.outcome else None
        self.read_failures += 1
        self.last_error = f"{doing}: {error}"
        log.warning("cannot reach the saved history; retrying, and neither scaling nor "
                    "writing it meanwhile", doing=doing, store=self.store.description,
                    error=str(error), attempt=retry_state.attempt_number,
                    retry_in=round(retry_state.upcoming_sleep, 2))

    @staticmethod
    def _apply(state: TargetState, saved: SavedTarget | None, *, bridge_gap: bool) -> None:
        saved = saved or SavedTarget()
        state.history, state.intent, state.zero = saved.history, saved.intent, saved.zero
        state.first_seen = saved.first_seen
        state.forecasts = dict(saved.forecasts)
        state.predictor = None  # rebuilt over the restored series at the next pass
        state.bridge_gap = bridge_gap and (state.history.seeded or saved.zero.scaled_to_zero)

    # --- targets coming and going -------------------------------------------------------

    def retire(self, state: TargetState) -> None:
        """A target left the config: keep what it needs if it comes back."""
        if _worth_keeping(state):
            self._retired[state.key] = _Retired(saved=_saved(state), bridge_gap=state.bridge_gap)

    def revive(self, state: TargetState) -> None:
        """A target (re)entered the config: give it the history it left with, if any."""
        retired = self._retired.pop(state.key, None)
        if retired is not None:
            self._apply(state, retired.saved, bridge_gap=retired.bridge_gap)
            state.first_seen = None  # added again: its initial cooldown starts again (KEDA's)

    # --- writing ----------------------------------------------------------------------

    async def persist(self, *, clean: bool = False) -> None:
        """Write every target's history and pending intents; raises if the write fails.

        Refused before the store was read: writing then would overwrite history unseen.
        """
        if not self.restored.is_set():
            raise StateUnavailableError("the saved history has not been read yet: not writing it")
        await self._save(clean=clean)

    async def _save(self, *, clean: bool, fold_in: bool = True) -> None:
        self._asked += 1
        asked = self._asked
        async with self._lock:  # one write at a time, each with the latest state
            if not clean and self._carried >= asked:
                return  # a write that began after this was asked carried it
            carrying = self._asked
            try:
                await self._write(clean=clean, fold_in=fold_in)
            except Exception as error:
                self.save_failures += 1
                self.last_error = f"save: {error}"
                raise
            self._carried = carrying

    async def _write(self, *, clean: bool, fold_in: bool) -> None:
        """Encode and write, fenced; after a conflict, fold the store in and write again
        (fenced again), once."""
        for attempt in range(2):
            now = self._clock()
            entries, skew = self._entries(now, fresh=clean), self._skew()
            if fold_in and not attempt and self._written == (entries, skew, clean):
                # Nothing changed since our last write (no pass over these targets since):
                # the store says all of it already. A ring member writes only the buckets a
                # pass touched (a failover's first pass: the gained ones, not every held one).
                self._fence()  # a caller still learns we may no longer write
                return
            data = encode_entries(entries, clean=clean, saved_at=now, skew=skew)
            self._fence()
            try:
                await self.store.save(data)
            except ConflictError:
                if not fold_in or attempt:
                    raise
                self.conflicts += 1
                self._fence()  # a deposed writer has nothing to decide again
                await self._fold_in()
                continue
            self.saves += 1
            self.last_save = now
            self._written = (entries, skew, clean)
            return

    def _fence(self) -> None:
        """Right before each write: only the lease holder writes the store."""
        if self._leader is not None and not self._leader():
            raise NotLeaderError("this instance no longer holds the lease (by its own "
                                 "clock): the history is not written")

    async def _fold_in(self) -> None:
        """Someone wrote the store since we read it: read it again and keep what both say,
        never write it over. Scale events and recommendations are the union of both
        (windows and policies then see every step either knew of); a target's pending
        intent is ours, else theirs (a fresh read settles it); a target only they have is
        kept as a removed one."""
        log.warning("the saved history was written by someone else since we read it: "
                    "reading it again and keeping what both say", store=self.store.description)
        try:
            snapshot = await self.store.load()
        except StateSetAsideError as error:  # replaced by something undecodable: kept aside
            log.error("the saved history written by someone else cannot be decoded; it was "
                      "kept aside and ours is written", kept_as=error.kept_as)
            return
        for key, theirs in self._on_our_clock(snapshot).items():
            state = self._states.get(key)
            if state is not None:
                state.history = _union(state.history, theirs.history)
                state.intent = state.intent or theirs.intent
                continue
            kept = self._retired.get(key)
            ours = kept.saved if kept is not None else SavedTarget()
            self._retired[key] = _Retired(saved=SavedTarget(
                history=_union(ours.history, theirs.history), intent=ours.intent or theirs.intent,
                zero=ours.zero, forecasts=ours.forecasts or theirs.forecasts,
                first_seen=_earliest(ours.first_seen, theirs.first_seen)), bridge_gap=True)

    def _entries(self, now: float, *, fresh: bool) -> list[str]:
        """Every target's entry, as JSON text, the current targets' then the removed ones'.

        A target whose recommendations, scale events, intent and zero memory are the objects
        of the last write (the core passes unchanged ones on as the same objects: a target
        no pass decided since) keeps the entry written then; a clean write encodes everything
        afresh. Only the recommendations that can still decide a window are encoded
        (``essential_recommendations``): in a steady run, one a target.
        """
        cache, self._fragments = self._fragments, {}
        states = self._states
        scoped = states.items() if self._scope is None else (
            (key, state) for key in self._scope() if (state := states.get(key)) is not None)
        for key, state in scoped:
            if not _worth_keeping(state):
                continue
            history, intent, zero = state.history, state.intent, state.zero
            recs, up, down = history.recommendations, history.scale_up_events, \
                history.scale_down_events
            kept = None if fresh or state.forecasts else cache.get(key)
            if kept is not None and kept[0] is recs and kept[1] is up and kept[2] is down \
                    and kept[3] is intent and kept[4] is zero \
                    and kept[5] == _kept_first_seen(state):
                self._fragments[key] = kept
                continue
            self._fragments[key] = (recs, up, down, intent, zero, _kept_first_seen(state),
                                    encode_entry(key, _saved(state)))
        entries = [fragment[6] for fragment in self._fragments.values()]
        expired = [key for key, entry in self._retired.items()
                   if _newest(entry.saved) < now - RETAIN_REMOVED]
        for key in expired:
            del self._retired[key]
        entries += [encode_entry(key, entry.saved) for key, entry in self._retired.items()
                    if key not in self._fragments]
        return entries

    def status(self) -> dict[str, object]:
        """What ``/status`` shows of the store."""
        return {
            "store": self.store.description,
            "restored": self.restored.is_set(),
            "lastSave": self.last_save,
            "lastError": self.last_error,
            "retiredTargets": len(self._retired),
        }


def _union(ours: History, theirs: History) -> History:
    """Both histories' entries, each once, oldest first."""
    if ours == theirs:
        return ours
    return History(
        recommendations=tuple(sorted(set(ours.recommendations) | set(theirs.recommendations),
                                     key=lambda r: (r.timestamp, r.replicas))),
        scale_up_events=_events(ours.scale_up_events, theirs.scale_up_events),
        scale_down_events=_events(ours.scale_down_events, theirs.scale_down_events))


def with_fold_ins(before: History, recorded: History, current: History) -> History:
    """``before`` plus what a store conflict folded into a target's history (``_fold_in``)
    since it was ``recorded``: the entries of ``current`` that ``recorded`` lacks. A decision
    made again after a write conflict starts from the history before the first one (not
    from that one's record) and must still see another writer's steps learned meanwhile."""
    if current is recorded:
        return before
    recs, up, down = (set(recorded.recommendations), set(recorded.scale_up_events),
                      set(recorded.scale_down_events))
    folded = History(
        recommendations=tuple(r for r in current.recommendations if r not in recs),
        scale_up_events=tuple(e for e in current.scale_up_events if e not in up),
        scale_down_events=tuple(e for e in current.scale_down_events if e not in down))
    if not (folded.recommendations or folded.scale_up_events or folded.scale_down_events):
        return before
    return _union(before, folded)


def _events(ours: tuple[ScaleEvent, ...], theirs: tuple[ScaleEvent, ...]) -> tuple[ScaleEvent, ...]:
    by_step = {(e.change, e.timestamp): e for e in (*theirs, *ours)}
    return tuple(sorted(by_step.values(), key=lambda e: e.timestamp))


def _saved(state: TargetState) -> SavedTarget:
    return SavedTarget(history=state.history, intent=state.intent, zero=state.zero,
                       forecasts=state.forecasts, first_seen=_kept_first_seen(state))


def _kept_first_seen(state: TargetState) -> float | None:
    return state.first_seen if state.keeps_first_seen else None


def _earliest(ours: float | None, theirs: float | None) -> float | None:
    return theirs if ours is None else ours if theirs is None else min(ours, theirs)


def _worth_keeping(state: TargetState) -> bool:
    history = state.history
    return (history.seeded or bool(history.scale_up_events or history.scale_down_events)
            or state.intent is not None or state.zero.scaled_to_zero or bool(state.forecasts))


def _newest(saved: SavedTarget) -> float:
    history = saved.history
    stamps = [r.timestamp for r in history.recommendations]
    stamps += [e.timestamp for e in (*history.scale_up_events, *history.scale_down_events)]
    if saved.intent is not None:
        stamps.append(saved.intent.at)
    stamps += [s.end * s.step for s in saved.forecasts.values() if s.values]
    return max(stamps, default=float("-inf"))
