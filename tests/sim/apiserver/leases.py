"""The Lease history: every committed write of a ``coordination.k8s.io`` Lease, for an oracle.

Each create, update, patch and delete of a Lease that reached the store (not a refused one,
not a dry run, not a no-op) is appended with the sim clock's monotonic reading, the request's
verb and user, and the Lease's holder, transitions, times, resourceVersion and annotations as
written, so a test can say who held which Lease when ("bucket 17 was claimed by B at x,
member A was evicted by C at y"; ``LeaseHistory.at`` answers "as it stood at x"). Writes made
outside a request (the test's own helpers) have ``user`` None and the verb their change
implies.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from .clock import Clock
from .store import Change

LEASES = ("coordination.k8s.io", "leases")
_VERB_OF_CHANGE = {"ADDED": "create", "MODIFIED": "update", "DELETED": "delete"}


@dataclass(frozen=True, slots=True)
class _Request:
    verb: str
    user: str


_REQUEST: ContextVar[_Request | None] = ContextVar("sim_lease_request", default=None)


@contextlib.contextmanager
def request(verb: str, user: str) -> Iterator[None]:
    """Writes inside the block are made by this request (its Kubernetes verb and user)."""
    token = _REQUEST.set(_Request(verb, user))
    try:
        yield
    finally:
        _REQUEST.reset(token)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseWrite:
    """One committed write of a Lease; the fields are the Lease as it was written (for a
    delete: as it was when deleted)."""

    applied: float
    """The sim clock's monotonic reading when the write reached the store (as
    ``RequestRecord.applied``)."""
    namespace: str
    name: str
    verb: str
    """create, update, patch, delete (or deletecollection) as the request's verb."""
    user: str | None
    holder: str | None
    transitions: int | None
    renew_time: str | None
    acquire_time: str | None
    duration: int | None
    resource_version: str
    annotations: dict[str, str]
    uid: str
    deleted: bool = False
    """The write removed the Lease (a delete without finalizers)."""


class LeaseHistory:
    """Appends a ``LeaseWrite`` for each Lease change the store commits (a store listener)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.writes: list[LeaseWrite] = []

    def __call__(self, change: Change) -> None:
        if change.key != LEASES:
            return
        current = _REQUEST.get()
        meta: dict[str, Any] = change.new["metadata"]
        spec: dict[str, Any] = change.new.get("spec") or {}
        self.writes.append(LeaseWrite(
            applied=self.clock.monotonic(), namespace=meta.get("namespace", ""),
            name=meta["name"], verb=current.verb if current else _VERB_OF_CHANGE[change.type],
            user=current.user if current else None, holder=spec.get("holderIdentity"),
            transitions=spec.get("leaseTransitions"), renew_time=spec.get("renewTime"),
            acquire_time=spec.get("acquireTime"), duration=spec.get("leaseDurationSeconds"),
            resource_version=meta["resourceVersion"],
            annotations=dict(meta.get("annotations") or {}), uid=meta.get("uid", ""),
            deleted=change.type == "DELETED"))

    def at(self, namespace: str, name: str, when: float) -> LeaseWrite | None:
        """The Lease as it stood at ``when`` (a monotonic reading of the sim clock): its last
        write applied at or before then, or None if it did not exist then."""
        state = None
        for write in self.writes:
            if write.applied > when:
                break
            if (write.namespace, write.name) == (namespace, name):
                state = None if write.deleted else write
        return state
