"""A list-and-watch cache of scale targets: apps/v1 Deployments, StatefulSets, ReplicaSets.

Polling ``GET /scale`` for every target on every pass is the daemon's main cost at scale
(10,000 targets: 10,000 requests per pass). This cache watches those of the three built-in
scalable kinds that targets have (``set_kinds``: not a Deployment's ReplicaSets unless a
target is one), in the namespaces that have targets (``informer``: LIST once, WATCH with bookmarks,
relist on 410 Gone, never die of an error) and derives from each object exactly what its
``/scale`` would return: ``spec.replicas`` (1 when absent, the API's default),
``status.replicas`` (0 when absent), ``status.selector`` (``format_label_selector`` of
``spec.selector``, as upstream's scale storage prints it), the object's resourceVersion (the
Scale's own, so a PUT ``/scale`` carrying it is a valid optimistic write), uid and
annotations. ``lookup`` answers from memory, or ``None`` when the caller must ask the server:
another kind, a namespace not synced yet, an object not (yet) seen, or a watch that has not
heard from the server for ``max_staleness`` seconds.

After our own write, ``record_write`` stores the PUT's answer and ignores watch events for
that object until the event of that very write arrives: events come in resourceVersion
order, so anything before it is older than what we wrote (resourceVersions are opaque: they
are compared for equality only). A relist replaces everything, as it is newer still.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import structlog
from kubernetes_asyncio.client import ApiClient, AppsV1Api

from autoscaler.adapters.kube.informer import Backoff, RawObject, WatchCounters, WatchOptions
from autoscaler.adapters.kube.labels import format_label_selector
from autoscaler.adapters.kube.structs import ObjectRef, Scale, annotations_of, replicas_managers
from autoscaler.adapters.kube.watch_cache import Informers, WatchCache, WatchedKind, WatchScope
from autoscaler.config import ScaleTargetRef
from autoscaler.errors import AutoscalerError, BadDataError
from autoscaler.runtime.ports import FIELD_MANAGER

log = structlog.get_logger("autoscaler.kube.targets")

API_VERSION = "apps/v1"
KINDS: Mapping[str, str] = MappingProxyType(
    {"Deployment": "deployments", "StatefulSet": "statefulsets", "ReplicaSet": "replicasets"})
"""The kinds this cache serves, with their plurals."""


def served_kinds(kinds: Iterable[str]) -> frozenset[str]:
    """Those of ``kinds`` this cache can serve."""
    return frozenset(kinds) & KINDS.keys()


def kinds_of(refs: Iterable[ScaleTargetRef]) -> frozenset[str]:
    """The kinds to watch for targets with these references: a Deployment's ReplicaSets are
    not watched unless a target is a ReplicaSet (a Deployment keeps up to
    ``revisionHistoryLimit`` + 1 of them: the cache would hold ten times its targets)."""
    return frozenset(ref.kind for ref in refs if TargetCache.serves(ref))


@dataclass(slots=True)
class TargetCounters(WatchCounters):
    """The watches' counters, plus how ``lookup`` answered."""

    hits: int = 0
    """Served from memory."""
    misses: int = 0
    """A cached kind the caller had to read from the server (not synced, unseen, stale)."""


def scale_from_object(raw: Mapping[str, Any], *, kind: str) -> Scale:
    """What ``/scale`` of this apps/v1 object returns; ``BadDataError`` if it is not one."""
    try:
        metadata, spec, status = (raw.get(key) or {} for key in ("metadata", "spec", "status"))
        replicas = spec.get("replicas")
        return Scale(
            target=ObjectRef(api_version=API_VERSION, kind=kind,
                             namespace=sys.intern(str(metadata["namespace"])),
                             name=str(metadata["name"]),
                             uid=metadata.get("uid")),
            # spec.replicas defaults to 1 for these kinds (a nil pointer is defaulted to 1).
            spec_replicas=1 if replicas is None else int(replicas),
            status_replicas=int(status.get("replicas") or 0),
            selector=format_label_selector(spec.get("selector")),
            resource_version=str(metadata.get("resourceVersion") or ""),
            annotations=annotations_of(metadata.get("annotations")),
            replicas_managers=replicas_managers(metadata),
        )
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise BadDataError(f"a {kind} from the watch is not a valid object: {error!r}") from error


class _TargetSink:
    """One kind in one namespace: name -> Scale, and the writes whose event is awaited."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.scales: dict[str, Scale] = {}
        self.pending: dict[str, str] = {}
        """name -> resourceVersion we wrote; older events for it are skipped."""

    def convert(self, obj: RawObject) -> Scale | None:
        # Listed again at the version cached (a relist): the same object, kept (as pods are).
        metadata = obj.get("metadata") or {}
        cached = self.scales.get(str(metadata.get("name", "")))
        if (cached is not None and cached.resource_version
                and cached.resource_version == metadata.get("resourceVersion")
                and cached.target.name not in self.pending):
            return cached
        try:
            return scale_from_object(obj, kind=self.kind)
        except AutoscalerError as error:
            # Dropped, not fatal: a lookup misses and the caller's GET /scale says why.
            log.warning("cannot derive the scale of an object", kind=self.kind,
                        name=str((obj.get("metadata") or {}).get("name", "")), error=str(error))
            return None

    def replace(self, converted: list[Scale]) -> None:
        self.pending.clear()
        self.scales = {scale.target.name: scale for scale in converted}

    def upsert(self, obj: RawObject) -> None:
        name = str((obj.get("metadata") or {}).get("name", ""))
        scale = self.convert(obj)
        if scale is None:
            self.scales.pop(name, None)
            return
        awaited = self.pending.get(name)
        if awaited is not None:
            if scale.resource_version != awaited:
                return  # older than our write, whose own event is still to come
            del self.pending[name]
        self.scales[name] = scale

    def delete(self, obj: RawObject) -> None:
        name = str((obj.get("metadata") or {}).get("name", ""))
        self.scales.pop(name, None)
        self.pending.pop(name, None)

    def record_write(self, written: Scale) -> Scale:
        cached = self.scales.get(written.target.name)
        if cached is None or not written.resource_version:
            return written
        merged = dataclasses.replace(
            cached, spec_replicas=written.spec_replicas,
            status_replicas=written.status_replicas,
            selector=written.selector or cached.selector,
            resource_version=written.resource_version,
            # Our write set the count (the answer, a Scale, carries no managed fields).
            replicas_managers=cached.replicas_managers
            if written.spec_replicas == cached.spec_replicas else (FIELD_MANAGER,))
        self.scales[written.target.name] = merged
        if written.resource_version != cached.resource_version:
            # A no-op write keeps the version and makes no event: nothing to wait for.
            self.pending[written.target.name] = written.resource_version
        return merged


class TargetCache(WatchCache):
    """Scales of apps/v1 workloads per namespace; use as ``async with TargetCache(...)``."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        watch_timeout: int = 300,
        page_size: int = 500,
        backoff: Backoff | None = None,
        max_staleness: float | None = None,
        scope: WatchScope = "cluster",
        kinds: Iterable[str] = KINDS,
    ) -> None:
        apps = AppsV1Api(api_client)
        self._options = WatchOptions(watch_timeout=watch_timeout, page_size=page_size,
                                     backoff=backoff or Backoff())
        self._scope = scope
        # A healthy watch hears from the server at least when it ends (watch_timeout) or at
        # each bookmark; longer silence means it is failing, and the server must be asked.
        self._max_staleness = (watch_timeout + 60.0) if max_staleness is None \
            else max_staleness
        self._sinks: dict[tuple[str, str], _TargetSink] = {}
        self.counters = TargetCounters()
        self._calls = {"Deployment": (apps.list_namespaced_deployment,
                                      apps.list_deployment_for_all_namespaces),
                       "StatefulSet": (apps.list_namespaced_stateful_set,
                                       apps.list_stateful_set_for_all_namespaces),
                       "ReplicaSet": (apps.list_namespaced_replica_set,
                                      apps.list_replica_set_for_all_namespaces)}
        self.kinds = served_kinds(kinds)
        self._informers = self._watching(self.kinds)
        self._changing = asyncio.Lock()
        """Held while the namespaces or the kinds change: a change of kinds hands the
        namespaces watched to new watches, so neither may be half done under the other."""

    def _watching(self, kinds: frozenset[str]) -> Informers:
        watched = [WatchedKind(resource=plural, namespaced=self._calls[kind][0],
                               cluster=self._calls[kind][1], sink_for=self._sink_maker(kind))
                   for kind, plural in KINDS.items() if kind in kinds]
        return Informers(watched, owner="the target cache", scope=self._scope,
                         counters=self.counters, options=self._options)

    async def set_kinds(self, kinds: Iterable[str]) -> None:
        """Watch these kinds only (those of the configured targets; others are ignored).

        A change starts the watches over: the namespaces watched now are listed again for
        the new kinds (lookups ask the server until they have synced), and the objects of a
        kind no longer wanted are dropped.
        """
        wanted = served_kinds(kinds)
        async with self._changing:
            if wanted == self.kinds:
                return
            log.info("watching other workload kinds", kinds=sorted(wanted),
                     before=sorted(self.kinds))
            old, namespaces = self._informers, self._informers.namespaces
            self.kinds, self._informers = wanted, self._watching(wanted)
            for key in [key for key in self._sinks if key[1] not in wanted]:
                del self._sinks[key]
            self._informers.add_many(sorted(namespaces))
            await old.close()

    async def set_namespaces(self, namespaces: Iterable[str]) -> None:
        async with self._changing:
            await super().set_namespaces(namespaces)

    @staticmethod
    def serves(ref: ScaleTargetRef) -> bool:
        """Whether the target's kind is one this cache watches."""
        return ref.api_version == API_VERSION and ref.kind in KINDS

    def lookup(self, namespace: str, ref: ScaleTargetRef) -> Scale | None:
        """The target's Scale from memory, or ``None``: ask the server.

        A namespace not watched yet is added (its watch starts now), so the next pass
        finds it synced. A kind not watched (``set_kinds``) is always asked of the server.
        """
        if not self.serves(ref) or ref.kind not in self.kinds:
            return None
        self.add_namespace(namespace)
        sink = self._sinks.get((namespace, ref.kind))
        scale = None
        if sink is not None and self._informers.is_synced(namespace) \
                and self._informers.seconds_since_contact(namespace) <= self._max_staleness:
            scale = sink.scales.get(ref.name)
        if scale is None:
            self.counters.misses += 1
        else:
            self.counters.hits += 1
        return scale

    def record_write(self, namespace: str, ref: ScaleTargetRef, written: Scale) -> Scale:
        """Keep our own write: never serve an older resourceVersion than the one written.

        Returns ``written`` with the cached annotations (the PUT's answer carries none).
        """
        sink = self._sinks.get((namespace, ref.kind)) if self.serves(ref) else None
        return written if sink is None else sink.record_write(written)

    def _forget(self, namespace: str) -> None:
        for kind in KINDS:
            self._sinks.pop((namespace, kind), None)

    def _sink_maker(self, kind: str) -> Callable[[str], _TargetSink]:
        def sink_for(namespace: str) -> _TargetSink:
            sink = self._sinks[(namespace, kind)] = _TargetSink(kind)
            return sink
        return sink_for
