"""Watch streams: chunked JSON lines of ADDED / MODIFIED / DELETED / BOOKMARK / ERROR events.

Semantics as the real watch cache: no resourceVersion (or "0") starts with synthetic ADDED
events for the current state; a resourceVersion replays the retained history after it; one
older than the window is an HTTP 200 stream with a single ERROR event carrying a 410 Expired
Status. ``timeoutSeconds`` ends the stream; ``allowWatchBookmarks`` adds BOOKMARK events every
``bookmark_interval`` seconds and before the timeout ends the stream; ``sendInitialEvents``
ends the initial state with a bookmark annotated ``k8s.io/initial-events-end``.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .errors import ApiError, bad_request
from .objects import to_view
from .resources import ResourceType
from .selectors import parse_field_selector, parse_label_selector

if TYPE_CHECKING:
    from .routes import Target
    from .server import SimApiServer


def _bookmark(rt: ResourceType, rv: int, *, initial_end: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": str(rv), "creationTimestamp": None}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}


class Watches:
    def __init__(self, server: SimApiServer) -> None:
        self.server = server
        self.bookmark_interval = 60.0
        self.default_timeout = 1800.0

    def _open(self, request: web.Request, target: Target) -> Any:
        query, rt = request.query, target.rt
        labels = parse_label_selector(query.get("labelSelector", ""))
        fields = parse_field_selector(query.get("fieldSelector", ""), rt.field_labels)
        if target.name is not None:
            raise bad_request("watch of a single object by name is not supported; "
                              "use fieldSelector=metadata.name=<name>")

        def matches(stored: dict[str, Any]) -> bool:
            obj = to_view(rt, stored)
            return labels(obj["metadata"].get("labels") or {}) and fields(obj)

        rv = query.get("resourceVersion", "")
        if rv not in ("", "0") and not rv.isdigit():
            raise bad_request(f'resourceVersion: Invalid value: "{rv}": must be an integer')
        since = int(rv) if rv not in ("", "0") else None
        return self.server.store.watch(
            rt.storage_key, namespace=target.namespace, matches=matches, since=since,
            bookmarks=query.get("allowWatchBookmarks", "").lower() in ("true", "1"))

    async def serve(self, request: web.Request, target: Target) -> web.StreamResponse:
        query = request.query
        timeout = float(query.get("timeoutSeconds") or self.default_timeout)
        initial_events = query.get("sendInitialEvents", "").lower() == "true"
        try:
            watcher = self._open(request, target)
        except ApiError as error:
            if error.code != 410:
                raise
            watcher = None
            gone = error
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        if watcher is None:
            await self._write(response, {"type": "ERROR", "object": gone.status()})
            await response.write_eof()
            return response
        try:
            if initial_events:
                await self._drain_initial(response, target.rt, watcher)
            await self._stream(response, target.rt, watcher, timeout)
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.server.store.watchers.discard(watcher)
        return response

    async def _drain_initial(self, response: web.StreamResponse, rt: ResourceType,
                             watcher: Any) -> None:
        while not watcher.queue.empty():
            item = watcher.queue.get_nowait()
            if item is None:
                watcher.queue.put_nowait(None)
                return
            await self._event(response, rt, item)
        await self._write(response, {"type": "BOOKMARK", "object": _bookmark(
            rt, self.server.store.resource_version, initial_end=True)})

    async def _stream(self, response: web.StreamResponse, rt: ResourceType, watcher: Any,
                      timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_bookmark = loop.time() + self.bookmark_interval
        while True:
            now = loop.time()
            wake = min(deadline, next_bookmark) if watcher.bookmarks else deadline
            if now >= wake:
                if watcher.bookmarks:
                    await self._event(response, rt, ("BOOKMARK",
                                                     self.server.store.resource_version))
                    next_bookmark = now + self.bookmark_interval
                if now >= deadline:
                    return
                continue
            try:
                item = await asyncio.wait_for(watcher.queue.get(), wake - now)
            except TimeoutError:
                continue
            if item is None:
                return
            await self._event(response, rt, item)

    async def _event(self, response: web.StreamResponse, rt: ResourceType,
                     item: tuple[str, Any]) -> None:
        kind, payload = item
        if kind == "BOOKMARK":
            body = _bookmark(rt, payload)
        elif kind == "ERROR":
            body = payload
        else:
            body = to_view(rt, payload)
        await self._write(response, {"type": kind, "object": body})

    @staticmethod
    async def _write(response: web.StreamResponse, event: dict[str, Any]) -> None:
        await response.write(json.dumps(event).encode() + b"\n")
