"""This replica as a member of a ring of dynamic sharding (issue 38;
docs/design/active-active.md §4.4-4.6): which buckets of targets it holds, claiming and
handing them over as ``ring_plan`` says, each with its own history, and the fences every
write of its targets passes.

A bucket is held in an *epoch*: the claim is a CAS on the bucket's Lease that names us with
the next epoch (``BucketLeasesPort.claim``), then the bucket's state object is stamped with
(us, epoch) and read (``BucketStatePort.stamp``, then ``HistoryKeeper.restore``), and only
then may its targets run (``may_run``): a new owner decides nothing before it holds the
history its predecessor wrote, so a move is never a fresh start. Its targets then run at once
(``Scheduler.run_now``) rather than at their group's next start.

**The fence** (``may_write``, right before every ``/scale`` PUT; the bucket store's, right
before every state write): our member Lease valid by our own monotonic clock (its last
successful renewal sent less than the renew deadline ago), the bucket Lease in our view still
(us, epoch), and the claim still ours. A member paused past its lease wakes up invalid and
writes nothing; by the time a peer can evict it and claim its buckets, it has stopped
trusting itself (M4's argument, ``ring.Timings.rate_tolerance``); a write of its still in
flight carries a state version older than the new owner's stamp and is refused.

**Losing a bucket** (the bucket Lease names another epoch, or we were evicted): its keeper is
invalidated and its targets stop at once; nothing is written for them. **Handing one over**
(rebalancing, or a graceful stop): no new pass includes its targets, the passes in flight
end, its history is written clean, then the Lease is released naming the member it goes to,
who claims it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from autoscaler.errors import FencedError, RejectedError, StateSetAsideError
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime import ring
from autoscaler.runtime.history import HistoryKeeper
from autoscaler.runtime.ports import (
    BucketLeasesPort,
    BucketStatePort,
    ObservedBucketLease,
    RingMembershipPort,
)
from autoscaler.runtime.ring_plan import FORMATION_WAIT, Plan, RingPlanner, RingView
from autoscaler.runtime.workers import WorkerPool

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig

log = structlog.get_logger("autoscaler.ring")

HAND_OVER_DRAIN = 10.0
"""Seconds a hand-over waits for the passes in flight over the bucket's targets."""
STOP_HAND_OVER = 5.0
"""Seconds a graceful stop gives the hand-over of every bucket (all at once)."""
EARLIER_PASSES_WAIT = 60.0
"""Seconds a claim waits for passes of an earlier claim of ours over its targets to end (the
bucket lost and claimed again while a pass's metrics fetch was slow): the history is read the
moment they end, never under them; past this the claim fails (tried again, backing off)."""
RESTORE_BOUND = 30.0
"""Seconds a claim may take to read its bucket's history before it is given up (and tried
again, backing off): a read that keeps failing must not hold the bucket forever."""
CACHE_WAIT = 10.0
"""Seconds a gained bucket waits for its namespaces' caches before it is served (they are
warm unless it was no one's standby, or the ring runs without one); past it its targets are
decided once the caches have synced (a target whose pods are not cached is not decided,
never scaled)."""
WARM_SETTLE = 10.0
"""Seconds, at least, the wanted caches and the ring must stay the same before the standby
grows (before the caches narrow, the wanted caches only: narrowing relists nothing).
Growing relists the cluster-wide watches, which must not compete with a failover's passes
(what is inherited was warm already), nor churn while the ring settles. Each member waits
between one and two of these (by its name), so the members' relists after a membership
change do not reach the API server at once (at 10,000 targets over 5 replicas, together
they held it long enough for renewals to lapse). Namespaces of a bucket we hold or claim
are added at once."""
CLAIM_BACKOFF_MAX = 8.0
"""The longest wait before a bucket whose claims keep failing is tried again."""

HISTORY_WRITES_AT_ONCE = 8
"""Buckets whose history one member writes at once. Each write in flight needs its own
HTTP/1.1 connection, and asyncio gives each TLS connection a 256 KiB read buffer: a member
holding ~75 buckets opened ~80 connections at every pass (20 MB of buffers, and as many TLS
handshakes once the 15 s keep-alive had closed them)."""


class ClaimState(enum.Enum):
    CLAIMING = "claiming"
    """The Lease names us; the history is being stamped and read: nothing runs yet."""
    ACTIVE = "active"
    RELEASING = "releasing"
    """Being handed over: no new pass; the history is written clean, then the Lease released."""


@dataclass(slots=True, kw_only=True)
class Claim:
    bucket: int
    epoch: int
    state: ClaimState = ClaimState.CLAIMING
    keeper: HistoryKeeper | None = None
    task: asyncio.Task[None] | None = None
    awaiting_pass: set[str] = field(default_factory=set)
    """Targets gained with the bucket that no completed pass has decided yet."""
    gained_at: float = 0.0

    @property
    def lease_written(self) -> bool:
        """Our claim's Lease write succeeded (until then ``epoch`` is -1)."""
        return self.epoch >= 0


@dataclass(frozen=True, slots=True, kw_only=True)
class _Layout:
    """The configured targets by bucket (``RingMember._layout``)."""

    weights: dict[int, int]
    """Targets per bucket: what the ring balances."""
    keys: dict[int, list[str]]
    namespaces: dict[int, frozenset[str]]
    """The namespaces of each bucket's targets: what its caches must hold."""
    longest_period: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RingParts:
    """The ring's adapters, built by ``wiring.py``."""

    membership: RingMembershipPort
    leases: BucketLeasesPort
    store: Callable[[int, Callable[[], bool]], BucketStatePort]
    """``store(bucket, may_write)``: the bucket's state object, fenced by ``may_write``."""
    keeper: Callable[[BucketStatePort, Callable[[], Iterable[str]], Callable[[], bool]],
                     HistoryKeeper]
    """``keeper(store, keys, fence)``: a history keeper over the bucket's targets (``keys()``:
    their keys now)."""


@dataclass(slots=True, kw_only=True)
class RingMember:
    parts: RingParts
    timings: ring.Timings
    placement: ring.Placement
    targets: Callable[[], Sequence[TargetConfig]]
    """The configured targets (all of them: the ring decides which are ours)."""
    ready: Callable[[], bool]
    """Our caches are synced: only then do we claim, and peers hand us buckets."""
    run_now: Callable[[Sequence[str]], None]
    gained: Callable[[Sequence[str]], None]
    """Told the targets of a bucket just gained, after their history was read (forecast
    history is then looked at anew, as a leader does at the start of a term)."""
    lost: Callable[[Sequence[str]], None]
    """Told the targets of a bucket no longer ours: their state in memory is dropped, so a
    member keeps what it holds now, not every target it ever held (a claim reads their
    history afresh, as another member's would)."""
    idle: Callable[[Sequence[str], float], Awaitable[bool]]
    warm: Callable[[frozenset[str]], Awaitable[None]]
    """Narrows the pod, workload and owner caches to these namespaces: those of the buckets
    we hold or may inherit (``ring.warm_buckets``), so a replica caches its share, not the
    fleet."""
    cached: Callable[[Sequence[str], float], Awaitable[bool]]
    """Waits until these namespaces' caches have synced, at most so many seconds."""
    monotonic: Callable[[], float]
    telemetry: DaemonMetrics
    ring_name: str
    standby: bool = True
    """Cache what we would inherit if any one other member left (``daemon.sharding.standby``
    ``"warm"``); without it, a bucket gained by a failover or a leave waits for a relist."""
    claims: dict[int, Claim] = field(default_factory=dict)
    planner: RingPlanner | None = None
    moves: int = 0
    unowned: tuple[int, ...] = ()
    _unowned_since: dict[int, float] = field(default_factory=dict)
    leaving: bool = False
    """A graceful stop is handing everything over: nothing new is claimed."""
    _retry_at: dict[int, tuple[float, float]] = field(default_factory=dict)
    """Per bucket whose claim failed: when it may be tried again, and the backoff used."""
    _buckets: dict[str, int] = field(default_factory=dict)
    """The bucket of each placement field (a namespace, or a target's key), computed once:
    every gate asks it, for every target. By namespace, not by key: a dict of the fleet's
    50,000 keys held 1.9 MB of every member; of its 1,000 namespaces, 0.1."""
    _last_problem: str | None = None
    single_leader: str | None = None
    """Who holds the single-leader Lease of the ring's name, while it is held and renewed:
    the ring claims nothing until it stops (a rolling update from leader mode)."""
    warm_namespaces: frozenset[str] | None = None
    """The namespaces the caches were last narrowed to; None until the ring's views synced
    (until then the caches hold nothing, and the member is not ready)."""
    _warm_inputs: tuple[object, ...] = ()
    _warm_buckets: frozenset[int] = frozenset()
    _warm_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _epoch_floor: dict[int, int] = field(default_factory=dict)
    """Per bucket, the latest epoch we know it reached (our own claims, or a stamp that
    refused ours as older): a claim counts on from there even if its Lease was deleted and
    made again (which restarts the Lease's count at 1)."""
    _warm_wanted: tuple[frozenset[str] | None, float] = (None, 0.0)
    """The namespaces last computed as wanted, and since when."""
    _ring_seen: tuple[tuple[str, ...], float] = ((), 0.0)
    """The live members last seen, and the last instant the ring was not steady (members
    changed, a bucket unowned, or we were not valid or not ready)."""
    _by_bucket: tuple[object, _Layout | None] = (None, None)
    """``_layout``'s answer, and the targets list it was made of."""

    _candidates: tuple[_Layout | None, frozenset[int], frozenset[str]] = (
        None, frozenset(), frozenset())
    """The layout and active buckets ``candidates()`` last answered for, and its answer."""
    _history_writes: WorkerPool = field(
        default_factory=lambda: WorkerPool(HISTORY_WRITES_AT_ONCE))
    """Bounds the history writes in flight, whichever pass asked for them."""

    def __post_init__(self) -> None:
        self.planner = RingPlanner(self.timings)
        self.telemetry.exports = self.holds

    # --- what the daemon asks -------------------------------------------------------------

    @property
    def me(self) -> str:
        return self.parts.membership.incarnation

    def bucket_of(self, target: TargetConfig) -> int:
        return self._bucket_of_key(target.key)

    def _bucket_of_key(self, key: str) -> int:
        placed_by = ring.placement_field(namespace=key.partition("/")[0], key=key,
                                         placement=self.placement)
        bucket = self._buckets.get(placed_by)
        if bucket is None:
            bucket = self._buckets[placed_by] = ring.bucket_of(placed_by)
        return bucket

    def _fenced(self, bucket: int, epoch: int) -> bool:
        """The bucket is ours in ``epoch`` now, by our own clock and our view of its Lease."""
        claim = self.claims.get(bucket)
        observed = self.parts.leases.get(bucket)
        return (claim is not None and claim.epoch == epoch
                and self.parts.membership.valid()
                and observed is not None and observed.lease.holder == self.me
                and observed.epoch == epoch)

    def may_write(self, key: str) -> bool:
        """The write gate of target ``key``: its bucket is held, active, fenced."""
        return self._writable(key) is not None

    def holds(self, key: str) -> bool:
        """We hold ``key``'s bucket, active: its series are ours to export (while our
        renewals lapse too: what moves a bucket is another member's claim, which drops it)."""
        return self._active(key) is not None

    def may_run(self, key: str) -> bool:
        """A pass may include ``key``: we may write it and its history is read."""
        claim = self._writable(key)
        return claim is not None and claim.keeper is not None and claim.keeper.restored.is_set()

    def candidates(self) -> frozenset[str]:
        """The targets ``may_run`` may allow: those of the buckets we hold active. The
        scheduler asks the gate about these only, not about the whole fleet at each wake;
        made again only when those buckets or the targets list change (it asks at each)."""
        layout = self._layout()
        active = frozenset(b for b, claim in self.claims.items()
                           if claim.state is ClaimState.ACTIVE)
        made_of, made_for, keys = self._candidates
        if made_of is not layout or made_for != active:
            keys = frozenset(key for bucket in active for key in layout.keys.get(bucket, ()))
            self._candidates = (layout, active, keys)
        return keys

    def _active(self, key: str) -> Claim | None:
        claim = self.claims.get(self._bucket_of_key(key))
        return claim if claim is not None and claim.state is ClaimState.ACTIVE else None

    def _writable(self, key: str) -> Claim | None:
        claim = self._active(key)
        return claim if claim is not None and self._fenced(claim.bucket, claim.epoch) else None

    def leads(self) -> bool:
        """Whether we act for any target now (``/status``'s ``leader``, readiness text)."""
        return any(claim.state is ClaimState.ACTIVE and self._fenced(b, claim.epoch)
                   for b, claim in self.claims.items())

    def keeper_of(self, key: str) -> HistoryKeeper | None:
        claim = self.claims.get(self._bucket_of_key(key))
        return None if claim is None else claim.keeper

    async def persist(self) -> None:
        """Make every active bucket's history durable (before a pass's scale writes). A bucket
        whose write fails fails the call: the pass then sends none of its writes."""
        claims = [claim for claim in self.claims.values()
                  if claim.state is ClaimState.ACTIVE and claim.keeper is not None
                  and claim.keeper.restored.is_set()]
        results = await self._history_writes.each(claims, self._persisted)
        failure: BaseException | None = None
        for claim, result in zip(claims, results, strict=True):
            if self.claims.get(claim.bucket) is not claim:
                continue  # dropped while its write was on its way: already let go, and counted
            if isinstance(result, (FencedError, RejectedError)):
                # Someone else stamped the bucket's state, or it cannot be stored at all: the
                # bucket is not ours to act for; its targets' writes are refused from now
                # (the fence) and the others' pass goes on. Claimed again by the ring's rules.
                self._drop(claim, why=f"its history cannot be written: {result}")
            elif isinstance(result, BaseException) and failure is None:
                failure = result
        if failure is not None:
            raise failure

    async def _persisted(self, claim: Claim) -> BaseException | None:
        """The bucket's history written: None, or why not. A bucket let go while it waited
        for its turn is not written (its claim was dropped: the loop above skips it)."""
        if self.claims.get(claim.bucket) is not claim or claim.keeper is None:
            return None
        try:
            await claim.keeper.persist()
        except Exception as error:
            return error
        return None

    def passed(self, keys: Sequence[str]) -> None:
        """A pass over ``keys`` completed: say when a gained bucket's targets were all first
        decided by us (the end of a move, as the issue measures failover)."""
        done = set(keys)
        for claim in self.claims.values():
            if claim.awaiting_pass and claim.state is ClaimState.ACTIVE:
                claim.awaiting_pass -= done
                if not claim.awaiting_pass:
                    log.info("first pass over a gained bucket done", bucket=f"{claim.bucket:02x}",
                             epoch=claim.epoch,
                             seconds_since_claim=round(self.monotonic() - claim.gained_at, 3))

    def status(self) -> dict[str, object]:
        held = sorted(b for b, c in self.claims.items() if c.state is ClaimState.ACTIVE)
        return {
            "member": self.me,
            "valid": self.parts.membership.valid(),
            "members": sorted(self.parts.membership.members()),
            "buckets": [f"{b:02x}" for b in held],
            "claiming": [f"{b:02x}" for b, c in sorted(self.claims.items())
                         if c.state is ClaimState.CLAIMING],
            "releasing": [f"{b:02x}" for b, c in sorted(self.claims.items())
                          if c.state is ClaimState.RELEASING],
            "unownedBuckets": [f"{b:02x}" for b in self.unowned],
            "moves": self.moves,
            "cachedNamespaces": len(self.warm_namespaces or ()),
            "standbyPendingNamespaces": self._standby_pending(),
            "singleLeader": self.single_leader,
        }

    def _standby_pending(self) -> int:
        """Namespaces our standby wants cached and the caches do not hold yet (their relist
        waits for the ring to settle): a bucket of theirs gained meanwhile waits for its LIST
        before its first pass."""
        wanted, current = self._warm_wanted[0], self.warm_namespaces
        return 0 if wanted is None or current is None else len(wanted - current)

    # --- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        """Follow the ring until cancelled: every quarter retry period, read the bucket Leases,
        drop what is no longer ours, claim and hand over as the planner says."""
        while True:
            try:
                await self._tick()
            except Exception as error:  # a bug here must not stop the ring's upkeep
                log.exception("ring upkeep failed; trying again", error=str(error))
            await asyncio.sleep(self.timings.retry_period / 4)

    async def _tick(self) -> None:
        membership = self.parts.membership
        if self.leaving:
            membership.ready = False
            return
        problem = self.parts.leases.problem
        membership.ready = (self.ready() and self.parts.leases.synced.is_set()
                            and problem is None)
        incarnation = membership.incarnation  # read before evicted: the one evicted, if so
        if membership.evicted:
            self._drop_all(why="this member was evicted (it did not renew in time)")
            membership.rejoin(incarnation)
            return
        self.parts.leases.identity = self.me
        self._say_problem(problem)
        self._see_single_leader(membership.single_leader())
        self._drop_lost()
        await self._keep_warm()
        plan = self._plan()
        self._report(plan.unowned)
        now = self.monotonic()
        for bucket in plan.claims if self.single_leader is None else ():
            if bucket not in self.claims and now >= self._retry_at.get(bucket, (0.0, 0.0))[0]:
                self._start_claim(bucket)
        for bucket, to in plan.releases:
            claim = self.claims.get(bucket)
            if claim is not None and claim.state is ClaimState.ACTIVE:
                claim.state = ClaimState.RELEASING
                claim.task = asyncio.get_running_loop().create_task(
                    self._hand_over(claim, to, drain=HAND_OVER_DRAIN))

    def _report(self, unowned: tuple[int, ...]) -> None:
        """The ring's gauges; a bucket unowned longer than a lease duration plus two passes
        is overdue (``AutoscalerTargetsUnowned``)."""
        now, ring_name, metrics = self.monotonic(), self.ring_name, self.telemetry
        layout = self._layout()
        weights = layout.weights
        # A bucket whose Lease names us but that we do not serve (a claim under way, or one
        # that failed after its Lease write) is as unowned for its targets as a free one.
        unserved = {b for b in weights
                    if (o := self.parts.leases.get(b)) is not None and o.lease.holder == self.me
                    and ((c := self.claims.get(b)) is None or c.state is not ClaimState.ACTIVE)}
        unowned = tuple(sorted(set(unowned) | unserved))
        self.unowned = unowned
        self._unowned_since = {b: self._unowned_since.get(b, now) for b in unowned}
        bound = self.timings.lease_duration + 2 * layout.longest_period
        # A bucket never held may wait FORMATION_WAIT by design (its owner still syncing).
        bounds = {b: bound + (FORMATION_WAIT if self.parts.leases.get(b) is None else 0.0)
                  for b in unowned}
        metrics.ring_unowned.labels(ring=ring_name).set(len(unowned))
        metrics.ring_overdue.labels(ring=ring_name).set(
            sum(1 for b, since in self._unowned_since.items() if now - since > bounds[b]))
        for state in ClaimState:
            metrics.ring_buckets.labels(ring=ring_name, state=state.value).set(
                sum(1 for c in self.claims.values() if c.state is state))
        acting = {b for b, c in self.claims.items()
                  if c.state is ClaimState.ACTIVE and self._fenced(b, c.epoch)}
        metrics.ring_targets.labels(ring=ring_name).set(sum(weights.get(b, 0) for b in acting))
        member = self.parts.membership
        metrics.ring_member.clear()
        metrics.ring_member.labels(ring=ring_name, member=member.incarnation).set(
            1 if member.valid() else 0)

    def _plan(self) -> Plan:
        membership, now = self.parts.membership, self.monotonic()
        leases = {b: o.lease for b, o in self.parts.leases.view.items()}
        holders = {lease.holder: membership.holder_view(lease.holder)
                   for lease in leases.values() if lease.holder}
        assert self.planner is not None
        return self.planner.plan(RingView(
            me=self.me, now=now, valid=membership.valid(), ready=membership.ready,
            members=membership.members(), holders=holders, leases=leases,
            weights=self._weights(),
            held=frozenset(b for b, c in self.claims.items() if c.state is not
                           ClaimState.RELEASING),
            releasing=frozenset(b for b, c in self.claims.items()
                                if c.state is ClaimState.RELEASING)))

    def _weights(self) -> dict[int, int]:
        """The configured targets per bucket (what the ring balances)."""
        return self._layout().weights

    def _layout(self) -> _Layout:
        """The configured targets by bucket: made once per targets list (a reload replaces
        the list; the upkeep, four times a second, must not walk 50,000 targets each time)."""
        targets = self.targets()
        made_of, layout = self._by_bucket
        if layout is None or made_of is not targets:
            keys: dict[int, list[str]] = {}
            grouped: dict[int, set[str]] = {}
            for target in targets:
                bucket = self.bucket_of(target)
                keys.setdefault(bucket, []).append(target.key)
                grouped.setdefault(bucket, set()).add(target.namespace)
            layout = _Layout(
                weights={b: len(k) for b, k in keys.items()}, keys=keys,
                namespaces={b: frozenset(names) for b, names in grouped.items()},
                longest_period=max((t.sync_period for t in targets), default=0.0))
            self._by_bucket = (targets, layout)
        return layout

    async def _keep_warm(self) -> None:
        """Keep the caches to the namespaces of the buckets we hold, claim, or would be
        preferred for now or after any one other member left (``ring.warm_buckets``; the
        buckets are computed again only when the members, holders or targets changed); a
        change of the standby alone once it has held for ``WARM_SETTLE``."""
        if (self.parts.membership.view_synced_at is None
                or not self.parts.leases.synced.is_set()):
            return  # we know nothing of the ring yet
        members = tuple(sorted(self.parts.membership.members()))
        unsteady = self._unsteady_at(members)
        if not self.parts.membership.valid():
            # Our renewals are not getting through: the API server is likely slow for every
            # member, so the peers' Leases look stale too. Widening the caches to what we
            # would inherit from all of them would pile relists on a struggling server (at
            # 50,000 targets over 5 replicas every member did, and none recovered).
            return
        async with self._warm_lock:
            layout = self._layout()
            weights, by_bucket = layout.weights, layout.namespaces
            holders = {b: o.lease.holder for b, o in self.parts.leases.view.items()
                       if o.lease.holder}
            inputs = (weights, self.me, members, holders)
            if inputs != self._warm_inputs:
                self._warm_inputs = inputs
                self._warm_buckets = ring.warm_buckets(weights, members, me=self.me,
                                                       holders=holders, standby=self.standby)
            # A claim counts once its Lease write succeeded: at a leave, several members race
            # for each bucket, and a loser's namespaces would be relisted for nothing (at
            # 50,000 targets over 5 a receiver's cached namespaces grew from 105 to 181).
            claimed = {b for b, c in self.claims.items() if c.lease_written}
            namespaces = frozenset().union(*(
                by_bucket.get(b, frozenset()) for b in self._warm_buckets | claimed))
            current, now = self.warm_namespaces, self.monotonic()
            synced_at = self.parts.membership.view_synced_at
            if current is None and synced_at is not None \
                    and now - synced_at < self.timings.lease_duration:
                # The first caches wait a lease duration after our view of the ring synced,
                # for the peers that started with us to appear in it: the first member of a
                # ring to start saw no peer and listed the whole fleet (10,000 targets over
                # 5: 188 MB peak, its peers 150-157; it narrowed 31 s later).
                return
            # The wish is always the latest (a standby that went back to what is cached
            # wants nothing more, and a later change waits its own settle time).
            if namespaces != self._warm_wanted[0]:
                self._warm_wanted = (namespaces, now)
            if namespaces == current:
                return
            held = frozenset().union(*(by_bucket.get(b, frozenset()) for b in claimed))
            settle = WARM_SETTLE * (1 + ring.fnv1a64(self.me) % 1000 / 1000)
            if current is not None and now - max(self._warm_wanted[1], unsteady) < settle:
                # Until the ring is steady the caches grow only by what a claim needs now.
                # Growing the standby waits: taken along, every member that claimed after a
                # join relisted its whole standby at once (10,000 targets over 5 on the
                # simulated server, all renewals lapsed). Narrowing relists nothing: it waits
                # only for the wish to hold for the settle time. Waiting for a steady ring
                # kept a member that saw itself alone at its start caching the whole fleet
                # for 2 minutes (50,000 targets over 5: 445 MB, its peers 250-390); at once,
                # the caches followed every turn of a join's preferences, and each claim
                # relisted what had just been dropped (hand-over gaps up to 10.6 s, from 1.6).
                kept = current & namespaces if now - self._warm_wanted[1] >= settle else current
                namespaces = kept | held
                if namespaces == current:
                    return
            await self.warm(namespaces)
            log.info("caches narrowed to the ring's share", namespaces=len(namespaces),
                     added=len(namespaces - (current or frozenset())),
                     buckets=len(self._warm_buckets))
            self.warm_namespaces = namespaces

    def _unsteady_at(self, members: tuple[str, ...]) -> float:
        """The last instant the ring was not steady: its members changed, a bucket had no
        owner, or we were not valid or not ready (our caches not synced yet).

        A standby is for a steady ring. While peers' renewals lapse on a struggling API
        server they drop out of our view, and the standby (what we would inherit if one
        more left) becomes the whole fleet; widening to it then relists everything on the
        server that struggles, and the peers do the same (at 50,000 targets over 5 replicas
        on the simulated server, members widened to all 500 namespaces and the ring never
        formed). What we must serve is cached at once by its claim anyway."""
        seen, since = self._ring_seen
        membership = self.parts.membership
        if members != seen or self.unowned or not membership.valid() or not self.ready():
            since = self.monotonic()
        self._ring_seen = (members, since)
        return since

    def _keys(self, bucket: int) -> list[str]:
        return list(self._layout().keys.get(bucket, ()))

    # --- claiming -------------------------------------------------------------------------

    def _start_claim(self, bucket: int) -> None:
        observed = self.parts.leases.get(bucket)
        placeholder = Claim(bucket=bucket, epoch=-1)
        self.claims[bucket] = placeholder
        placeholder.task = asyncio.get_running_loop().create_task(
            self._claim(placeholder, observed))

    async def _claim(self, claim: Claim, observed: ObservedBucketLease | None) -> None:
        bucket = claim.bucket
        try:
            epoch = await asyncio.wait_for(
                self.parts.leases.claim(bucket, observed, after=self._epoch_floor.get(bucket, 0)),
                self.timings.retry_period)
            if epoch is None:
                self._failed(claim, "someone else wrote its Lease first")
                return
            claim.epoch = epoch
            self._epoch_floor[bucket] = max(self._epoch_floor.get(bucket, 0), epoch)

            def fence() -> bool:
                return self._fenced(bucket, epoch)

            # Its namespaces' caches start filling now if they were not warm (two members
            # lost at once; a join), while the history is read.
            await self._keep_warm()
            # Passes of an earlier claim of ours (before an eviction, or a hand-over whose
            # drain timed out) end first: the history read next replaces their states. The
            # Lease is ours meanwhile (a bucket Lease is not renewed), so waiting costs no
            # write; a drop cancels this task.
            if not await self.idle(self._keys(bucket), EARLIER_PASSES_WAIT):
                self._failed(claim, "a pass of an earlier claim over its targets is still "
                                    "running")
                return
            store = self.parts.store(bucket, fence)
            with contextlib.suppress(StateSetAsideError):  # ours; the keeper says it, starts fresh
                await store.stamp(self.me, epoch, still_claimed=fence)
            keeper = claim.keeper = self.parts.keeper(
                store, lambda: self._layout().keys.get(bucket, ()), fence)
            restored = await asyncio.wait_for(keeper.restore(lambda: self._keys(bucket)),
                                              RESTORE_BOUND)
        except Exception as error:  # whatever failed, the claim is not ours
            if isinstance(error, FencedError) and error.later_epoch is not None:
                # Stamped at a later epoch than the Lease counts (it was deleted and made
                # again): our next claim counts on from the stamp's.
                self._epoch_floor[bucket] = max(self._epoch_floor.get(bucket, 0), error.later_epoch)
            self._failed(claim, str(error) or type(error).__name__)
            return
        if self.claims.get(bucket) is not claim:
            keeper.invalidate()
            return
        namespaces = sorted(self._layout().namespaces.get(bucket, ()))
        if not await self.cached(namespaces, CACHE_WAIT):
            log.warning("a gained bucket's caches have not synced; its targets are decided "
                        "once they have", bucket=f"{bucket:02x}", namespaces=len(namespaces))
        if self.claims.get(bucket) is not claim:
            keeper.invalidate()
            return
        if not fence():  # lost while reading: stranded, claimed again (a new epoch)
            self._failed(claim, "no longer ours while its history was read")
            return
        # Read after the last wait: a reload meanwhile may have added targets to the bucket,
        # and the ring never pokes the scheduler (they would wait for their group's start).
        keys = self._keys(bucket)
        claim.state = ClaimState.ACTIVE
        self._retry_at.pop(bucket, None)
        self.moves += 1
        self.telemetry.ring_moves.labels(ring=self.ring_name, reason="gained").inc()
        claim.awaiting_pass, claim.gained_at = set(keys), self.monotonic()
        log.info("holding a bucket of targets", bucket=f"{bucket:02x}", epoch=epoch,
                 targets=len(keys), history_targets=restored.targets, clean=restored.clean)
        if restored.set_aside is not None:
            log.error("a bucket's saved history could not be decoded: its targets start fresh",
                      bucket=f"{bucket:02x}", kept_as=restored.set_aside.kept_as)
            self.telemetry.errors.labels(reason="state_set_aside").inc()
        self.gained(keys)
        self.run_now(keys)

    def _failed(self, claim: Claim, why: str) -> None:
        """A claim that did not complete: forgotten, and tried again later, backing off."""
        now = self.monotonic()
        backoff = min(CLAIM_BACKOFF_MAX, 2 * self._retry_at.get(claim.bucket, (0.0, 0.25))[1])
        self._retry_at[claim.bucket] = (now + backoff, backoff)
        log.warning("could not claim a bucket of targets; it stays free for the ring's rules",
                    bucket=f"{claim.bucket:02x}", error=why, retry_in=round(backoff, 2))
        self._forget(claim)

    def _forget(self, claim: Claim) -> None:
        """We no longer act for ``claim``'s targets: its history is someone else's to write,
        their series are someone else's to export, and their states are dropped."""
        if claim.keeper is not None:
            claim.keeper.invalidate()
        if self.claims.get(claim.bucket) is claim:
            del self.claims[claim.bucket]
            keys = self._keys(claim.bucket)
            for key in keys:
                self.telemetry.forget(key)
            self.lost(keys)

    # --- losing and handing over ----------------------------------------------------------

    def _drop_lost(self) -> None:
        for claim in list(self.claims.values()):
            if not claim.lease_written:
                continue  # its claim write is under way
            observed = self.parts.leases.get(claim.bucket)
            if observed is None or observed.lease.holder != self.me or \
                    observed.epoch != claim.epoch:
                holder = None if observed is None else observed.lease.holder
                self._drop(claim, why=f"the bucket's Lease now names {holder or 'no one'}")

    def _drop(self, claim: Claim, *, why: str) -> None:
        if claim.task is not None and claim.task is not asyncio.current_task():
            claim.task.cancel()
        log.warning("no longer holding a bucket of targets: nothing is written for them",
                    bucket=f"{claim.bucket:02x}", epoch=claim.epoch, why=why)
        if claim.state is ClaimState.ACTIVE:
            self.telemetry.ring_moves.labels(ring=self.ring_name, reason="lost").inc()
        self._forget(claim)

    def _drop_all(self, *, why: str) -> None:
        for claim in list(self.claims.values()):
            self._drop(claim, why=why)

    async def _hand_over(self, claim: Claim, to: str, *, drain: float) -> None:
        """Hand ``claim``'s bucket to ``to``: its passes end, its history is written clean,
        then its Lease is released naming ``to``. Whatever fails, we no longer act for it."""
        bucket = claim.bucket
        try:
            await self.idle(self._keys(bucket), drain)
            if claim.keeper is not None and claim.keeper.restored.is_set():
                await claim.keeper.persist(clean=True)
            released = await asyncio.wait_for(
                self.parts.leases.release(bucket, claim.epoch, to), self.timings.retry_period)
            if released:
                log.info("handed a bucket of targets over", bucket=f"{bucket:02x}", to=to)
                self.telemetry.ring_moves.labels(ring=self.ring_name,
                                                 reason="handed_over").inc()
        except Exception as error:  # whatever failed, we no longer act for it
            log.warning("could not hand a bucket of targets over", bucket=f"{bucket:02x}",
                        to=to, error=str(error) or type(error).__name__)
        finally:
            self._forget(claim)

    async def leave(self) -> None:
        """A graceful stop: hand every bucket over to its preferred successor at once."""
        self.leaving = True  # the upkeep claims nothing from now on
        self.parts.membership.ready = False
        preference = (self.planner.preference(self._view_for_leave())
                      if self.planner is not None else {})
        hand_overs: list[Awaitable[object]] = []
        for claim in list(self.claims.values()):
            if claim.state is ClaimState.RELEASING:
                if claim.task is not None:
                    hand_overs.append(claim.task)  # under way: waited for, not started again
                continue
            if claim.task is not None:
                claim.task.cancel()
            if claim.state is ClaimState.CLAIMING:
                self._forget(claim)
                continue
            choice = preference.get(claim.bucket)
            to = choice.successor if choice and choice.owner == self.me else \
                (choice.owner if choice else "")
            claim.state = ClaimState.RELEASING
            hand_overs.append(self._hand_over(claim, to or "", drain=0.0))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*hand_overs, return_exceptions=True),
                                   STOP_HAND_OVER)

    def _view_for_leave(self) -> RingView:
        return RingView(me=self.me, now=self.monotonic(), valid=True, ready=True,
                        members=self.parts.membership.members(), holders={},
                        leases={b: o.lease for b, o in self.parts.leases.view.items()},
                        weights=self._weights(), held=frozenset(self.claims))

    def _see_single_leader(self, holder: str | None) -> None:
        if holder == self.single_leader:
            return
        if holder is not None and holder != ring.SINGLE_LEADER_NOT_READ:
            log.warning("a single leader of this name acts: the ring claims nothing until it "
                        "releases its Lease or stops renewing it", holder=holder,
                        held_buckets=len(self.claims))
        elif holder is None and self.single_leader not in (None, ring.SINGLE_LEADER_NOT_READ):
            log.info("the single leader of this name stopped: the ring takes over",
                     was=self.single_leader)
        self.single_leader = holder

    def _say_problem(self, problem: str | None) -> None:
        if problem is not None and problem != self._last_problem:
            log.error("not taking part in the ring", problem=problem)
        self._last_problem = problem
