"""List-and-watch of one resource kind: the machinery behind the watch caches.

An ``Informer`` LISTs one kind in one namespace (paginated), then WATCHes from the list's
resourceVersion with bookmarks, resuming each new watch from the last resourceVersion seen.
A 410 Gone (an expired watch or continue token) leads to a relist; any other failure to a
jittered exponential backoff and a resumed watch. Its task never dies of an error; only
``stop`` ends it. Objects reach a ``Sink`` as plain JSON dicts (no generated models): the
whole LIST at once (``replace``), then one event at a time (``upsert``/``delete``).
``Informers`` runs a cache's kinds for a changing set of namespaces, either one informer per
kind per namespace or one per kind for the whole cluster, routed to per-namespace sinks.
``PodCache`` (pods) and ``TargetCache`` (scale targets) are built on these two.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, Self, cast

import structlog
from kubernetes_asyncio import watch
from kubernetes_asyncio.client.exceptions import ApiException

from autoscaler.adapters.kube.api_errors import api_errors
from autoscaler.errors import NotFoundError, TransientError

log = structlog.get_logger("autoscaler.kube.watch")

RawObject = dict[str, Any]
ListCall = Callable[..., Awaitable[Any]]
"""A kubernetes-asyncio ``list_namespaced_<plural>`` method: ``(namespace, **query)``."""


class _Expired(Exception):  # noqa: N818 - private signal, not an error we report
    """The server no longer has our resourceVersion (410 Gone): list again."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    initial: float = 0.5
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.2
    """Each delay is spread by this fraction, so namespaces do not retry in lockstep."""

    def delay(self, failures: int) -> float:
        base = min(self.maximum, self.initial * self.factor ** max(0, failures - 1))
        return base * random.uniform(1 - self.jitter, 1 + self.jitter)


@dataclass(slots=True)
class WatchCounters:
    """Requests and events since the cache started (mutable: these are counters)."""

    lists: int = 0
    """LIST requests, one per page."""
    watches: int = 0
    relists: int = 0
    """Relists forced by 410 Gone."""
    events: int = 0
    bookmarks: int = 0
    errors: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchOptions:
    watch_timeout: int = 300
    """Seconds the server keeps one watch open before we reopen it (resuming, no relist)."""
    page_size: int = 500
    backoff: Backoff = Backoff()


class Sink(Protocol):
    """Where an informer puts what it sees."""

    def convert(self, obj: RawObject) -> Any:
        """What the cache keeps of one listed object, or None to drop it. A LIST is converted
        page by page, so its raw JSON is never held whole (50,000 pods are ~1 GB as dicts)."""

    def replace(self, converted: list[Any]) -> None:
        """Every object of a completed LIST, as ``convert`` made them (the previous contents
        are forgotten)."""

    def upsert(self, obj: RawObject) -> None:
        """An object added or modified."""

    def delete(self, obj: RawObject) -> None:
        """An object deleted."""


class Informer:
    """One kind in one namespace, kept current in a ``Sink`` by a background task."""

    def __init__(self, *, resource: str, namespace: str, list_call: ListCall, sink: Sink,
                 counters: WatchCounters, options: WatchOptions,
                 absent_recheck: float | None = None) -> None:
        self.resource, self.namespace = resource, namespace
        self._absent_recheck = absent_recheck
        """For an optional kind (a CRD that may not be installed): a 404 means none of them,
        and the kind is looked for again after this many seconds."""
        self._list_call, self._sink = list_call, sink
        self._counters, self._options = counters, options
        self.synced = asyncio.Event()
        """Set once the first LIST has completed."""
        self.resource_version: str | None = None
        self._failures = 0
        """Failed attempts since the server last gave us something; sets the backoff."""
        self._contact = 0.0
        """Monotonic time of the last successful LIST, event or cleanly ended watch."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(
                self._run(), name=f"watch/{self.resource}/{self.namespace}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def restart(self, *, relist: bool) -> None:
        """Start over now (the running watch is cancelled), from a fresh LIST if ``relist``."""
        if self._task is not None:
            self._task.cancel()  # it stops at its next await; sinks are only fed between them
            self._task = None
        if relist:
            self.resource_version = None
        self.start()

    def seconds_since_contact(self) -> float:
        return float("inf") if not self._contact else time.monotonic() - self._contact

    def failure(self) -> str | None:
        """Why the informer's task ended, if it ended without being stopped (a bug: its
        loop catches every error)."""
        task = self._task
        if task is None or not task.done() or task.cancelled():
            return None
        error = task.exception()
        return (f"watch {self.resource}/{self.namespace}: "
                f"{type(error).__name__ if error else 'returned'}: {error or ''}")

    async def _run(self) -> None:
        while True:
            try:
                if self.resource_version is None:
                    await self._list()
                await self._watch()
                self._touch()
            except NotFoundError as error:
                if self._absent_recheck is None:
                    self._counters.errors += 1
                    await self._back_off("list/watch failed; retrying", error)
                    continue
                await self._absent()
            except _Expired:
                self._counters.relists += 1
                log.info("watch expired; relisting", resource=self.resource,
                         namespace=self.namespace)
                self.resource_version = None
                # Expiring again before anything arrived: back off rather than spin.
                await self._back_off("watch expired again", None)
            except Exception as error:  # the cache must outlive any fault
                self._counters.errors += 1
                await self._back_off("list/watch failed; retrying", error)

    async def _back_off(self, message: str, error: Exception | None) -> None:
        self._failures += 1
        if error is None and self._failures == 1:
            return  # a single expiry is routine: relist at once
        delay = self._options.backoff.delay(self._failures)
        log.warning(message, resource=self.resource, namespace=self.namespace,
                    error=str(error or "410 Gone"), retry_in=round(delay, 2))
        await asyncio.sleep(delay)

    def _touch(self) -> None:
        self._failures, self._contact = 0, time.monotonic()

    async def _absent(self) -> None:
        """The kind is not served: there are none of it until it is, which is checked again
        after ``absent_recheck`` seconds."""
        assert self._absent_recheck is not None
        if not self.synced.is_set():
            log.info("kind not served: none of it", resource=self.resource,
                     recheck_in=self._absent_recheck)
        self._sink.replace([])
        self.resource_version = None
        self._touch()
        self.synced.set()
        await asyncio.sleep(self._absent_recheck)

    async def _list(self) -> None:
        kept: list[Any] = []
        listed, resource_version, token = 0, None, None
        while True:
            page = await self._list_page(token)
            metadata = page.get("metadata") or {}
            resource_version = resource_version or metadata.get("resourceVersion")
            items = page.get("items") or ()
            listed += len(items)
            kept.extend(c for c in map(self._sink.convert, items) if c is not None)
            token = metadata.get("continue")
            if not token:
                break
        self._sink.replace(kept)
        self.resource_version = resource_version
        self._touch()
        self.synced.set()
        log.debug("listed", resource=self.resource, namespace=self.namespace,
                  objects=listed, kept=len(kept), resource_version=resource_version)

    async def _list_page(self, token: str | None) -> dict[str, Any]:
        self._counters.lists += 1
        what = f"list {self.resource} in namespace {self.namespace}"
        with api_errors(what):
            # _preload_content=False: the raw aiohttp response, parsed as plain JSON below.
            response: Any = await self._list_call(
                self.namespace, limit=self._options.page_size, _continue=cast(str, token),
                _preload_content=False)
            try:
                body = await response.read()
            finally:
                response.release()
            if response.status == 410:  # the continue token expired
                raise _Expired
            if response.status >= 300:  # unread bodies skip the client's status check
                error = ApiException(status=response.status, reason=response.reason)
                error.body = body.decode(errors="replace")
                raise error
        page = json.loads(body)
        if not isinstance(page, dict):
            raise TransientError(f"{what}: not a list")
        return page

    async def _watch(self) -> None:
        self._counters.watches += 1
        what = f"watch {self.resource} in namespace {self.namespace}"
        timeout = self._options.watch_timeout
        # return_type "object": events stay plain dicts; no models to build and discard.
        async with watch.Watch(return_type="object") as stream:
            with api_errors(what):
                try:
                    async for event in stream.stream(
                        self._list_call, self.namespace,
                        resource_version=self.resource_version,
                        allow_watch_bookmarks=True,
                        timeout_seconds=timeout,
                        # The server ends the watch at timeout_seconds; this bounds a hung one.
                        _request_timeout=timeout + 10,
                    ):
                        self._apply(event, what)
                except ApiException as error:
                    if error.status == 410:
                        raise _Expired from error
                    raise

    def _apply(self, event: Any, what: str) -> None:
        if not isinstance(event, dict) or not isinstance(event.get("raw_object"), dict):
            raise TransientError(f"{what}: a line of the stream is not a watch event")
        kind, raw = event.get("type"), event["raw_object"]
        self._touch()
        metadata = raw.get("metadata") or {}
        self.resource_version = metadata.get("resourceVersion") or self.resource_version
        if kind == "BOOKMARK":
            self._counters.bookmarks += 1
            return
        self._counters.events += 1
        if kind == "DELETED":
            self._sink.delete(raw)
        elif kind in ("ADDED", "MODIFIED"):
            self._sink.upsert(raw)


WatchScope = Literal["cluster", "namespaces"]
"""``cluster``: one watch per kind for the whole cluster, objects kept only for the namespaces
asked for (as kube-controller-manager and KEDA watch); ``namespaces``: one watch per kind per
namespace, for accounts whose RBAC only reaches some namespaces."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchedKind:
    """One kind a cache watches: how to list it, and the sink of each namespace."""

    resource: str
    namespaced: ListCall
    """``list_namespaced_<plural>(namespace, **query)``."""
    cluster: ListCall
    """``list_<plural>_for_all_namespaces(**query)``."""
    sink_for: Callable[[str], Sink]
    """Makes (and the cache keeps) the sink of one namespace."""
    absent_recheck: float | None = None
    """Set for a kind that may not be served (a CRD): see ``Informer``."""


class _NamespaceDemux:
    """The sink of a cluster-wide informer: routes each object to its namespace's sink and
    drops the namespaces nobody asked for (memory stays bounded by the targets)."""

    def __init__(self) -> None:
        self.sinks: dict[str, Sink] = {}
        self.filled: dict[str, asyncio.Event] = {}
        """Set once a LIST that included the namespace has been delivered."""

    def add(self, namespace: str, sink: Sink) -> None:
        self.sinks[namespace] = sink
        self.filled[namespace] = asyncio.Event()

    def remove(self, namespace: str) -> None:
        self.sinks.pop(namespace, None)
        self.filled.pop(namespace, None)

    def convert(self, obj: RawObject) -> tuple[str, Any] | None:
        namespace = _namespace_of(obj)
        sink = self.sinks.get(namespace)
        converted = None if sink is None else sink.convert(obj)
        return None if converted is None else (namespace, converted)

    def replace(self, converted: list[tuple[str, Any]]) -> None:
        grouped: dict[str, list[Any]] = {namespace: [] for namespace in self.sinks}
        for namespace, item in converted:
            bucket = grouped.get(namespace)
            if bucket is not None:
                bucket.append(item)
        for namespace, group in grouped.items():
            self.sinks[namespace].replace(group)
            self.filled[namespace].set()

    def upsert(self, obj: RawObject) -> None:
        sink = self.sinks.get(_namespace_of(obj))
        if sink is not None:
            sink.upsert(obj)

    def delete(self, obj: RawObject) -> None:
        sink = self.sinks.get(_namespace_of(obj))
        if sink is not None:
            sink.delete(obj)


def _namespace_of(obj: RawObject) -> str:
    return str((obj.get("metadata") or {}).get("namespace", ""))


def _all_namespaces(call: ListCall) -> ListCall:
    """A cluster-wide list call in the namespaced call's shape (the informer passes one)."""
    def list_all(_namespace: str, **query: Any) -> Awaitable[Any]:
        return call(**query)
    return list_all


CLUSTER = "(all namespaces)"


class Informers:
    """The informers of a cache's kinds for a changing set of namespaces, watched either
    namespace by namespace or cluster-wide (``WatchScope``)."""

    def __init__(self, kinds: Sequence[WatchedKind], *, owner: str, scope: WatchScope,
                 counters: WatchCounters, options: WatchOptions) -> None:
        self._kinds, self._scope = kinds, scope
        self._owner = owner
        """Names the cache in errors ("the pod cache")."""
        self._counters, self._options = counters, options
        self._groups: dict[str, Sequence[Informer]] = {}
        """Per namespace, its own informers (``namespaces``) or the shared ones (``cluster``)."""
        self._demuxes = [_NamespaceDemux() for _ in kinds]
        self._cluster: list[Informer] = []

    @property
    def namespaces(self) -> frozenset[str]:
        return frozenset(self._groups)

    @property
    def scope(self) -> WatchScope:
        return self._scope

    def add(self, namespace: str) -> bool:
        """Start a namespace's informers; False if it was already there."""
        return self.add_many([namespace])

    def add_many(self, namespaces: Iterable[str]) -> bool:
        """Start several namespaces; cluster-wide, the shared informers relist once for all."""
        new = [namespace for namespace in dict.fromkeys(namespaces)
               if namespace not in self._groups]
        if not new:
            return False
        if self._scope == "namespaces":
            for namespace in new:
                group = self._groups[namespace] = [self._informer(kind, namespace)
                                                   for kind in self._kinds]
                for informer in group:
                    informer.start()
            return True
        for kind, demux in zip(self._kinds, self._demuxes, strict=True):
            for namespace in new:
                demux.add(namespace, kind.sink_for(namespace))
        if not self._cluster:
            self._cluster = [
                Informer(resource=kind.resource, namespace=CLUSTER,
                         list_call=_all_namespaces(kind.cluster), sink=demux,
                         counters=self._counters, options=self._options,
                         absent_recheck=kind.absent_recheck)
                for kind, demux in zip(self._kinds, self._demuxes, strict=True)]
        for namespace in new:
            self._groups[namespace] = self._cluster
        for informer in self._cluster:
            # A new namespace's objects were filtered out of what was listed so far.
            informer.restart(relist=True)
        return True

    async def remove(self, namespace: str) -> None:
        group = self._groups.pop(namespace, ())
        if self._scope == "namespaces":
            for informer in group:
                await informer.stop()
            return
        for demux in self._demuxes:
            demux.remove(namespace)
        if not self._groups:
            for informer in self._cluster:
                await informer.stop()
            self._cluster = []

    async def set(self, namespaces: Iterable[str]) -> None:
        """Exactly these namespaces: start the new ones, stop the others."""
        wanted = set(namespaces)
        self.add_many(sorted(wanted - self._groups.keys()))
        for namespace in sorted(self._groups.keys() - wanted):
            await self.remove(namespace)

    async def close(self) -> None:
        for namespace in list(self._groups):
            await self.remove(namespace)

    def is_synced(self, namespace: str) -> bool:
        if namespace not in self._groups:
            return False
        if self._scope == "namespaces":
            return all(informer.synced.is_set() for informer in self._groups[namespace])
        return all(demux.filled[namespace].is_set() for demux in self._demuxes)

    async def wait_synced(self, namespace: str) -> None:
        """Until every kind of the namespace has been LISTed once (bound it with a timeout)."""
        group = self.group(namespace)
        if self._scope == "namespaces":
            for informer in group:
                await informer.synced.wait()
            return
        for demux in self._demuxes:
            await demux.filled[namespace].wait()

    def group(self, namespace: str) -> Sequence[Informer]:
        try:
            return self._groups[namespace]
        except KeyError:
            raise KeyError(f"namespace {namespace!r} is not in {self._owner}; "
                           "add it first") from None

    def seconds_since_contact(self, namespace: str) -> float:
        """The stalest informer's time since the server last answered it."""
        return max(informer.seconds_since_contact() for informer in self.group(namespace))

    def failures(self) -> list[str]:
        """Informers whose task ended without being stopped (see ``Informer.failure``)."""
        informers = {id(i): i for group in self._groups.values() for i in group}
        return [why for informer in informers.values()
                if (why := informer.failure()) is not None]

    def _informer(self, kind: WatchedKind, namespace: str) -> Informer:
        return Informer(resource=kind.resource, namespace=namespace,
                        list_call=kind.namespaced, sink=kind.sink_for(namespace),
                        counters=self._counters, options=self._options,
                        absent_recheck=kind.absent_recheck)


class WatchCache:
    """What the pod and target caches share: the namespaces they watch, over ``Informers``.

    A subclass builds ``_informers`` and says in ``_forget`` what it drops of a namespace
    that leaves; use as ``async with Cache(...)``.
    """

    _informers: Informers

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def namespaces(self) -> frozenset[str]:
        return self._informers.namespaces

    @property
    def scope(self) -> WatchScope:
        return self._informers.scope

    def add_namespace(self, namespace: str) -> None:
        """Start watching a namespace (idempotent)."""
        self._informers.add(namespace)

    async def remove_namespace(self, namespace: str) -> None:
        """Stop watching a namespace that no longer has targets and forget its objects."""
        await self._informers.remove(namespace)
        self._forget(namespace)

    async def set_namespaces(self, namespaces: Iterable[str]) -> None:
        """Watch exactly these namespaces (those with targets): start new ones, stop others."""
        wanted = set(namespaces)
        for namespace in self.namespaces - wanted:
            self._forget(namespace)
        await self._informers.set(wanted)

    def is_synced(self, namespace: str) -> bool:
        return self._informers.is_synced(namespace)

    async def wait_synced(self, namespace: str) -> None:
        """Until every kind of the namespace has LISTed once (bound it with a timeout)."""
        await self._informers.wait_synced(namespace)

    def seconds_since_contact(self, namespace: str) -> float:
        """How stale the namespace's objects may be: time since the server last answered."""
        return self._informers.seconds_since_contact(namespace)

    def failures(self) -> list[str]:
        """Watches that died (they must not: ``/healthz`` reports them)."""
        return self._informers.failures()

    async def close(self) -> None:
        """Cancel every watch and wait for them to finish."""
        for namespace in list(self.namespaces):
            await self.remove_namespace(namespace)

    def _forget(self, namespace: str) -> None:
        raise NotImplementedError
