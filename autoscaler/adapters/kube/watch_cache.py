"""A cache's kinds watched over a changing set of namespaces: the base of the watch caches.

``Informers`` runs one ``informer.Informer`` per kind per namespace, or one per kind for the
whole cluster whose objects a demultiplexer routes to per-namespace sinks (``WatchScope``).
``WatchCache`` is what the pod, target and owner caches share over it: the namespaces they
watch, whether each has synced, how stale each may be, and which watches died.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Self

import structlog

from autoscaler.adapters.kube.informer import (
    Informer,
    ListCall,
    RawObject,
    Sink,
    WatchCounters,
    WatchOptions,
)
from autoscaler.runtime.ring import shard_selector

log = structlog.get_logger("autoscaler.kube.watch")

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
    sharded: bool = True
    """The client's list call takes ``shard_selector`` (kubernetes-asyncio's generic
    ``CustomObjectsApi`` does not: its kinds are filtered on our side only)."""


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


CLUSTER = "(all namespaces)"

MAX_SELECTOR_LENGTH = 64 * 1024
"""Characters of ``shardSelector`` at most: it names each namespace's hash (~80 characters
each: about 800 namespaces). kube-apiserver takes request lines up to 1 MiB
(``MaxHeaderBytes``); a proxy in between may take less. Past it the cache filters on our
side only."""

SelectorMode = Literal["server", "client"]
"""Who filtered a cluster-wide LIST to the watched namespaces: the API server (it echoed our
``shardSelector`` in ``metadata.shardInfo``), or only we (no echo: no KEP-5866 support)."""

_ECHO = re.compile(rb'"shardInfo"\s*:\s*\{\s*"selector"\s*:\s*("(?:[^"\\]|\\.)*")')


class _ShardedLists:
    """The cluster-wide list calls of a cache's kinds, asking the API server for only the
    watched namespaces' objects (KEP-5866 ``shardSelector``, ``ring.shard_selector``) where
    it can, and knowing from each LIST's echo whether it did. Our side filters either way
    (``_NamespaceDemux``): a resumed WATCH carries no echo, and an HA control plane mid-rollout
    may have a server that ignores the parameter."""

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self.selector: str | None = None
        self.modes: dict[str, SelectorMode] = {}
        """Per resource, who filtered its last LIST."""
        self._refused: set[str] = set()
        """Resources whose server refused the selector (a grammar it does not know)."""

    def select(self, namespaces: Iterable[str]) -> None:
        """The namespaces the next LIST and WATCH ask for (none: everything)."""
        wanted = sorted(namespaces)
        text = shard_selector(wanted) if wanted else None
        self.selector = text if text is not None and len(text) <= MAX_SELECTOR_LENGTH else None

    def call(self, kind: WatchedKind) -> ListCall:
        """``kind``'s cluster-wide call in the namespaced call's shape (the informer's)."""
        async def list_all(_namespace: str, **query: Any) -> Any:
            selector = self.selector if kind.sharded else None
            if selector is None or kind.resource in self._refused:
                self._say(kind.resource, "client", query)
                return await kind.cluster(**query)
            response = await kind.cluster(shard_selector=selector, **query)
            if query.get("watch") or query.get("_continue"):
                return response  # only a LIST's first page carries the echo we check
            return await self._checked(kind, response, selector, query)
        return list_all

    async def _checked(self, kind: WatchedKind, response: Any, selector: str,
                       query: dict[str, Any]) -> Any:
        body = await response.read()  # kept by the response: the informer reads it again
        if response.status == 400 and b"shardSelector" in body:
            response.release()
            self._refused.add(kind.resource)
            log.warning("the API server refused the shard selector; filtering on our side",
                        cache=self._owner, resource=kind.resource,
                        error=body[:300].decode(errors="replace"))
            return await self.call(kind)(CLUSTER, **query)
        echo = _ECHO.search(body) if response.status < 300 else None
        honoured = echo is not None and _spaceless(json.loads(echo.group(1))) == _spaceless(
            selector)
        self._say(kind.resource, "server" if honoured else "client", query)
        return response

    def _say(self, resource: str, mode: SelectorMode, query: dict[str, Any]) -> None:
        if query.get("watch") or query.get("_continue") or self.modes.get(resource) == mode:
            return
        self.modes[resource] = mode
        log.info("cluster-wide list filtered to the watched namespaces", cache=self._owner,
                 resource=resource, by="the API server (KEP-5866)" if mode == "server" else
                 "this process")


def _spaceless(text: str) -> str:
    return "".join(text.split())


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
        self.lists = _ShardedLists(owner)

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
        self.lists.select(self._groups.keys() | set(new))
        if not self._cluster:
            self._cluster = [
                Informer(resource=kind.resource, namespace=CLUSTER,
                         list_call=self.lists.call(kind), sink=demux,
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
        await self.remove_many([namespace])

    async def remove_many(self, namespaces: Iterable[str]) -> None:
        """Stop watching these namespaces; cluster-wide, the shared watches resume (no relist)
        asking the server for the rest only."""
        gone = [namespace for namespace in namespaces if namespace in self._groups]
        if not gone:
            return
        groups = [self._groups.pop(namespace) for namespace in gone]
        if self._scope == "namespaces":
            for group in groups:
                for informer in group:
                    await informer.stop()
            return
        for demux in self._demuxes:
            for namespace in gone:
                demux.remove(namespace)
        if not self._groups:
            for informer in self._cluster:
                await informer.stop()
            self._cluster = []
            return
        self.lists.select(self._groups.keys())
        for informer in self._cluster:
            informer.restart(relist=False)

    async def set(self, namespaces: Iterable[str]) -> None:
        """Exactly these namespaces: start the new ones, stop the others."""
        wanted = set(namespaces)
        self.add_many(sorted(wanted - self._groups.keys()))
        await self.remove_many(sorted(self._groups.keys() - wanted))

    async def close(self) -> None:
        await self.remove_many(list(self._groups))

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

    @property
    def selector_modes(self) -> dict[str, SelectorMode]:
        """Per resource, who filtered its last cluster-wide LIST to the watched namespaces."""
        return dict(self._informers.lists.modes)

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
        await self.set_namespaces(())

    def _forget(self, namespace: str) -> None:
        raise NotImplementedError
