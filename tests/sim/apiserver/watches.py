"""Watch streams: chunked JSON lines of ADDED / MODIFIED / DELETED / BOOKMARK / ERROR events.

Semantics as the real watch cache: no resourceVersion (or "0") starts with synthetic ADDED
events for the current state; a resourceVersion replays the retained history after it; one
older than the window is an HTTP 200 stream with a single ERROR event carrying a 410 Expired
Status. ``timeoutSeconds`` ends the stream; ``allowWatchBookmarks`` adds BOOKMARK events every
``bookmark_interval`` seconds and before the timeout ends the stream; ``sendInitialEvents``
ends the initial state with a bookmark annotated ``k8s.io/initial-events-end``, which carries
``metadata.shardInfo`` when the watch honoured a ``shardSelector`` (sharding.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import sharding
from .errors import ApiError, bad_request
from .objects import to_view
from .resources import ResourceType
from .selectors import parse_field_selector, parse_label_selector
from .sharding import ShardSelector
from .store import Watcher
from .tables import table, wants_table
from .wire import encode

if TYPE_CHECKING:
    from .routes import Target
    from .server import SimApiServer


def _bookmark(rt: ResourceType, rv: int, *, initial_end: bool = False,
              shard: ShardSelector | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": str(rv), "creationTimestamp": None}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    if shard is not None:
        meta["shardInfo"] = {"selector": shard.text}
    return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}


@dataclass(slots=True, kw_only=True, eq=False)
class _Stream:
    """One open watch response and how its events are shaped."""

    server: SimApiServer
    request: web.Request
    response: web.StreamResponse
    user: str
    rt: ResourceType
    watcher: Watcher
    as_table: bool
    include_object: str
    shard: ShardSelector | None

    async def write(self, event: dict[str, Any]) -> None:
        partition = self.server.partitions.get(self.user)
        if partition is not None:
            await partition.cross(self.request.transport)
        data = encode(event)
        self.server.bytes_sent[self.user] += len(data)
        await self.response.write(data)

    def cut(self) -> None:
        """Abort the connection, as a network reset would."""
        if self.request.transport is not None:
            self.request.transport.abort()

    async def event(self, item: tuple[str, Any]) -> None:
        kind, payload = item
        if kind == "BOOKMARK":
            body = _bookmark(self.rt, payload)
        elif kind == "ERROR":
            body = payload
        elif self.as_table:
            # kubectl get --watch asks for Table output: each event carries a one-row Table.
            obj = to_view(self.rt, payload)
            body = table(self.rt, [obj], now=self.server.clock.now(),
                         include_object=self.include_object,
                         list_meta={"resourceVersion": obj["metadata"]["resourceVersion"]})
        else:
            body = to_view(self.rt, payload)
        await self.write({"type": kind, "object": body})

    async def drain_initial(self) -> None:
        queue = self.watcher.queue
        while not queue.empty():
            item = queue.get_nowait()
            if item is None:
                queue.put_nowait(None)
                return
            await self.event(item)
        await self.write({"type": "BOOKMARK", "object": _bookmark(
            self.rt, self.server.store.resource_version, initial_end=True, shard=self.shard)})

    async def follow(self, timeout: float, bookmark_interval: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_bookmark = loop.time() + bookmark_interval
        while True:
            now = loop.time()
            wake = min(deadline, next_bookmark) if self.watcher.bookmarks else deadline
            if now >= wake:
                if self.watcher.bookmarks:
                    await self.event(("BOOKMARK", self.server.store.resource_version))
                    next_bookmark = now + bookmark_interval
                if now >= deadline:
                    return
                continue
            try:
                item = await asyncio.wait_for(self.watcher.queue.get(), wake - now)
            except TimeoutError:
                continue
            if item is None:
                return
            await self.event(item)


class Watches:
    def __init__(self, server: SimApiServer) -> None:
        self.server = server
        self.bookmark_interval = 60.0
        self.default_timeout = 1800.0
        self.streams: set[_Stream] = set()

    def _open(self, request: web.Request, target: Target,
              shard: ShardSelector | None) -> Watcher:
        query, rt = request.query, target.rt
        labels = parse_label_selector(query.get("labelSelector", ""))
        fields = parse_field_selector(query.get("fieldSelector", ""), rt.field_labels)
        if target.name is not None:
            raise bad_request("watch of a single object by name is not supported; "
                              "use fieldSelector=metadata.name=<name>")

        def matches(stored: dict[str, Any]) -> bool:
            obj = to_view(rt, stored)
            return labels(obj["metadata"].get("labels") or {}) and fields(obj) and (
                shard is None or shard.matches(obj))

        rv = query.get("resourceVersion", "")
        if rv not in ("", "0") and not rv.isdigit():
            raise bad_request(f'resourceVersion: Invalid value: "{rv}": must be an integer')
        since = int(rv) if rv not in ("", "0") else None
        return self.server.store.watch(
            rt.storage_key, namespace=target.namespace, matches=matches, since=since,
            bookmarks=query.get("allowWatchBookmarks", "").lower() in ("true", "1"))

    def cut(self, user: str) -> int:
        """Abort the open watch connections of ``user``; returns how many."""
        cut = [stream for stream in self.streams if stream.user == user]
        for stream in cut:
            stream.cut()
        return len(cut)

    async def serve(self, request: web.Request, target: Target,
                    started: Callable[[], None], user: str) -> web.StreamResponse:
        query = request.query
        timeout = float(query.get("timeoutSeconds") or self.default_timeout)
        gone: ApiError | None = None
        shard = sharding.requested(query, self.server.shard_selector_mode, watch=True)
        try:
            watcher: Watcher | None = self._open(request, target, shard)
        except ApiError as error:
            if error.code != 410:
                raise
            watcher, gone = None, error
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        started()
        if watcher is None:
            assert gone is not None
            await response.write(encode({"type": "ERROR", "object": gone.status()}))
            await response.write_eof()
            return response
        stream = _Stream(server=self.server, request=request, response=response, user=user,
                         rt=target.rt, watcher=watcher,
                         as_table=wants_table(request.headers.get("Accept", "")),
                         include_object=query.get("includeObject", "Metadata"), shard=shard)
        self.streams.add(stream)
        try:
            if query.get("sendInitialEvents", "").lower() == "true":
                await stream.drain_initial()
            await stream.follow(timeout, self.bookmark_interval)
            await response.write_eof()
        except ConnectionResetError:
            pass
        finally:
            self.streams.discard(stream)
            self.server.store.watchers.discard(watcher)
        return response
