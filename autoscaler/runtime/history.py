"""The daemon's memory of every target across restarts, failovers and reloads.

One place owns each rule about the ``StateStore``:

- **Reading** happens when this instance starts acting (at start, or on gaining leadership).
  A transient failure is retried with backoff for as long as it takes; until the store is
  read, proven absent or set aside, ``restored`` stays unset, so no pass runs (no scale-down,
  no scale-up) and nothing is written: a failed read can never be mistaken for an empty
  history and then overwrite the real one.
- **Writing** happens only (1) before a pass's scale writes, carrying their intents, so a
  write is on record before it can have happened; (2) as soon as their outcomes are known
  (``runtime.intents.OutcomeRecorder``); (3) at a graceful stop or hand-over, marked clean;
  (4) once after restoring a clean snapshot, to mark the store in use (a crash after that
  must not pass for a clean stop). A steady-state pass writes nothing. Writes asked for
  while one is under way are carried by the next one (one write at a time, each with the
  latest state).
- **Removed targets** (a reload or a restart without them) keep their history for
  ``RETAIN_REMOVED`` seconds after its newest entry, upstream's longest stabilization window
  (longer than any policy period), so adding one back inside its window or period finds its
  recommendations and scale events; after that they are pruned at the next write.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Collection
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

from autoscaler.errors import StateSetAsideError, StateUnavailableError
from autoscaler.runtime.ports import StateStore
from autoscaler.runtime.status import TargetState
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
    ) -> None:
        self.store = store
        self._states = states
        self._clock = clock
        self._retired: dict[str, _Retired] = {}
        self._lock = asyncio.Lock()
        self._asked = self._carried = 0
        """Writes asked for, and how many of those asks the last write carried."""
        self._wait = retry_wait or wait_exponential_jitter(initial=0.5, max=30.0, jitter=0.5)
        self._fragments: dict[str, tuple[object, object, object, object, str]] = {}
        """Per target: its scale events, intent and zero memory at the last write (compared
        by identity) and the entry written for them."""
        self.restored = asyncio.Event()
        """Set once the store was read (or proven absent, or set aside) and applied."""
        self.last_save: float | None = None
        self.last_error: str | None = None
        self.read_failures = 0
        self.save_failures = 0
        self.saves = 0

    # --- reading ----------------------------------------------------------------------

    async def restore(self, keys: Collection[str] | Callable[[], Collection[str]]) -> Restored:
        """Read the store (retrying failures with backoff, indefinitely: cancel the task to
        give up), apply it to the targets in ``keys``, keep the others.

        ``keys`` may be a function: it is called once the read is done, so a reload while the
        read was retried gives the targets configured by then their history.
        """
        self.restored.clear()
        set_aside: StateSetAsideError | None = None
        snapshot: Snapshot | None
        try:
            snapshot = await self._retrying(self.store.load, doing="read")
        except StateSetAsideError as error:
            set_aside, snapshot = error, None
        # No await from here to the end of the loop: the keys are applied as they are now.
        current = set(keys() if callable(keys) else keys)
        clean = snapshot is not None and snapshot.clean
        saved = dict(snapshot.targets) if snapshot is not None else {}
        for key in current:
            state = self._states.setdefault(key, TargetState(key=key))
            self._apply(state, saved.get(key), bridge_gap=not clean)
        self._retired = {key: _Retired(saved=entry, bridge_gap=not clean)
                         for key, entry in saved.items() if key not in current}
        if clean:
            # In use from now on: a crash must not leave a store that claims a clean stop.
            await self._retrying(self._mark_in_use, doing="mark in use")
        self.restored.set()
        return Restored(targets=len(current & saved.keys()), retired=len(self._retired),
                        clean=clean, set_aside=set_aside)

    async def _mark_in_use(self) -> None:
        await self._save(clean=False)

    def invalidate(self) -> None:
        """Leadership lost: the store is someone else's to write until read again."""
        self.restored.clear()

    async def _retrying(self, call: Callable[[], Awaitable[T]], *, doing: str) -> T:
        """``call`` until it succeeds, with backoff. Any failure but a set-aside store is
        retried: a 500, a timeout or a full disk pass, and a 403 is mended by granting the
        role while the daemon waits (it neither scales nor writes meanwhile: /status says
        ``restored: false``); giving up would leave a leader that never acts."""
        # Exceptions only: a cancellation (leadership lost mid-read) must end the restore,
        # never be taken for a failed read and retried.
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(Exception)
            & retry_if_not_exception_type(StateSetAsideError), wait=self._wait,
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

    # --- writing ----------------------------------------------------------------------

    async def persist(self, *, clean: bool = False) -> None:
        """Write every target's history and pending intents; raises if the write fails.

        Refused before the store was read: writing then would overwrite history unseen.
        """
        if not self.restored.is_set():
            raise StateUnavailableError("the saved history has not been read yet: not writing it")
        await self._save(clean=clean)

    async def _save(self, *, clean: bool) -> None:
        self._asked += 1
        asked = self._asked
        async with self._lock:  # one write at a time, each with the latest state
            if not clean and self._carried >= asked:
                return  # a write that began after this was asked carried it
            carrying = self._asked
            now = self._clock()
            data = encode_entries(self._entries(now, fresh=clean), clean=clean, saved_at=now)
            try:
                await self.store.save(data)
            except Exception as error:
                self.save_failures += 1
                self.last_error = f"save: {error}"
                raise
            self._carried = carrying
            self.saves += 1
            self.last_save = now

    def _entries(self, now: float, *, fresh: bool) -> list[str]:
        """Every target's entry, as JSON text, the current targets' then the removed ones'.

        A write that is not a clean stop re-encodes only the targets whose scale events,
        intent or zero memory changed since the last write (checked by identity: the core
        passes unchanged event tuples on as the same objects) and those with forecasts
        (which change every pass); the others keep the
        recommendations of their last write. That is safe because such a store is unclean:
        a restore from it bridges the gap, which covers recommendations older than the real
        ones. It keeps a write per scaling pass cheap at 10,000 targets. A clean write
        encodes everything afresh.
        """
        cache, self._fragments = self._fragments, {}
        for key, state in self._states.items():
            if not _worth_keeping(state):
                continue
            history, intent, zero = state.history, state.intent, state.zero
            up, down = history.scale_up_events, history.scale_down_events
            kept = None if fresh or state.forecasts else cache.get(key)
            if kept is not None and kept[0] is up and kept[1] is down and kept[2] is intent \
                    and kept[3] is zero:
                self._fragments[key] = kept
                continue
            self._fragments[key] = (up, down, intent, zero, encode_entry(key, _saved(state)))
        entries = [fragment[4] for fragment in self._fragments.values()]
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


def _saved(state: TargetState) -> SavedTarget:
    return SavedTarget(history=state.history, intent=state.intent, zero=state.zero,
                       forecasts=state.forecasts)


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
