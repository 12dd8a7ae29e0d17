"""The object store: one global resourceVersion counter, a bounded change history, watch fan-out.

Objects are plain JSON dicts kept by storage key ``(group, plural)``, namespace and name.
Every write takes the next resourceVersion (a decimal string, as etcd's revision) and is
appended to the history; watches replay the history from their resourceVersion and then follow
live changes. A resourceVersion older than the retained window is ``Expired`` (410), which
tests force with ``compact()``. All methods are synchronous, so a read-check-write in one
request handler is atomic on the event loop, like an etcd transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .errors import ApiError, expired

Key = tuple[str, str]
Obj = dict[str, Any]
ObjectFilter = Callable[[Obj], bool]


@dataclass(frozen=True, slots=True)
class Change:
    """One committed write: the object before (None on create) and after (last state on delete)."""

    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    key: Key
    old: Obj | None
    new: Obj


@dataclass(slots=True, eq=False)
class Watcher:
    """One open watch. Queue items: (event type, payload) or None when the server ends it."""

    key: Key
    namespace: str | None
    matches: ObjectFilter
    bookmarks: bool
    queue: asyncio.Queue[tuple[str, Any] | None] = field(default_factory=asyncio.Queue)

    def _in_scope(self, obj: Obj) -> bool:
        return self.namespace is None or obj["metadata"].get("namespace") == self.namespace

    def offer(self, change: Change) -> None:
        """Translate a change as the watch cache does for a filtered watch."""
        if change.key != self.key or not self._in_scope(change.new):
            return
        was = change.old is not None and self.matches(change.old)
        now = self.matches(change.new)
        if change.type == "DELETED":
            event = "DELETED" if was else None
        elif was and now:
            event = "MODIFIED"
        elif now:
            event = "ADDED"
        else:
            event = "DELETED" if was else None
        if event:
            self.queue.put_nowait((event, copy.deepcopy(change.new)))


class Store:
    def __init__(self, *, history_limit: int = 10_000, first_rv: int = 1000) -> None:
        self._objects: dict[Key, dict[tuple[str, str], Obj]] = {}
        self._rv = first_rv
        self._history: deque[Change] = deque()
        self._history_limit = history_limit
        self._compacted_rv = first_rv
        self.watchers: set[Watcher] = set()
        self.listeners: list[Callable[[Change], None]] = []
        self._dry = False

    @property
    def resource_version(self) -> int:
        """The latest committed resourceVersion."""
        return self._rv

    # reads -------------------------------------------------------------------------------
    def get(self, key: Key, namespace: str | None, name: str) -> Obj | None:
        obj = self._objects.get(key, {}).get((namespace or "", name))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, key: Key, namespace: str | None = None,
             matches: ObjectFilter | None = None) -> list[Obj]:
        """Objects sorted by namespace and name, as etcd's key order gives them."""
        items = sorted(self._objects.get(key, {}).items())
        return [copy.deepcopy(o) for (ns, _), o in items
                if (namespace is None or ns == namespace) and (matches is None or matches(o))]

    # writes ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def dry_run(self) -> Iterator[None]:
        """Writes inside answer what they would store but commit nothing (``dryRun=All``)."""
        self._dry = True
        try:
            yield
        finally:
            self._dry = False

    def _commit(self, type_: str, key: Key, old: Obj | None, new: Obj) -> Obj:
        if self._dry:
            # As upstream's DryRunnableStorage: a create comes back without a resourceVersion,
            # an update with the current one, a delete as the object was.
            result = copy.deepcopy(old if type_ == "DELETED" and old is not None else new)
            if type_ == "ADDED":
                result["metadata"].pop("resourceVersion", None)
            return result
        self._rv += 1
        new = copy.deepcopy(new)
        new["metadata"]["resourceVersion"] = str(self._rv)
        slot = (new["metadata"].get("namespace", ""), new["metadata"]["name"])
        bucket = self._objects.setdefault(key, {})
        if type_ == "DELETED":
            bucket.pop(slot, None)
        else:
            bucket[slot] = new
        change = Change(self._rv, type_, key, old, new)
        self._history.append(change)
        while len(self._history) > self._history_limit:
            self._compacted_rv = self._history.popleft().rv
        for watcher in list(self.watchers):
            watcher.offer(change)
        for listener in list(self.listeners):
            listener(change)
        return copy.deepcopy(new)

    def create(self, key: Key, obj: Obj) -> Obj:
        return self._commit("ADDED", key, None, obj)

    def replace(self, key: Key, obj: Obj) -> Obj:
        meta = obj["metadata"]
        old = self._objects[key][(meta.get("namespace", ""), meta["name"])]
        return self._commit("MODIFIED", key, copy.deepcopy(old), obj)

    def delete(self, key: Key, namespace: str | None, name: str) -> Obj:
        old = self._objects[key][(namespace or "", name)]
        return self._commit("DELETED", key, copy.deepcopy(old), old)

    # history and watches -----------------------------------------------------------------
    def compact(self) -> int:
        """Drop the whole history: any watch from an older resourceVersion gets 410 Gone."""
        self._history.clear()
        self._compacted_rv = self._rv
        return self._rv

    def watch(self, key: Key, *, namespace: str | None, matches: ObjectFilter, since: int | None,
              bookmarks: bool) -> Watcher:
        """Open a watch. ``since`` None: synthetic ADDED for the current state, then changes."""
        if since is not None and since < self._compacted_rv:
            raise expired(since, self._compacted_rv)
        watcher = Watcher(key, namespace, matches, bookmarks)
        if since is None:
            for obj in self.list(key, namespace, matches):
                watcher.queue.put_nowait(("ADDED", obj))
        else:
            for change in self._history:
                if change.rv > since:
                    watcher.offer(change)
        self.watchers.add(watcher)
        return watcher

    def end_watches(self, *, error: ApiError | None = None) -> int:
        """End every open watch (optionally after an ERROR event); returns how many."""
        watchers = list(self.watchers)
        for watcher in watchers:
            if error is not None:
                watcher.queue.put_nowait(("ERROR", error.status()))
            watcher.queue.put_nowait(None)
        self.watchers.clear()
        return len(watchers)

    def bookmark(self) -> None:
        """Send a BOOKMARK with the current resourceVersion to every watch that allows them."""
        for watcher in self.watchers:
            if watcher.bookmarks:
                watcher.queue.put_nowait(("BOOKMARK", self._rv))
