"""A list-and-watch cache of the pods of the namespaces that have targets.

Built on ``informer`` (LIST once, WATCH from its resourceVersion with bookmarks, relist on
410 Gone, backoff on any other failure, never die of an error). Pods are converted to the
core's ``Pod`` once per event, and ``pods_for`` answers from memory (``pod_index``): a pass
in steady state makes no LIST call (``counters`` proves it).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

from kubernetes_asyncio.client import ApiClient, CoreV1Api

from autoscaler.adapters.kube.informer import (
    Backoff,
    Informers,
    RawObject,
    WatchCounters,
    WatchedKind,
    WatchOptions,
    WatchScope,
)
from autoscaler.adapters.kube.labels import Selector, parse_selector
from autoscaler.adapters.kube.pod_index import PodIndex
from autoscaler.adapters.kube.pod_json import labels_of, pod_from_json
from autoscaler.algorithm import Pod
from autoscaler.errors import TransientError

__all__ = ["Backoff", "PodCache", "WatchCounters"]

_parse_cached = functools.lru_cache(maxsize=4096)(parse_selector)


class _PodSink:
    """An informer's sink that converts each pod once and keeps it in a ``PodIndex``."""

    def __init__(self) -> None:
        self.pods = PodIndex()

    def convert(self, obj: RawObject) -> tuple[str, tuple[Mapping[str, str], Pod]]:
        return obj["metadata"]["name"], (labels_of(obj), pod_from_json(obj))

    def replace(self, converted: list[tuple[str, tuple[Mapping[str, str], Pod]]]) -> None:
        self.pods.replace(converted)

    def upsert(self, obj: RawObject) -> None:
        self.pods.upsert(obj["metadata"]["name"], (labels_of(obj), pod_from_json(obj)))

    def delete(self, obj: RawObject) -> None:
        self.pods.delete((obj.get("metadata") or {}).get("name", ""))


class PodCache:
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

    async def __aenter__(self) -> PodCache:
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
        """Start caching a namespace (idempotent)."""
        self._informers.add(namespace)

    async def remove_namespace(self, namespace: str) -> None:
        """Stop watching a namespace that no longer has targets and forget its pods."""
        await self._informers.remove(namespace)
        self._sinks.pop(namespace, None)

    async def set_namespaces(self, namespaces: Iterable[str]) -> None:
        """Watch exactly these namespaces: start the new ones, stop the others."""
        wanted = set(namespaces)
        for namespace in self.namespaces - wanted:
            self._sinks.pop(namespace, None)
        await self._informers.set(wanted)

    def is_synced(self, namespace: str) -> bool:
        return self._informers.is_synced(namespace)

    async def wait_synced(self, namespace: str) -> None:
        """Until the namespace's first LIST has completed (bound it with ``asyncio.timeout``)."""
        await self._informers.wait_synced(namespace)

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

    async def close(self) -> None:
        """Cancel every watch and wait for them to finish."""
        for namespace in list(self.namespaces):
            await self.remove_namespace(namespace)

    def seconds_since_contact(self, namespace: str) -> float:
        """How stale the namespace's pods may be: time since the server last answered."""
        return self._informers.seconds_since_contact(namespace)

    def _sink_for(self, namespace: str) -> _PodSink:
        sink = self._sinks[namespace] = _PodSink()
        return sink
