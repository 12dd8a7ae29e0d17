"""The object store: one global resourceVersion counter, a bounded change history, watch fan-out.

Objects are plain JSON dicts kept by storage key ``(group, plural)``, namespace and name.
Every write takes the next resourceVersion (a decimal string, as etcd's revision) and is
appended to the history; watches replay the history from their resourceVersion and then follow
live changes. A resourceVersion older than the retained window is ``Expired`` (410), which
tests force with ``compact()``. All methods are synchronous, so a read-check-write in one
request handler is atomic on the event loop, like an etcd transaction.

Scale: objects are bucketed by namespace (a namespaced LIST touches only its namespace) and
indexed by uid and by owner uid (controllers find their children without a scan); each
storage key keeps its slots sorted as etcd's key order (kept up to date by creates and
deletes), so a page of a cluster-wide LIST starts by bisection instead of sorting the whole
kind (at 250,000 pods in pages of 500, each page sorted them all: minutes of the server's
only thread per LIST). A stored
object is never mutated in place: every write stores a fresh copy, so the history, watch
events and the controllers' read-only views (``peek``, ``scan``, ``children``) share it
instead of copying it; only what leaves the store to a caller that may mutate it (``get``,
``list``, write results) is copied.
"""

from __future__ import annotations

import asyncio
import bisect
import builtins
import contextlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from .errors import ApiError, expired

Key = tuple[str, str]
Obj = dict[str, Any]
ObjectFilter = Callable[[Obj], bool]
Slot = tuple[Key, str, str]  # storage key, namespace ("" if cluster-scoped), name
Place = tuple[str, str]  # namespace ("" if cluster-scoped), name: where etcd's key order puts it


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON document (dicts, lists, scalars): several times faster than
    copy.deepcopy, which the write path would otherwise spend most of its time in."""
    if isinstance(value, dict):
        return {k: json_copy(v) if isinstance(v, (dict, list)) else v for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) if isinstance(v, (dict, list)) else v for v in value]
    return value


def copy_obj(obj: Obj) -> Obj:
    return cast(Obj, json_copy(obj))


def _owner_uids(obj: Obj) -> set[str]:
    return {r["uid"] for r in obj["metadata"].get("ownerReferences") or []
            if isinstance(r, dict) and isinstance(r.get("uid"), str)}


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
            # The stored object is never mutated, so every watcher can share it.
            self.queue.put_nowait((event, change.new))


class Store:
    def __init__(self, *, history_limit: int = 10_000, first_rv: int = 1000) -> None:
        self._objects: dict[Key, dict[str, dict[str, Obj]]] = {}
        self._order: dict[Key, builtins.list[Place]] = {}
        """Every stored object's place, sorted, per storage key."""
        self._by_uid: dict[str, Slot] = {}
        self._by_owner: dict[str, set[Slot]] = {}
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

    # reads (copies: the caller may mutate them) ------------------------------------------
    def get(self, key: Key, namespace: str | None, name: str) -> Obj | None:
        obj = self.peek(key, namespace, name)
        return copy_obj(obj) if obj is not None else None

    def list(self, key: Key, namespace: str | None = None,
             matches: ObjectFilter | None = None) -> list[Obj]:
        """Objects sorted by namespace and name, as etcd's key order gives them."""
        return [copy_obj(o) for o in self.scan(key, namespace)
                if matches is None or matches(o)]

    # reads for the simulated controllers (shared, read-only) -----------------------------
    def peek(self, key: Key, namespace: str | None, name: str) -> Obj | None:
        """The stored object itself: never mutate it (write a copy back instead)."""
        return self._objects.get(key, {}).get(namespace or "", {}).get(name)

    def scan(self, key: Key, namespace: str | None = None) -> builtins.list[Obj]:
        """Stored objects (read-only) in namespace and name order."""
        buckets = self._objects.get(key, {})
        return [buckets[ns][n] for ns, n in self.places(key, namespace)]

    def places(self, key: Key, namespace: str | None = None) -> builtins.list[Place]:
        """Where the stored objects are, in namespace and name order (read-only, and valid
        until the next write: a page of a LIST bisects it for its start)."""
        if namespace is None:
            return self._order.get(key, [])
        return [(namespace, n) for n in sorted(self._objects.get(key, {}).get(namespace, {}))]

    def locate(self, uid: str) -> Slot | None:
        """Where the object with this uid is stored, if it exists."""
        return self._by_uid.get(uid)

    def children(self, uid: str, key: Key) -> builtins.list[Obj]:
        """Stored objects of ``key`` with an ownerReference to ``uid`` (read-only), by name."""
        slots = sorted(s for s in self._by_owner.get(uid, ()) if s[0] == key)
        return [o for s in slots if (o := self.peek(*s)) is not None]

    def count(self, key: Key, namespace: str | None = None) -> int:
        buckets = self._objects.get(key, {})
        if namespace is not None:
            return len(buckets.get(namespace, {}))
        return sum(len(b) for b in buckets.values())

    # writes ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def dry_run(self) -> Iterator[None]:
        """Writes inside answer what they would store but commit nothing (``dryRun=All``)."""
        self._dry = True
        try:
            yield
        finally:
            self._dry = False

    def _index(self, slot: Slot, old: Obj | None, new: Obj | None) -> None:
        before = _owner_uids(old) if old is not None else set()
        after = _owner_uids(new) if new is not None else set()
        for uid in before - after:
            owned = self._by_owner.get(uid)
            if owned is not None:
                owned.discard(slot)
                if not owned:
                    del self._by_owner[uid]
        for uid in after - before:
            self._by_owner.setdefault(uid, set()).add(slot)
        if old is not None and new is None:
            self._by_uid.pop(old["metadata"].get("uid", ""), None)
        if new is not None and isinstance(uid := new["metadata"].get("uid"), str):
            self._by_uid[uid] = slot

    def _commit(self, type_: str, key: Key, old: Obj | None, new: Obj, *,
                adopt: bool = False) -> Obj:
        """Store a copy of ``new`` (``adopt``: ``new`` itself, with its own metadata dict);
        returns the stored object (callers copy it if it leaves)."""
        if self._dry:
            # As upstream's DryRunnableStorage: a create comes back without a resourceVersion,
            # an update with the current one, a delete as the object was.
            result = copy_obj(old if type_ == "DELETED" and old is not None else new)
            if type_ == "ADDED":
                result["metadata"].pop("resourceVersion", None)
            return result
        self._rv += 1
        new = {**new, "metadata": {**new["metadata"]}} if adopt else copy_obj(new)
        new["metadata"]["resourceVersion"] = str(self._rv)
        namespace, name = new["metadata"].get("namespace", ""), new["metadata"]["name"]
        buckets = self._objects.setdefault(key, {})
        order = self._order.setdefault(key, [])
        if type_ == "DELETED":
            bucket = buckets.get(namespace, {})
            if bucket.pop(name, None) is not None:
                del order[bisect.bisect_left(order, (namespace, name))]
            if not bucket:
                buckets.pop(namespace, None)
            self._index((key, namespace, name), old, None)
        else:
            bucket = buckets.setdefault(namespace, {})
            if name not in bucket:
                bisect.insort(order, (namespace, name))
            bucket[name] = new
            self._index((key, namespace, name), old, new)
        change = Change(self._rv, type_, key, old, new)
        self._history.append(change)
        while len(self._history) > self._history_limit:
            self._compacted_rv = self._history.popleft().rv
        for watcher in list(self.watchers):
            watcher.offer(change)
        for listener in list(self.listeners):
            listener(change)
        return new

    # ``echo=False``: the caller ignores the result, so it is not copied. ``adopt=True``: the
    # caller hands ``obj`` over and never mutates it or its parts again; parts it shares with
    # a stored object are fine, as stored objects are never mutated. Both save the copies
    # that dominate the cost of a write (the controllers and the REST layer use them).
    def create(self, key: Key, obj: Obj, *, echo: bool = True, adopt: bool = False) -> Obj:
        stored = self._commit("ADDED", key, None, obj, adopt=adopt)
        return copy_obj(stored) if echo else stored

    def replace(self, key: Key, obj: Obj, *, echo: bool = True, adopt: bool = False) -> Obj:
        meta = obj["metadata"]
        old = self._objects[key][meta.get("namespace", "")][meta["name"]]
        stored = self._commit("MODIFIED", key, old, obj, adopt=adopt)
        return copy_obj(stored) if echo else stored

    def delete(self, key: Key, namespace: str | None, name: str, *, echo: bool = True) -> Obj:
        old = self._objects[key][namespace or ""][name]
        stored = self._commit("DELETED", key, old, old, adopt=True)
        return copy_obj(stored) if echo else stored

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
            for obj in self.scan(key, namespace):
                if matches(obj):
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
