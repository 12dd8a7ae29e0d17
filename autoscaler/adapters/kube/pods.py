"""A list-and-watch cache of pods, one LIST+WATCH loop per namespace that has targets.

Each namespace's task LISTs the pods once (paginated), then WATCHes from the list's
resourceVersion with bookmarks, resuming each new watch from the last resourceVersion seen.
A 410 Gone (an expired watch or continue token) leads to a relist; any other failure to a
jittered exponential backoff and a resumed watch. The task never dies of an error; only
``remove_namespace`` or ``close`` stop it. Pods are converted to the core's ``Pod`` once per
event, and ``pods_for`` answers from memory (``pod_index``): a pass in steady state makes no
LIST call (``counters`` proves it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import structlog
from kubernetes_asyncio import watch
from kubernetes_asyncio.client import ApiClient, CoreV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from autoscaler.adapters.kube.errors import api_errors
from autoscaler.adapters.kube.labels import Selector, parse_selector
from autoscaler.adapters.kube.pod_index import PodIndex
from autoscaler.adapters.kube.pod_json import labels_of, pod_from_json
from autoscaler.algorithm import Pod
from autoscaler.errors import TransientError

log = structlog.get_logger("autoscaler.kube.pods")


_parse_cached = functools.lru_cache(maxsize=4096)(parse_selector)


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


@dataclass(slots=True)
class _Namespace:
    name: str
    pods: PodIndex = field(default_factory=PodIndex)
    resource_version: str | None = None
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    failures: int = 0
    """Failed attempts since the server last gave us something; sets the backoff."""
    contact: float = 0.0
    """Monotonic time of the last successful LIST, event or cleanly ended watch."""


class PodCache:
    """Pods per namespace, kept current by a watch; use as ``async with PodCache(...)``."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        watch_timeout: int = 300,
        page_size: int = 500,
        backoff: Backoff | None = None,
    ) -> None:
        self._core = CoreV1Api(api_client)
        self._watch_timeout = watch_timeout
        self._page_size = page_size
        self._backoff = backoff or Backoff()
        self._namespaces: dict[str, _Namespace] = {}
        self.counters = WatchCounters()

    async def __aenter__(self) -> PodCache:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def namespaces(self) -> frozenset[str]:
        return frozenset(self._namespaces)

    def add_namespace(self, namespace: str) -> None:
        """Start caching a namespace (idempotent)."""
        if namespace in self._namespaces:
            return
        entry = _Namespace(name=namespace)
        entry.task = asyncio.create_task(self._run(entry), name=f"pod-watch/{namespace}")
        self._namespaces[namespace] = entry

    async def remove_namespace(self, namespace: str) -> None:
        """Stop watching a namespace that no longer has targets and forget its pods."""
        entry = self._namespaces.pop(namespace, None)
        if entry is not None and entry.task is not None:
            entry.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await entry.task

    async def set_namespaces(self, namespaces: Iterable[str]) -> None:
        """Watch exactly these namespaces: start the new ones, stop the others."""
        wanted = set(namespaces)
        for namespace in sorted(wanted - self._namespaces.keys()):
            self.add_namespace(namespace)
        for namespace in sorted(self._namespaces.keys() - wanted):
            await self.remove_namespace(namespace)

    def is_synced(self, namespace: str) -> bool:
        entry = self._namespaces.get(namespace)
        return entry is not None and entry.synced.is_set()

    async def wait_synced(self, namespace: str) -> None:
        """Until the namespace's first LIST has completed (bound it with ``asyncio.timeout``)."""
        await self._entry(namespace).synced.wait()

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
        entry = self._entry(namespace)
        if not entry.synced.is_set():
            raise TransientError(f"the pod cache of namespace {namespace} has not synced yet")
        return entry.pods.select(selector)

    async def close(self) -> None:
        """Cancel every watch and wait for them to finish."""
        for namespace in list(self._namespaces):
            await self.remove_namespace(namespace)

    def _entry(self, namespace: str) -> _Namespace:
        try:
            return self._namespaces[namespace]
        except KeyError:
            raise KeyError(f"namespace {namespace!r} is not in the pod cache; "
                           "add_namespace() it first") from None

    async def _run(self, entry: _Namespace) -> None:
        while True:
            try:
                if entry.resource_version is None:
                    await self._list(entry)
                await self._watch(entry)
                self._touch(entry)
            except _Expired:
                self.counters.relists += 1
                log.info("pod watch expired; relisting", namespace=entry.name)
                entry.resource_version = None
                # Expiring again before anything arrived: back off rather than spin.
                await self._back_off(entry, "pod watch expired again", None)
            except Exception as error:  # the cache must outlive any fault
                self.counters.errors += 1
                await self._back_off(entry, "pod list/watch failed; retrying", error)

    async def _back_off(self, entry: _Namespace, message: str, error: Exception | None) -> None:
        entry.failures += 1
        if error is None and entry.failures == 1:
            return  # a single expiry is routine: relist at once
        delay = self._backoff.delay(entry.failures)
        log.warning(message, namespace=entry.name, error=str(error or "410 Gone"),
                    retry_in=round(delay, 2))
        await asyncio.sleep(delay)

    def _touch(self, entry: _Namespace) -> None:
        entry.failures, entry.contact = 0, time.monotonic()

    def seconds_since_contact(self, namespace: str) -> float:
        """How stale the namespace's pods may be: time since the server last answered."""
        entry = self._entry(namespace)
        return float("inf") if not entry.contact else time.monotonic() - entry.contact

    async def _list(self, entry: _Namespace) -> None:
        pods: dict[str, tuple[Mapping[str, str], Pod]] = {}
        resource_version, token = None, None
        while True:
            page = await self._list_page(entry.name, token)
            metadata = page.get("metadata") or {}
            resource_version = resource_version or metadata.get("resourceVersion")
            for raw in page.get("items") or ():
                pods[raw["metadata"]["name"]] = (labels_of(raw), pod_from_json(raw))
            token = metadata.get("continue")
            if not token:
                break
        entry.pods.replace(pods.items())
        entry.resource_version = resource_version
        self._touch(entry)
        entry.synced.set()
        log.debug("pods listed", namespace=entry.name, pods=len(pods),
                  resource_version=resource_version)

    async def _list_page(self, namespace: str, token: str | None) -> dict[str, Any]:
        self.counters.lists += 1
        with api_errors(f"list pods in namespace {namespace}"):
            # _preload_content=False: the raw aiohttp response, parsed as plain JSON below.
            response: Any = await self._core.list_namespaced_pod(
                namespace, limit=self._page_size, _continue=cast(str, token),
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
            raise TransientError(f"list pods in namespace {namespace}: not a PodList")
        return page

    async def _watch(self, entry: _Namespace) -> None:
        self.counters.watches += 1
        what = f"watch pods in namespace {entry.name}"
        # return_type "object": events stay plain dicts; no V1Pod models to build and discard.
        async with watch.Watch(return_type="object") as stream:
            with api_errors(what):
                try:
                    async for event in stream.stream(
                        self._core.list_namespaced_pod, entry.name,
                        resource_version=entry.resource_version,
                        allow_watch_bookmarks=True,
                        timeout_seconds=self._watch_timeout,
                        # The server ends the watch at timeout_seconds; this bounds a hung one.
                        _request_timeout=self._watch_timeout + 10,
                    ):
                        self._apply(entry, event, what)
                except ApiException as error:
                    if error.status == 410:
                        raise _Expired from error
                    raise

    def _apply(self, entry: _Namespace, event: Any, what: str) -> None:
        if not isinstance(event, dict) or not isinstance(event.get("raw_object"), dict):
            raise TransientError(f"{what}: a line of the stream is not a watch event")
        kind, raw = event.get("type"), event["raw_object"]
        self._touch(entry)
        metadata = raw.get("metadata") or {}
        entry.resource_version = metadata.get("resourceVersion") or entry.resource_version
        if kind == "BOOKMARK":
            self.counters.bookmarks += 1
            return
        self.counters.events += 1
        if kind == "DELETED":
            entry.pods.delete(metadata.get("name", ""))
        elif kind in ("ADDED", "MODIFIED"):
            entry.pods.upsert(metadata["name"], (labels_of(raw), pod_from_json(raw)))
