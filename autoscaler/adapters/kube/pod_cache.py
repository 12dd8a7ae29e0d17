"""A list-and-watch cache of the pods of the namespaces that have targets.

Built on ``informer`` (LIST once, WATCH from its resourceVersion with bookmarks, relist on
410 Gone, backoff on any other failure, never die of an error). Pods are converted to the
core's ``Pod`` once per event, and ``pods_for`` answers from memory (``pod_index``): a pass
in steady state makes no LIST call (``counters`` proves it).
"""

from __future__ import annotations

import functools

from kubernetes_asyncio.client import ApiClient, CoreV1Api

from autoscaler.adapters.kube.informer import Backoff, RawObject, WatchCounters, WatchOptions
from autoscaler.adapters.kube.labels import Selector, parse_selector
from autoscaler.adapters.kube.pod_index import Entry, PodIndex
from autoscaler.adapters.kube.pod_json import labels_of, pod_from_json
from autoscaler.adapters.kube.watch_cache import Informers, WatchCache, WatchedKind, WatchScope
from autoscaler.algorithm import Pod
from autoscaler.errors import TransientError

__all__ = ["Backoff", "PodCache", "WatchCounters"]

_parse_cached = functools.lru_cache(maxsize=4096)(parse_selector)


_Converted = tuple[str, Entry, str | None]
"""A listed pod: its name, what the index keeps, its resourceVersion."""


class _PodSink:
    """An informer's sink that converts each pod once and keeps it in a ``PodIndex``.

    A relist reuses the entry of a pod listed again at the resourceVersion it has in the
    cache (the same version is the same object): a ring member relists its cluster-wide
    watches whenever its standby grows, and converting every pod again held a second copy
    of each until the list ended (the member's peak RSS) and cost its CPU."""

    def __init__(self) -> None:
        self.pods = PodIndex()
        self._versions: dict[str, str] = {}

    def convert(self, obj: RawObject) -> _Converted:
        metadata = obj["metadata"]
        name, version = metadata["name"], metadata.get("resourceVersion")
        if version is not None and self._versions.get(name) == version:
            cached = self.pods.get(name)
            if cached is not None:
                return name, cached, version
        return name, (labels_of(obj), pod_from_json(obj)), version

    def replace(self, converted: list[_Converted]) -> None:
        self.pods.replace((name, entry) for name, entry, _ in converted)
        self._versions = {name: version for name, _, version in converted
                          if version is not None}

    def upsert(self, obj: RawObject) -> None:
        metadata = obj["metadata"]
        name, version = metadata["name"], metadata.get("resourceVersion")
        self.pods.upsert(name, (labels_of(obj), pod_from_json(obj)))
        if version is None:
            self._versions.pop(name, None)
        else:
            self._versions[name] = version

    def delete(self, obj: RawObject) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        self.pods.delete(name)
        self._versions.pop(name, None)


class PodCache(WatchCache):
    """Pods per namespace, kept current by a watch; use as ``async with PodCache(...)``."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        watch_timeout: int = 300,
        page_size: int = 500,
        backoff: Backoff | None = None,
        scope: WatchScope = "cluster",
    ) -> None:
        core = CoreV1Api(api_client)
        options = WatchOptions(watch_timeout=watch_timeout, page_size=page_size,
                               backoff=backoff or Backoff())
        self._sinks: dict[str, _PodSink] = {}
        self.counters = WatchCounters()
        kind = WatchedKind(resource="pods", namespaced=core.list_namespaced_pod,
                           cluster=core.list_pod_for_all_namespaces, sink_for=self._sink_for)
        self._informers = Informers([kind], owner="the pod cache", scope=scope,
                                    counters=self.counters, options=options)

    def pods_for(self, namespace: str, selector: str | Selector) -> list[Pod]:
        """The cached pods matching ``selector`` (the runtime's ``PodPort``).

        A namespace not cached yet is added (its watch starts now). Raises
        ``TransientError`` until the namespace's first LIST completed (never an empty list
        that would look like "no pods"), and ``BadDataError`` for a selector that does not
        parse.
        """
        if isinstance(selector, str):
            selector = _parse_cached(selector)
        self.add_namespace(namespace)
        if not self._informers.is_synced(namespace):
            raise TransientError(f"the pod cache of namespace {namespace} has not synced yet")
        return self._sinks[namespace].pods.select(selector)

    def _sink_for(self, namespace: str) -> _PodSink:
        sink = self._sinks[namespace] = _PodSink()
        return sink

    def _forget(self, namespace: str) -> None:
        self._sinks.pop(namespace, None)
