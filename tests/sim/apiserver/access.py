"""Who may do what, which requests fail on purpose, and what was asked: auth, faults, the log.

Tokens map to users; a user may be denied a (verb, resource) pair, which answers 403 as RBAC
would. Fault rules make the next N matching requests fail (and may then run an action: another
writer right after a failed write), stall, or wait until the test releases them (a request in
flight for as long as a test needs); a rule with ``user`` matches only that user's requests.
A ``Partition`` cuts one user off until healed: its requests stall, or fail fast as a reset
connection. Every request, whether it succeeded or not, is appended to the log with its
Kubernetes verb (get, list, watch, create, update, patch, delete, deletecollection) and the
sim clock's monotonic readings of when it arrived, when its effect was applied and when it
was answered, so tests can count calls and an oracle can say what landed when.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

PartitionMode = Literal["stall", "reset"]


@dataclass(slots=True, kw_only=True)
class Principal:
    user: str
    denied: set[tuple[str, str, str | None]] = field(default_factory=set)

    def allows(self, verb: str, resource: str, namespace: str | None) -> bool:
        for d_verb, d_resource, d_namespace in self.denied:
            if d_verb in ("*", verb) and d_resource in ("*", resource) and \
                    d_namespace in (None, namespace):
                return False
        return True


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRecord:
    """One request as the server saw it; ``resource`` is ``plural`` or ``plural/subresource``."""

    method: str
    path: str
    query: dict[str, str]
    verb: str
    group: str | None
    resource: str | None
    namespace: str | None
    name: str | None
    user: str | None
    status: int
    content_type: str
    accept: str
    user_agent: str = ""
    arrived: float = 0.0
    """The sim clock's monotonic reading when the request reached the handler, before any
    fault rule held or delayed it."""
    applied: float | None = None
    """When its effect was written to the store; None if nothing was (a read, a failure, a
    no-op update, a dry run)."""
    answered: float | None = None
    """When its answer was sent (a watch: when its stream started); None if it never was
    (the client hung up first, or a partition reset the connection)."""


@dataclass(slots=True, kw_only=True)
class RequestMatch:
    """Which requests a rule applies to, while it has ``remaining`` uses; None matches all."""

    remaining: int
    path_prefix: str | None = None
    verb: str | None = None
    resource: str | None = None
    user: str | None = None
    """Only the requests of this user (a token's ``Principal.user``)."""

    def matches(self, path: str, verb: str, resource: str | None, user: str | None) -> bool:
        return self.remaining > 0 and \
            (self.path_prefix is None or path.startswith(self.path_prefix)) and \
            (self.verb is None or self.verb == verb) and \
            (self.resource is None or self.resource == resource) and \
            (self.user is None or self.user == user)


@dataclass(slots=True, kw_only=True)
class FaultRule(RequestMatch):
    status: int | None = None
    retry_after: int | None = None
    """With status 429: the Retry-After the answer carries (default 1)."""
    delay: float = 0.0
    """Seconds each matching request waits before it is served (applied, then answered)."""
    then: Callable[[], object] | None = None
    """Run right after the injected failure, before it is answered (nothing was applied)."""
    held: asyncio.Event | None = None
    """Set: each matching request waits until it is set (``release``), then is served."""
    arrived: int = 0
    """How many matching requests reached the rule (for a held one: are waiting or were)."""

    def release(self) -> None:
        """Serve the held requests now (and any later match at once)."""
        if self.held is not None:
            self.held.set()


@dataclass(slots=True, kw_only=True)
class AfterRule(RequestMatch):
    """Run ``action`` right after the next ``remaining`` matching requests were answered."""

    action: Callable[[], object]
    answer_after: float = 0.0
    """Seconds the answer then waits before it is sent: applied at once, answered late."""


@dataclass(slots=True, kw_only=True)
class Partition:
    """One user cut off from the API server until ``heal()``: in mode ``stall`` each of its
    requests (and the events of its open watches) waits unserved, and is served after the
    heal if its client still waits; in mode ``reset`` each fails at once as a reset
    connection and its open watches are cut."""

    user: str
    mode: PartitionMode
    healed: asyncio.Event = field(default_factory=asyncio.Event)
    cut: int = 0
    """How many requests of the user it stalled or reset."""

    def heal(self) -> None:
        self.healed.set()

    async def cross(self, transport: asyncio.Transport | None) -> None:
        """Let one request or watch event of the user through: once healed, at once; until
        then, ``stall`` waits for the heal and ``reset`` aborts the connection and raises
        ``ConnectionResetError``."""
        if self.healed.is_set():
            return
        if self.mode == "reset":
            if transport is not None:
                transport.abort()
            raise ConnectionResetError(f"user {self.user!r} is partitioned from the API server")
        await self.healed.wait()


class RequestLog:
    def __init__(self) -> None:
        self.records: list[RequestRecord] = []

    def append(self, record: RequestRecord) -> None:
        self.records.append(record)

    def clear(self) -> None:
        self.records.clear()

    def select(self, **criteria: Any) -> list[RequestRecord]:
        """Records whose fields equal every given criterion (None criteria are ignored)."""
        wanted = {k: v for k, v in criteria.items() if v is not None}
        return [r for r in self.records if all(getattr(r, k) == v for k, v in wanted.items())]

    def count(self, **criteria: Any) -> int:
        return len(self.select(**criteria))


def access_review(principal: Principal, body: Any) -> dict[str, Any]:
    """The answer to a SelfSubjectAccessReview (``kubectl auth can-i``), from the deny rules."""
    spec = (body or {}).get("spec") or {}
    attrs = spec.get("resourceAttributes")
    allowed = True
    if isinstance(attrs, dict):
        resource = attrs.get("resource", "")
        if attrs.get("subresource"):
            resource = f"{resource}/{attrs['subresource']}"
        allowed = principal.allows(attrs.get("verb", ""), resource, attrs.get("namespace") or None)
    status: dict[str, Any] = {"allowed": allowed}
    if allowed:
        status["reason"] = "allowed by the simulated API server"
    else:
        status["denied"] = True
    return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}
