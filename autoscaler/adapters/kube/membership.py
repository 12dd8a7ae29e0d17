"""A replica's membership in a ring of dynamic sharding (issue 38; docs/design/active-active.md
§4.1 member Lease, §4.3 rules M1-M7): its own member Lease, kept alive, and its view of the
other members' Leases, from which it evicts the dead and collects the released.

One member Lease per process, ``<ring>-member-<incarnation>`` (``<hostname>-<8 hex>``, fresh
per process and per rejoin), in the ring's namespace, labelled with the ring and
``autoscaler.dev/role=member``.

- Renewal (M1) is a compare-and-swap chain: each PUT carries the resourceVersion of our own
  previous successful write, never one read just before, so no write of anyone else can slip
  in between unnoticed. Validity (M2) runs from the instant a successful renewal was *sent*
  (``ring.renewed``), on the injected monotonic clock: a late answer never stretches it, and
  each request's timeout is at most ``min(RP, LD - RD)``.
- A 409 is read again: still ours and not evicted (someone edited a label; or our own timed
  out write landed) → the chain goes on from the fresh resourceVersion; otherwise we were
  evicted. A 404 is *discontinued* (deleted by hand), which counts as evicted too (M6):
  ``evicted`` stays set until ``rejoin()`` starts a new incarnation.
- Failed renewals only suspend (M5): a later success on our own chain makes us valid again,
  with the same incarnation (an eviction would have broken the chain).
- The view (M3) is one list+watch of the ring's member Leases (the house ``Informer``,
  relisting on 410). Each peer's resourceVersion is timed from when this member first saw it
  (``ring.sighted``, at the event's arrival); the view is judged every ``RP/4``: a peer whose
  Lease stood still for ``max(LD, its leaseDurationSeconds)`` is evicted (M4) by a CAS on the
  version seen: holder emptied, ``leaseTransitions`` + 1, ``autoscaler.dev/evicted-by``; at
  most one attempt per peer per ``RP``, and only while we are valid ourselves. A stale view
  only costs a refused write (409).
- Released Leases (holder "") older than ``gc_grace`` on our clock are deleted with a
  resourceVersion precondition (M7).
- ``stop()`` is a graceful leave: the holder emptied by a CAS on our chain, so peers need not
  wait a lease duration.

``valid()``, ``members()``, ``evicted_members()``, ``holder_view()`` (what a bucket claim
needs of a holder, design §4.4 rule C), ``renewal_age()`` and ``counters`` are synchronous
plain-attribute reads, safe from another thread: ``MembershipThread`` runs the loop in a
thread of its own with its own event loop and API client, so a stalled main loop does not
look like death to the peers.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import structlog
from kubernetes_asyncio.client import ApiClient, CoordinationV1Api

from autoscaler.adapters.kube.api_errors import api_errors
from autoscaler.adapters.kube.informer import (
    Backoff,
    Informer,
    ListCall,
    RawObject,
    WatchCounters,
    WatchOptions,
)
from autoscaler.adapters.kube.leader import micro_time
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.config import KubernetesSettings
from autoscaler.errors import AutoscalerError, ConflictError, InvalidConfigError, NotFoundError
from autoscaler.runtime import ring
from autoscaler.runtime.ring import Sighting, Timings

log = structlog.get_logger("autoscaler.membership")

MANAGED_BY = "app.kubernetes.io/managed-by"
RING_LABEL = "autoscaler.dev/ring"
ROLE_LABEL = "autoscaler.dev/role"
READY_ANNOTATION = "autoscaler.dev/ready"
EVICTED_BY_ANNOTATION = "autoscaler.dev/evicted-by"
WALL_OFFSET_ANNOTATION = "autoscaler.dev/wall-offset-ms"
"""Our wall clock minus the API server's (design §4.1, §4.7), for humans and peers; never
read for a membership decision (those use our monotonic clock only)."""
GC_GRACE = 60.0
"""Seconds a member Lease stays released (holder "") before any valid member deletes it."""


def new_incarnation() -> str:
    """``<hostname>-<8 hex>``, lower-cased: a Lease name must be a DNS subdomain."""
    return f"{socket.gethostname().lower()}-{uuid.uuid4().hex[:8]}"


def member_prefix(ring_name: str) -> str:
    return f"{ring_name}-member-"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberConfig:
    namespace: str
    ring: str
    """The ring's name: ``daemon.leaderElection.leaseName``."""
    timings: Timings = field(default_factory=Timings)
    gc_grace: float = GC_GRACE

    @property
    def request_timeout(self) -> float:
        """M1: a renewal's answer after ``LD - RD`` could no longer keep us safe."""
        t = self.timings
        return min(t.retry_period, t.lease_duration - t.renew_deadline)

    def check(self) -> None:
        """Refuse timings that cannot fence (``Timings.problem``), as a config error."""
        problem = self.timings.problem()
        if problem is not None:
            raise InvalidConfigError(f"ring {self.ring}: {problem}")


RENEWAL_RESULTS = ("ok", "conflict", "error", "timeout")
WRITE_KINDS = ("join", "renew", "evict", "leave", "delete")


@dataclass(slots=True)
class MembershipCounters:
    """Since this member started (mutable: these are counters), for the daemon's metrics
    (design §8); plain ints, readable from another thread."""

    renewals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RENEWAL_RESULTS, 0))
    """Attempts to write our Lease (a join included), by result."""
    writes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(WRITE_KINDS, 0))
    """Successful Lease writes by kind (steady state: one ``renew`` per RP)."""


@dataclass(frozen=True, slots=True)
class Peer:
    """One member Lease as last seen."""

    incarnation: str
    holder: str
    duration: float | None
    ready: bool
    evicted_by: str | None
    sighting: Sighting
    lease: RawObject
    """The Lease as seen (an eviction writes it back, changed)."""

    @property
    def resource_version(self) -> str:
        return self.sighting.resource_version


class MemberView:
    """M3: the ring's member Leases (a watch ``Sink``), each timed from when this member first
    saw its resourceVersion. ``peers`` is replaced whole on every change, never mutated, so
    another thread may read it."""

    def __init__(self, prefix: str, monotonic: Callable[[], float], *, memory: float,
                 exact: bool = False) -> None:
        """Keeps the Leases whose name starts with ``prefix`` (``Peer.incarnation`` is the
        rest), or with ``exact`` the one named ``prefix``: the watch's selectors narrow what
        the server sends, this decides."""
        self._prefix, self._monotonic, self._memory = prefix, monotonic, memory
        self._exact = exact
        self.peers: Mapping[str, Peer] = {}
        self.synced_at: float | None = None
        """When the first LIST completed: a Lease never seen has been absent since then."""
        self._gone: Mapping[str, float] = {}
        """Name → when its Lease was seen to vanish; kept ``memory`` seconds (after that,
        ``synced_at`` gives the same answer to "absent for a lease duration?")."""

    def absent_since(self, name: str) -> float | None:
        """Since when (our clock) the Lease ``name`` has been missing from the view; None
        while it is there, or before the view first synced (we know nothing yet)."""
        if name in self.peers or self.synced_at is None:
            return None
        return self._gone.get(name, self.synced_at)

    def convert(self, obj: RawObject) -> RawObject | None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        mine = name == self._prefix if self._exact else name.startswith(self._prefix)
        return obj if mine else None

    def replace(self, converted: list[RawObject]) -> None:
        now, old = self._monotonic(), self.peers
        peers = {}
        for raw in converted:
            name = raw["metadata"]["name"]
            peers[name] = self._peer(raw, old.get(name), now)
        self._forget(old.keys() - peers.keys(), now)
        self.peers = peers
        if self.synced_at is None:
            self.synced_at = now

    def upsert(self, obj: RawObject) -> None:
        if self.convert(obj) is not None:
            name = obj["metadata"]["name"]
            self.peers = {**self.peers,
                          name: self._peer(obj, self.peers.get(name), self._monotonic())}

    def delete(self, obj: RawObject) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if name in self.peers:
            self._forget({name}, self._monotonic())
            self.peers = {key: peer for key, peer in self.peers.items() if key != name}

    def _forget(self, names: Iterable[str], now: float) -> None:
        """Note when these Leases vanished; drop notes older than ``memory``."""
        gone = {name: at for name, at in self._gone.items() if now - at < self._memory}
        self._gone = gone | dict.fromkeys(names, now)

    def _peer(self, raw: RawObject, previous: Peer | None, now: float) -> Peer:
        metadata, spec = raw["metadata"], raw.get("spec") or {}
        annotations = metadata.get("annotations") or {}
        version = str(metadata.get("resourceVersion") or "")
        return Peer(incarnation=metadata["name"][len(self._prefix):],
                    holder=str(spec.get("holderIdentity") or ""),
                    duration=spec.get("leaseDurationSeconds"),
                    ready=annotations.get(READY_ANNOTATION) == "true",
                    evicted_by=annotations.get(EVICTED_BY_ANNOTATION),
                    sighting=ring.sighted(previous.sighting if previous else None, version, now),
                    lease=raw)


class Membership:
    def __init__(self, api_client: ApiClient, config: MemberConfig, *,
                 incarnation: str | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 wall_offset: Callable[[], float | None] = lambda: None) -> None:
        """``wall_offset``: seconds our wall clock is ahead of the API server's, when known
        (the daemon's ``Timeline.skew``), carried by each renewal."""
        config.check()
        self._api = CoordinationV1Api(api_client)
        self._wall_offset = wall_offset
        self.config = config
        self._monotonic = monotonic
        self._now = wall_clock
        self.incarnation = incarnation or new_incarnation()
        self._last_ok_send: float | None = None
        self._written: str | None = None
        """The resourceVersion of our last successful write of our Lease (the CAS chain)."""
        self._meta: dict[str, Any] = {}
        """Labels and annotations our Lease carries (someone else's edits kept)."""
        self._acquired = ""
        self._transitions = 0
        self.evicted = False
        self.evicted_by: str | None = None
        """Who evicted us; "" when our Lease was deleted (discontinued)."""
        self.ready = False
        self._rejoin_for: str | None = None
        """The incarnation a rejoin was asked for: honoured by the loop only while it is
        still ours (a request made twice for one eviction starts over once)."""
        self._join_refused = False
        self._reported_valid = False
        self._announced = False
        """Whether "joined" was said for this incarnation (its first valid moment)."""
        self._view = MemberView(member_prefix(config.ring), monotonic,
                                memory=config.timings.lease_duration)
        self._single = MemberView(config.ring, monotonic, memory=config.timings.lease_duration,
                                  exact=True)
        """The single-leader Lease of our name, watched by name (leader mode's leaseName)."""
        self._attempted: dict[str, float] = {}
        self._released_since: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None
        self.counters = MembershipCounters()

    @property
    def name(self) -> str:
        return member_prefix(self.config.ring) + self.incarnation

    # --- what other threads read -----------------------------------------------------------
    def valid(self) -> bool:
        """M2: not evicted and the last successful renewal was *sent* less than RD ago."""
        return ring.valid(now=self._monotonic(), last_ok_send=self._last_ok_send,
                          evicted=self.evicted, renew_deadline=self.config.timings.renew_deadline)

    def renewal_age(self) -> float | None:
        """Seconds since our last successful renewal was sent (valid while < RD); None
        before the first, and after a leave or a rejoin."""
        last = self._last_ok_send
        return None if last is None else self._monotonic() - last

    def members(self) -> dict[str, bool]:
        """Live members (incarnation → ready) in our view, ourselves included while valid."""
        now, me = self._monotonic(), self.name
        live = {peer.incarnation: peer.ready for name, peer in self._view.peers.items()
                if name != me and peer.holder and not self._expired(peer, now)}
        if self.valid():
            live[self.incarnation] = self.ready
        return live

    def evicted_members(self) -> set[str]:
        """Members whose Lease a peer evicted (holder "" with ``evicted-by``): their buckets
        are free to claim (design §4.4 rule C)."""
        return {p.incarnation for name, p in self._view.peers.items()
                if name != self.name and not p.holder and p.evicted_by is not None}

    @property
    def view_synced_at(self) -> float | None:
        """When our view of the ring was first listed (our clock); None before: until then
        we know nothing of the others."""
        return self._view.synced_at

    def holder_view(self, incarnation: str) -> ring.HolderView:
        """What a bucket claim needs to know of the member holding the bucket (design §4.4
        rule C, ``ring.claimable``): evicted by a peer (CAS, with evicted-by), or since when
        its Lease has been absent from our view. A Lease emptied without evicted-by (a
        graceful leave; a hand edit) counts as absent from when we saw it emptied, so it is
        claimable a lease duration later, never at once: a hand edit is not proof that the
        holder stopped trusting itself."""
        if incarnation == self.incarnation:
            return ring.HolderView(evicted=self.evicted)
        name = member_prefix(self.config.ring) + incarnation
        peer = self._view.peers.get(name)
        if peer is None:
            return ring.HolderView(absent_since=self._view.absent_since(name))
        if peer.holder:
            return ring.HolderView()
        if peer.evicted_by is not None:
            return ring.HolderView(evicted=True)
        return ring.HolderView(absent_since=peer.sighting.first_seen)

    def single_leader(self) -> str | None:
        """Who holds the single-leader Lease of the ring's name (leader mode's leaseName) while
        it is held and renewed: a leader-mode replica still acting, as in a rolling update
        from leader mode to this one (design §4.6). None once it is released, missing, or has
        stood unchanged past its own duration by our clock (the longer of its and ours), as a
        candidate of leader mode would judge it; ``SINGLE_LEADER_NOT_READ`` before its first
        LIST."""
        if self._single.synced_at is None:
            return ring.SINGLE_LEADER_NOT_READ
        peer = self._single.peers.get(self.config.ring)
        if peer is None or not peer.holder or self._expired(peer, self._monotonic()):
            return None
        return peer.holder

    def _expired(self, peer: Peer, now: float) -> bool:
        return ring.expired(peer.sighting, now=now,
                            lease_duration=self.config.timings.lease_duration,
                            their_duration=peer.duration)

    def rejoin(self, incarnation: str) -> None:
        """After the eviction of ``incarnation``: start over as a new incarnation (a new
        Lease), from the loop; nothing if we already have since (another thread asks: it
        may have read ``evicted`` just before the loop started over)."""
        self._rejoin_for = incarnation

    # --- the loop ------------------------------------------------------------------------------
    async def run(self) -> None:
        """Join (or go on with our chain), renew, observe, evict, collect; until cancelled or
        stopped. Never raises for an API fault (each is retried)."""
        self._task = asyncio.current_task()
        informers = (self._informer(), self._single_informer())
        for informer in informers:
            informer.start()
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._renewing())
                group.create_task(self._judging())
        finally:
            for informer in informers:
                await informer.stop()

    async def stop(self) -> None:
        """Leave gracefully: stop the loop, then empty our holder by a CAS on our chain."""
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.wait({task})
        was_valid, self._last_ok_send = self.valid(), None
        if self._written is None or self.evicted:
            return
        for _ in range(2):  # a 409 of a hand edit: once more from the fresh version
            try:
                self._written = await self._put(holder="", annotations={})
                self.counters.writes["leave"] += 1
                log.info("ring member left", member=self.incarnation, ring=self.config.ring,
                         was_valid=was_valid)
                return
            except ConflictError:
                if not await self._still_ours():
                    return
            except AutoscalerError as error:
                log.warning("ring member could not leave", member=self.incarnation,
                            error=str(error))
                return

    async def _renewing(self) -> None:
        timings = self.config.timings
        while True:
            if self._rejoin_for == self.incarnation:
                self._start_over()
            if self.evicted:
                await asyncio.sleep(timings.retry_period / 4)
                continue
            self._report()  # a lapse since the last attempt
            send = self._monotonic()
            ok = await self._renew_once(send)
            self._report()
            if ok:
                await asyncio.sleep(max(0.0, send + timings.retry_period - self._monotonic()))
            else:
                await asyncio.sleep(timings.retry_period / 4)

    async def _renew_once(self, send: float) -> bool:
        """One step of the chain: True once a write of ours succeeded (sent at ``send``)."""
        renewals, kind = self.counters.renewals, "join" if self._written is None else "renew"
        try:
            if self._written is None:
                self._written = await self._create()
            else:
                self._written = await self._put(holder=self.incarnation,
                                                annotations=self._renewal_annotations())
        except ConflictError:  # someone wrote since our last write: ours still?
            renewals["conflict"] += 1
            await self._still_ours()
            return False
        except NotFoundError as error:
            renewals["error"] += 1
            if self._written is not None:
                self._lost("")  # our Lease is gone: deleted by hand
            elif not self._join_refused:  # a create refused: the namespace is missing
                self._join_refused = True
                log.warning("ring member cannot join yet", member=self.incarnation,
                            error=str(error))
            return False
        except Exception as error:  # a fault never stops the renewals
            renewals["timeout" if isinstance(error.__cause__, TimeoutError) else "error"] += 1
            log.debug("ring member renewal failed", member=self.incarnation, error=str(error))
            return False
        self._report()  # a lapse while this renewal was in flight: said before it is mended
        self._last_ok_send = ring.renewed(self._last_ok_send, send)
        renewals["ok"] += 1
        self.counters.writes[kind] += 1
        return True

    async def _still_ours(self) -> bool:
        """After a 409: read our Lease; go on from its version if no one evicted us."""
        try:
            with api_errors(f"read Lease {self.config.namespace}/{self.name}"):
                lease = await self._api.read_namespaced_lease(
                    self.name, self.config.namespace, _request_timeout=self.config.request_timeout)
        except NotFoundError:
            self._lost("")
            return False
        except AutoscalerError:
            return False  # unknown yet: the next renewal asks again
        annotations = dict(lease.metadata.annotations or {})
        if (lease.spec.holder_identity or "") == self.incarnation \
                and EVICTED_BY_ANNOTATION not in annotations:
            self._written = lease.metadata.resource_version  # maybe our create's, unanswered
            self._meta = {"labels": dict(lease.metadata.labels or {}), "annotations": annotations}
            if lease.spec.acquire_time is not None:
                self._acquired = micro_time(lease.spec.acquire_time)
            self._transitions = lease.spec.lease_transitions or 0
            return True
        self._lost(annotations.get(EVICTED_BY_ANNOTATION, lease.spec.holder_identity or "?"))
        return False

    def _lost(self, by: str) -> None:
        if self.evicted:
            return
        self.evicted, self.evicted_by = True, by
        if by:
            log.warning("ring member evicted", member=self.incarnation, evicted_by=by)
        else:
            log.warning("ring member discontinued: its Lease was deleted",
                        member=self.incarnation, lease=self.name)

    def _start_over(self) -> None:
        # The new incarnation is set last: another thread that reads it, then ``evicted``,
        # finds the eviction already cleared, so it never asks a rejoin in the new one's name.
        self._written, self._last_ok_send, self._meta, self._transitions = None, None, {}, 0
        self._reported_valid = self._announced = self._join_refused = False
        self._rejoin_for, self.evicted, self.evicted_by = None, False, None
        old, self.incarnation = self.incarnation, new_incarnation()
        log.info("ring member rejoins as a new incarnation", member=self.incarnation,
                 previous=old)

    def _renewal_annotations(self) -> dict[str, str]:
        annotations = {READY_ANNOTATION: "true" if self.ready else "false"}
        offset = self._wall_offset()
        if offset is not None:
            annotations[WALL_OFFSET_ANNOTATION] = str(round(offset * 1000))
        return annotations

    def _report(self) -> None:
        """One log line per change of validity (not per renewal)."""
        now = self.valid()
        if now == self._reported_valid:
            return
        self._reported_valid = now
        if self.evicted:
            return  # said by _lost
        if now and not self._announced:
            self._announced = True
            log.info("ring member joined", member=self.incarnation, ring=self.config.ring,
                     lease=self.name)
        else:
            log.info("ring member resumed" if now else "ring member suspended",
                     member=self.incarnation)

    # --- writes of our own Lease ------------------------------------------------------------
    def _labels(self) -> dict[str, str]:
        return {MANAGED_BY: "autoscaler", RING_LABEL: self.config.ring, ROLE_LABEL: "member"}

    async def _create(self) -> str:
        now = micro_time(self._now())
        self._acquired = now
        self._meta = {"labels": self._labels(), "annotations": {READY_ANNOTATION: "false"}}
        body = self._body(None, holder=self.incarnation, renew=now, transitions=0)
        with api_errors(f"create Lease {self.config.namespace}/{self.name}"):
            written = await self._api.create_namespaced_lease(
                self.config.namespace, cast(Any, body),
                _request_timeout=self.config.request_timeout)
        return str(written.metadata.resource_version)

    async def _put(self, *, holder: str, annotations: dict[str, str]) -> str:
        self._meta.setdefault("annotations", {}).update(annotations)
        body = self._body(self._written, holder=holder, renew=micro_time(self._now()),
                          transitions=self._transitions)
        with api_errors(f"renew Lease {self.config.namespace}/{self.name}"):
            written = await self._api.replace_namespaced_lease(
                self.name, self.config.namespace, cast(Any, body),
                _request_timeout=self.config.request_timeout)
        return str(written.metadata.resource_version)

    def _body(self, resource_version: str | None, *, holder: str, renew: str,
              transitions: int) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "name": self.name, "namespace": self.config.namespace,
            "labels": {**self._meta.get("labels", {}), **self._labels()},
            "annotations": dict(self._meta.get("annotations", {}))}
        if resource_version:
            metadata["resourceVersion"] = resource_version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
                "spec": {"holderIdentity": holder,
                         "leaseDurationSeconds": math.ceil(self.config.timings.lease_duration),
                         "acquireTime": self._acquired or renew, "renewTime": renew,
                         "leaseTransitions": transitions}}

    # --- the view of the others -------------------------------------------------------------
    def _informer(self) -> Informer:
        selector = f"{RING_LABEL}={self.config.ring},{ROLE_LABEL}=member"
        return self._lease_informer(self._view, functools.partial(
            self._api.list_namespaced_lease, label_selector=selector))

    def _single_informer(self) -> Informer:
        return self._lease_informer(self._single, functools.partial(
            self._api.list_namespaced_lease, field_selector=f"metadata.name={self.config.ring}"))

    def _lease_informer(self, sink: MemberView, list_call: ListCall) -> Informer:
        cfg, timings = self.config, self.config.timings
        return Informer(
            resource="leases", namespace=cfg.namespace, list_call=list_call,
            sink=sink, counters=WatchCounters(),
            options=WatchOptions(backoff=Backoff(initial=timings.retry_period / 2,
                                                 maximum=timings.lease_duration)))

    async def _judging(self) -> None:
        """Judge the view every RP/4: expiry is a matter of time, not of events."""
        while True:
            now = self._monotonic()
            for name, peer in self._view.peers.items():
                if name != self.name:
                    try:
                        await self._judge(name, peer, now)
                    except Exception as error:  # a fault never stops the judging
                        log.debug("ring peer not judged", peer=name, error=str(error))
            for seen in (self._released_since, self._attempted):
                for gone in seen.keys() - self._view.peers.keys():
                    del seen[gone]
            await asyncio.sleep(self.config.timings.retry_period / 4)

    async def _judge(self, name: str, peer: Peer, now: float) -> None:
        """Evict a peer that stood still too long (M4); collect one released long ago (M7)."""
        timings = self.config.timings
        if peer.holder:
            self._released_since.pop(name, None)
            if self._expired(peer, now) and self.valid() \
                    and now - self._attempted.get(name, -math.inf) >= timings.retry_period:
                self._attempted[name] = now
                await self._evict(name, peer)
            return
        since = self._released_since.setdefault(name, now)
        if now - since >= self.config.gc_grace and self.valid():
            await self._collect(name, peer)

    async def _evict(self, name: str, peer: Peer) -> None:
        """M4: a CAS on the version we saw stand still; 409 means renewed, or evicted by
        another observer first (the view will say which)."""
        cfg, raw = self.config, peer.lease
        metadata = {key: value for key, value in raw["metadata"].items()
                    if key not in ("managedFields",)}
        metadata["annotations"] = {**(metadata.get("annotations") or {}),
                                   EVICTED_BY_ANNOTATION: self.incarnation}
        spec = dict(raw.get("spec") or {})
        spec.update(holderIdentity="", renewTime=micro_time(self._now()),
                    leaseTransitions=int(spec.get("leaseTransitions") or 0) + 1)
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": metadata, "spec": spec}
        try:
            with api_errors(f"evict Lease {cfg.namespace}/{name}"):
                await self._api.replace_namespaced_lease(
                    name, cfg.namespace, cast(Any, body), _request_timeout=cfg.request_timeout)
        except (ConflictError, NotFoundError):
            return
        except AutoscalerError as error:
            log.debug("ring eviction failed", peer=peer.incarnation, error=str(error))
            return
        self.counters.writes["evict"] += 1
        log.warning("ring member evicted a peer", member=self.incarnation,
                    peer=peer.incarnation,
                    stood_for=round(self._monotonic() - peer.sighting.first_seen, 3))

    async def _collect(self, name: str, peer: Peer) -> None:
        cfg = self.config
        options = {"preconditions": {"resourceVersion": peer.resource_version}}
        try:
            with api_errors(f"delete Lease {cfg.namespace}/{name}"):
                await self._api.delete_namespaced_lease(
                    name, cfg.namespace, body=cast(Any, options),
                    _request_timeout=cfg.request_timeout)
        except AutoscalerError:
            return  # written since, gone already, or unanswered: looked at again next time
        self._released_since.pop(name, None)
        self.counters.writes["delete"] += 1
        log.info("ring member collected a released Lease", member=self.incarnation, lease=name)


ClientFactory = Callable[[], AbstractAsyncContextManager[ApiClient]]
"""Opens an ``ApiClient`` inside the running loop (the membership thread's own)."""


def client_factory(settings: KubernetesSettings) -> ClientFactory:
    """A client built as the daemon builds its own (``KubeSession.connect``)."""
    @asynccontextmanager
    async def connect() -> AsyncIterator[ApiClient]:
        async with KubeSession.connect(settings) as session:
            yield session.api_client
    return connect


class MembershipThread:
    """Runs a ``Membership`` in a dedicated thread with its own event loop and API client:
    a main loop stalled by a long pass must not stop the renewals (design §4.3)."""

    def __init__(self, factory: ClientFactory, config: MemberConfig, *,
                 monotonic: Callable[[], float] = time.monotonic,
                 wall_offset: Callable[[], float | None] = lambda: None) -> None:
        config.check()
        self._factory, self.config, self._monotonic = factory, config, monotonic
        self._wall_offset = wall_offset
        self.membership: Membership | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._started = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="ring-membership", daemon=True)

    def start(self, timeout: float = 10.0) -> Membership:
        """Start the thread; returns once its client and membership exist."""
        self._thread.start()
        if not self._started.wait(timeout) or self.membership is None:
            if isinstance(self._failure, AutoscalerError):
                raise self._failure  # e.g. the kubeconfig: its own one-line message
            raise RuntimeError(f"ring membership did not start: {self._failure!r}")
        return self.membership

    def valid(self) -> bool:
        return self.membership is not None and self.membership.valid()

    def failure(self) -> str | None:
        """Why the membership thread ended, if it did while it should run (the daemon's
        liveness probe says it: a member that never renews again is never valid)."""
        if self._thread.is_alive() or self._stopping is None or self._stopping.is_set():
            return None
        return f"ring membership thread ended: {self._failure!r}"

    def stop(self, timeout: float = 5.0) -> None:
        """Leave gracefully (holder emptied), then end the thread; bounded by ``timeout``."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop has ended already
                loop.call_soon_threadsafe(stopping.set)
        if self._thread.ident is not None:  # started
            self._thread.join(timeout)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as error:  # reported to start(); the thread just ends
            self._failure = error
            self._started.set()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        async with self._factory() as client:
            membership = Membership(client, self.config, monotonic=self._monotonic,
                                    wall_offset=self._wall_offset)
            self.membership = membership
            self._loop = asyncio.get_running_loop()
            self._started.set()
            asyncio.create_task(membership.run())  # noqa: RUF006  # stop() cancels it
            await self._stopping.wait()
            await asyncio.wait_for(membership.stop(), self.config.timings.lease_duration)
