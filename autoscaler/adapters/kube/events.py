"""Record core/v1 Events on targets, aggregated the way client-go's recorder does.

``record`` (the runtime's ``EventPort``) and ``emit`` never block and never raise: events
are queued and a background worker sends them, so a slow or failing API server cannot stall
a reconcile pass, and a failure to record is logged, not propagated. A repeat of the same
event (same involved object, type, reason and message) PATCHes the existing Event's
``count`` and ``lastTimestamp`` instead of creating a new object, as client-go's
``EventCorrelator`` does; if that Event has expired meanwhile (404), a new one is created.
Like client-go's spam filter, each distinct event may repeat ``burst`` times, then once per
``refill_seconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import structlog
from kubernetes_asyncio.client import ApiClient, CoreV1Api

from autoscaler.adapters.kube.api_errors import api_errors
from autoscaler.adapters.kube.structs import ObjectRef
from autoscaler.config import ScaleTargetRef
from autoscaler.errors import NotFoundError

log = structlog.get_logger("autoscaler.kube.events")

COMPONENT = "autoscaler"
UidLookup = Callable[[str, ScaleTargetRef], "str | None"]
"""The target's uid, if known: ``kubectl describe`` matches events by involvedObject.uid."""
MAX_MESSAGE = 1024  # events.k8s.io's limit; kubectl describe shows no more anyway


class EventType(StrEnum):
    """An Event's ``type``; its reasons are ``autoscaler.algorithm.EventReason``."""

    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class _Key:
    target: ObjectRef
    type: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class _Seen:
    name: str
    count: int


@dataclass(slots=True)
class EventCounters:
    created: int = 0
    patched: int = 0
    failed: int = 0
    dropped: int = 0
    """Not sent because the queue was full."""
    throttled: int = 0
    """Not sent because the same event repeated faster than the spam policy allows."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpamPolicy:
    """client-go's spam filter: a token bucket per event, ``burst`` then one per period."""

    burst: int = 25
    refill_seconds: float = 300.0


class _Buckets:
    """Token buckets keyed by event, bounded in number (least recently used go first)."""

    def __init__(self, policy: SpamPolicy, clock: Callable[[], float], size: int) -> None:
        self._policy, self._clock, self._size = policy, clock, size
        self._state: OrderedDict[_Key, tuple[float, float]] = OrderedDict()

    def allow(self, key: _Key) -> bool:
        now, policy = self._clock(), self._policy
        tokens, at = self._state.get(key, (float(policy.burst), now))
        tokens = min(float(policy.burst), tokens + (now - at) / policy.refill_seconds)
        allowed = tokens >= 1
        self._state[key] = (tokens - 1 if allowed else tokens, now)
        self._state.move_to_end(key)
        while len(self._state) > self._size:
            self._state.popitem(last=False)
        return allowed


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Queue-backed event sink; use as ``async with EventRecorder(client) as events``."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        uid_of: UidLookup | None = None,
        instance: str | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        queue_size: int = 1000,
        remembered: int = 4096,
        spam: SpamPolicy | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        # Any: the generated signatures want models; we send plain dicts and a content type.
        self._core: Any = CoreV1Api(api_client)
        self._uid_of = uid_of
        self._instance = instance or socket.gethostname()
        self._clock = clock
        self._queue: asyncio.Queue[_Key] = asyncio.Queue(maxsize=queue_size)
        self._seen: OrderedDict[_Key, _Seen] = OrderedDict()
        self._remembered = remembered
        self._buckets = _Buckets(spam or SpamPolicy(), monotonic, remembered)
        self._last_nanos = 0
        self._worker: asyncio.Task[None] | None = None
        self.counters = EventCounters()

    async def __aenter__(self) -> EventRecorder:
        self._worker = asyncio.create_task(self._drain(), name="event-recorder")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def record(
        self, namespace: str, ref: ScaleTargetRef, *, warning: bool, reason: str,
        message: str,
    ) -> None:
        """The runtime's ``EventPort``: queue an event on a target; returns at once."""
        uid = self._uid_of(namespace, ref) if self._uid_of else None
        target = ObjectRef(api_version=ref.api_version, kind=ref.kind, namespace=namespace,
                           name=ref.name, uid=uid)
        self.emit(target, EventType.WARNING if warning else EventType.NORMAL, reason, message)

    def emit(self, target: ObjectRef, type_: EventType, reason: str, message: str) -> None:
        """Queue an event on ``target``; drops (and counts) it if it repeats too fast or the
        queue is full."""
        key = _Key(target=target, type=str(type_), reason=str(reason),
                   message=message[:MAX_MESSAGE])
        if not self._buckets.allow(key):
            # A target failing every pass would otherwise PATCH its event every sync period.
            self.counters.throttled += 1
            return
        try:
            self._queue.put_nowait(key)
        except asyncio.QueueFull:
            self.counters.dropped += 1
            log.warning("event queue full; event dropped", reason=reason, target=target.name)

    async def flush(self) -> None:
        """Until every queued event has been sent (or failed)."""
        await self._queue.join()

    async def close(self, *, grace: float = 5.0) -> None:
        """Send what is queued (for at most ``grace`` seconds), then stop the worker."""
        if self._worker is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self.flush()
        self._worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._worker
        self._worker = None

    async def _drain(self) -> None:
        while True:
            key = await self._queue.get()
            try:
                await self._send(key)
            except Exception as error:  # recording must never fail a caller
                self.counters.failed += 1
                log.warning("could not record event", reason=key.reason,
                            target=key.target.name, error=str(error))
            finally:
                self._queue.task_done()

    async def _send(self, key: _Key) -> None:
        now = self._clock()
        seen = self._seen.get(key)
        if seen is not None:
            try:
                await self._patch(key, seen, now)
                return
            except NotFoundError:
                pass  # the Event expired (its TTL is an hour): start a new one
        # client-go's name: <object>.<unix nanos in hex>; kept increasing so two events in
        # the same nanosecond (or a coarse clock) cannot collide.
        self._last_nanos = max(int(now.timestamp() * 1e9), self._last_nanos + 1)
        name = f"{key.target.name}.{self._last_nanos:x}"
        with api_errors(f"create event {key.reason} on {key.target.name}"):
            await self._core.create_namespaced_event(
                key.target.namespace, self._body(key, name, now))
        self.counters.created += 1
        self._remember(key, _Seen(name=name, count=1))

    async def _patch(self, key: _Key, seen: _Seen, now: datetime) -> None:
        patch = {"count": seen.count + 1, "lastTimestamp": _timestamp(now)}
        with api_errors(f"update event {seen.name}"):
            await self._core.patch_namespaced_event(
                seen.name, key.target.namespace, patch,
                _content_type="application/merge-patch+json")
        self.counters.patched += 1
        self._remember(key, _Seen(name=seen.name, count=seen.count + 1))

    def _remember(self, key: _Key, seen: _Seen) -> None:
        self._seen[key] = seen
        self._seen.move_to_end(key)
        while len(self._seen) > self._remembered:
            self._seen.popitem(last=False)

    def _body(self, key: _Key, name: str, now: datetime) -> dict[str, Any]:
        target = key.target
        involved = {"apiVersion": target.api_version, "kind": target.kind,
                    "namespace": target.namespace, "name": target.name}
        if target.uid:
            involved["uid"] = target.uid
        return {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": target.namespace},
            "involvedObject": involved,
            "type": key.type, "reason": key.reason, "message": key.message,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT, "reportingInstance": self._instance,
            "firstTimestamp": _timestamp(now), "lastTimestamp": _timestamp(now), "count": 1,
        }
