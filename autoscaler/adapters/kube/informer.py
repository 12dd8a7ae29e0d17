"""List-and-watch of one resource kind: the machinery behind the watch caches.

An ``Informer`` LISTs one kind in one namespace (paginated), then WATCHes from the list's
resourceVersion with bookmarks, resuming each new watch from the last resourceVersion seen.
A 410 Gone (an expired watch or continue token) leads to a relist; any other failure to a
jittered exponential backoff and a resumed watch. Its task never dies of an error; only
``stop`` ends it. Objects reach a ``Sink`` as plain JSON dicts (no generated models): the
whole LIST at once (``replace``), then one event at a time (``upsert``/``delete``).
``watch_cache`` runs a cache's kinds over a changing set of namespaces with these; the pod,
target and owner caches are built on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

import structlog
from kubernetes_asyncio import watch
from kubernetes_asyncio.client.exceptions import ApiException

from autoscaler.adapters.kube.api_errors import api_errors, read_body
from autoscaler.errors import NotFoundError, TransientError

log = structlog.get_logger("autoscaler.kube.watch")

RawObject = dict[str, Any]
ListCall = Callable[..., Awaitable[Any]]
"""A kubernetes-asyncio ``list_namespaced_<plural>`` method: ``(namespace, **query)``."""


class PlainWatch(watch.Watch):
    """kubernetes-asyncio's ``Watch`` whose events stay the dicts they are parsed into.

    The library's constructor builds an ``ApiClient`` of its own for every watch (a new SSL
    context loading the system's CA certificates: ~15-25 ms of CPU) only to turn each event
    into a model, which ``return_type="object"`` then undoes with a ``json.dumps`` and a
    second ``json.loads`` of the object (3.5x the cost of an event). Neither is needed: the
    event's ``raw_object`` is what the sinks take. The attributes set here are those the
    library's ``__init__`` sets (a test compares them).
    """

    def __init__(self) -> None:  # not super().__init__(): that builds the ApiClient
        self._raw_return_type = "object"
        self._stop = False
        self._api_client = None  # type: ignore[assignment]  # read only to build models
        self.resource_version = None
        self.resp = None

    def unmarshal_event(self, data: str | bytes, response_type: str | None) -> Any:
        return super().unmarshal_event(data, None)  # no model: the dict as parsed

    async def close(self) -> None:
        if self.resp is not None:
            self.resp.release()
            self.resp = None


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
                body = await read_body(response)
            except ApiException as error:
                if error.status == 410:  # the continue token expired
                    raise _Expired from error
                raise
        page = json.loads(body)
        if not isinstance(page, dict):
            raise TransientError(f"{what}: not a list")
        return page

    async def _watch(self) -> None:
        self._counters.watches += 1
        what = f"watch {self.resource} in namespace {self.namespace}"
        timeout = self._options.watch_timeout
        async with PlainWatch() as stream:
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
