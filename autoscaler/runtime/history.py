"""The daemon's memory of every target across restarts, failovers and reloads.

One place owns each rule about the ``StateStore``:

- **Reading** happens when this instance starts acting (at start, or on gaining leadership).
  A transient failure is retried with backoff for as long as it takes; until the store is
  read, proven absent or set aside, ``restored`` stays unset, so no pass runs (no scale-down,
  no scale-up) and nothing is written: a failed read can never be mistaken for an empty
  history and then overwrite the real one.
- **Writing** happens only (1) before a pass's scale writes, carrying their intents, so a
  write is on record before it can have happened; (2) at a graceful stop or hand-over,
  marked clean; (3) once after restoring a clean snapshot, to mark the store in use (a crash
  after that must not pass for a clean stop). A steady-state pass writes nothing.
- **Removed targets** (a reload or a restart without them) keep their history for
  ``RETAIN_REMOVED`` seconds after its newest entry, upstream's longest stabilization window
  (longer than any policy period), so adding one back inside its window or period finds its
  recommendations and scale events; after that they are pruned at the next write.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import TypeVar

import structlog
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential_jitter

from autoscaler.algorithm import History
from autoscaler.runtime.status import TargetState
from autoscaler.state import (
    SavedTarget,
    Snapshot,
    StateSetAsideError,
    StateStore,
    StateUnavailableError,
)

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
        self._wait = retry_wait or wait_exponential_jitter(initial=0.5, max=30.0, jitter=0.5)
        self.restored = asyncio.Event()
        """Set once the store was read (or proven absent, or set aside) and applied."""
        self.last_save: float | None = None
        self.last_error: str | None = None
        self.read_failures = 0
        self.save_failures = 0

    # --- reading ----------------------------------------------------------------------

    async def restore(self, keys: Collection[str]) -> Restored:
        """Read the store (retrying transient failures with backoff, indefinitely: cancel
        the task to give up), apply it to the targets in ``keys``, keep the others."""
        self.restored.clear()
        set_aside: StateSetAsideError | None = None
        snapshot: Snapshot | None
        try:
            snapshot = await self._retrying(self.store.load)
        except StateSetAsideError as error:
            set_aside, snapshot = error, None
        keys = set(keys)
        clean = snapshot is not None and snapshot.clean
        saved = dict(snapshot.targets) if snapshot is not None else {}
        for key in keys:
            state = self._states.setdefault(key, TargetState(key=key))
            self._apply(state, saved.get(key), bridge_gap=not clean)
        self._retired = {key: _Retired(saved=entry, bridge_gap=not clean)
                         for key, entry in saved.items() if key not in keys}
        if clean:
            # In use from now on: a crash must not leave a store that claims a clean stop.
            await self._retrying(self._mark_in_use)
        self.restored.set()
        return Restored(targets=len(keys & saved.keys()), retired=len(self._retired),
                        clean=clean, set_aside=set_aside)

    async def _mark_in_use(self) -> None:
        await self._save(clean=False)

    def invalidate(self) -> None:
        """Leadership lost: the store is someone else's to write until read again."""
        self.restored.clear()

    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(StateUnavailableError), wait=self._wait,
            before_sleep=self._report_retry, reraise=True)
        return await retrying(call)

    def _report_retry(self, retry_state: RetryCallState) -> None:
        error = retry_state.outcome.exception() if retry_state.outcome else None
        self.read_failures += 1
        self.last_error = str(error)
        log.warning("cannot reach the saved history; retrying, and neither scaling nor "
                    "writing it meanwhile", store=self.store.description, error=str(error),
                    attempt=retry_state.attempt_number,
                    retry_in=round(retry_state.upcoming_sleep, 2))

    @staticmethod
    def _apply(state: TargetState, saved: SavedTarget | None, *, bridge_gap: bool) -> None:
        state.history = saved.history if saved is not None else History()
        state.intent = saved.intent if saved is not None else None
        state.forecasts = dict(saved.forecasts) if saved is not None else {}
        state.predictor = None  # rebuilt over the restored series at the next pass
        state.bridge_gap = bridge_gap and state.history.seeded

    # --- targets coming and going -------------------------------------------------------

    def retire(self, state: TargetState) -> None:
        """A target left the config: keep what it needs if it comes back."""
        if state.history.seeded or state.intent is not None or _events(state.history) \
                or state.forecasts:
            self._retired[state.key] = _Retired(
                saved=_saved(state),
                bridge_gap=state.bridge_gap)

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
        async with self._lock:  # one write at a time, each with the latest state
            now = self._clock()
            snapshot = Snapshot(targets=self._collect(now), clean=clean, saved_at=now)
            try:
                await self.store.save(snapshot)
            except Exception as error:
                self.save_failures += 1
                self.last_error = f"save: {error}"
                raise
            self.last_save = now

    def _collect(self, now: float) -> dict[str, SavedTarget]:
        targets = {key: _saved(state) for key, state in self._states.items()
                   if state.history.seeded or state.intent is not None or state.forecasts}
        expired = [key for key, entry in self._retired.items()
                   if _newest(entry.saved) < now - RETAIN_REMOVED]
        for key in expired:
            del self._retired[key]
        for key, entry in self._retired.items():
            targets.setdefault(key, entry.saved)
        return targets

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
    return SavedTarget(history=state.history, intent=state.intent, forecasts=state.forecasts)


def _events(history: History) -> bool:
    return bool(history.scale_up_events or history.scale_down_events)


def _newest(saved: SavedTarget) -> float:
    history = saved.history
    stamps = [r.timestamp for r in history.recommendations]
    stamps += [e.timestamp for e in (*history.scale_up_events, *history.scale_down_events)]
    if saved.intent is not None:
        stamps.append(saved.intent.at)
    stamps += [s.end * s.step for s in saved.forecasts.values() if s.values]
    return max(stamps, default=float("-inf"))
