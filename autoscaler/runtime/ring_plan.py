"""What a member of the ring does next: which buckets it claims, which it hands over, and
when (issue 38; docs/design/active-active.md §4.4, rule C, hand-over and rebalancing).

The planner only decides; the membership loop carries the decisions out as compare-and-swap
writes on the bucket Leases (``adapters/kube/buckets.py``), so safety never rests on its
answers: two members that disagree at worst both try a claim and one of them gets a 409. It
remembers, per bucket, since when the bucket was claimable and since when its preferred owner
has been the same, because rule C's delay and the rebalancing's stability are measured on the
member's own monotonic clock; every instant is an argument (no clock reads, no I/O).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from autoscaler.runtime import ring

MAX_RELEASES_IN_FLIGHT = 4
"""Hand-overs one holder runs at once when rebalancing: a join moves its share in a few
rounds rather than leaving many buckets between owners at the same moment."""

FORMATION_WAIT = 60.0
"""Seconds a bucket never held (no Lease: a ring forming, or targets new to it) waits for
its owner among all live members while that member syncs its caches. Claimed by whichever
member is ready first, a ring started at once was held by its first ready member and then
rebalanced by hand-overs for minutes, that member caching most of the fleet meanwhile
(peak RSS 333 MB against 219-250 for the others, 10,000 targets over 5). Bounded, so a
member that never gets ready delays a new bucket by this much at most; a bucket that was
held before (failover, hand-over) never waits for it. 30 s was too short: five members
started together against the simulated API server (one process serving their LISTs in
turn) got ready up to ~40 s apart at 10,000 targets."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RingView:
    """One member's view of the ring at ``now`` (its monotonic clock)."""

    me: str
    now: float
    valid: bool
    """Our member Lease renewed within the renew deadline and not evicted (M2)."""
    ready: bool
    """Our caches for what we own and stand by for are synced."""
    members: Mapping[str, bool]
    """Live members (not evicted, not expired in our view), us included: ready or not."""
    holders: Mapping[str, ring.HolderView]
    """What we know of each member named as a bucket holder: evicted (its buckets are free,
    M4), or since when its member Lease has been missing from our view (a Lease deleted by
    hand: free a lease duration later). A holder not in it is alive."""
    leases: Mapping[int, ring.BucketLease]
    """The bucket Leases we saw (absent: never created)."""
    weights: Mapping[int, int]
    """Configured targets per bucket, in our configuration."""
    held: Set[int]
    """Buckets we hold and act for."""
    releasing: Set[int] = frozenset()
    """Buckets we are handing over (no longer acted for, Lease not yet released)."""


@dataclass(frozen=True, slots=True)
class Plan:
    claims: tuple[int, ...] = ()
    releases: tuple[tuple[int, str], ...] = ()
    """(bucket, member it is handed to)."""
    unowned: tuple[int, ...] = ()
    """Buckets with targets that no one holds in our view (for the metric and the alert)."""


@dataclass(slots=True)
class RingPlanner:
    timings: ring.Timings
    _claimable_since: dict[int, float] = field(default_factory=dict)
    _preferred_since: dict[int, tuple[str, float]] = field(default_factory=dict)
    _ready_since: dict[str, float] = field(default_factory=dict)
    _last: dict[bool, tuple[tuple[object, ...], dict[int, ring.Preference]]] = field(
        default_factory=dict)
    """The last preference among the ready members (True) and among all live members
    (False), each with what it was computed from: a member plans four times a second and
    the inputs rarely change (one computation over 256 buckets: ~1.5 ms)."""

    def preference(self, view: RingView) -> Mapping[int, ring.Preference]:
        """Who should own each bucket among the live, ready members, sticky to the holders."""
        return self._preference(view, ready_only=True)

    def _preference(self, view: RingView, *, ready_only: bool) -> Mapping[int, ring.Preference]:
        members = tuple(sorted(m for m, is_ready in view.members.items()
                               if is_ready or not ready_only))
        holders = {b: lease.holder for b, lease in view.leases.items() if lease.holder}
        inputs = (view.weights, members, holders)
        last = self._last.get(ready_only)
        if last is None or last[0] != inputs:
            kept = (dict(view.weights), members, holders)  # a copy: a caller's dict may change
            last = self._last[ready_only] = (
                kept, ring.preferences(view.weights, members, holders=holders))
        return last[1]

    def plan(self, view: RingView) -> Plan:
        unowned = tuple(sorted(b for b, w in view.weights.items()
                               if w > 0 and self._free(view, b)))
        self._remember_claimable(view, unowned)
        self._remember_ready(view)
        if not (view.valid and view.ready):
            # A member that may not write claims nothing and hands nothing over; what it
            # holds stays held (suspension is not loss, M5) and unused.
            return Plan(unowned=unowned)
        preferred = self.preference(view)
        self._remember_preference(view, preferred)
        forming = self._forming(view, unowned)
        claims = tuple(b for b in unowned if b not in view.held and b not in view.releasing
                       and b not in forming
                       and self._claim_due(view, b, preferred)) + self._stranded(view)
        releases = () if unowned else self._rebalance(view, preferred)
        return Plan(claims=claims, releases=releases, unowned=unowned)

    @staticmethod
    def _stranded(view: RingView) -> tuple[int, ...]:
        """Buckets whose Lease names us although we do not act for them (a claim that failed
        after its Lease write): no one else may claim them while we live, so we claim them
        again (a new epoch, the history read again)."""
        return tuple(sorted(b for b, lease in view.leases.items()
                            if lease.holder == view.me and view.weights.get(b, 0) > 0
                            and b not in view.held and b not in view.releasing))

    def _free(self, view: RingView, bucket: int) -> bool:
        lease = view.leases.get(bucket)
        holder = "" if lease is None else lease.holder
        return ring.claimable(lease, view.holders.get(holder, ring.HolderView()),
                              now=view.now, lease_duration=self.timings.lease_duration)

    def _remember_claimable(self, view: RingView, unowned: tuple[int, ...]) -> None:
        for bucket in list(self._claimable_since):
            if bucket not in unowned:
                del self._claimable_since[bucket]
        for bucket in unowned:
            self._claimable_since.setdefault(bucket, view.now)

    def _remember_ready(self, view: RingView) -> None:
        for member in list(self._ready_since):
            if not view.members.get(member):
                del self._ready_since[member]
        for member, is_ready in view.members.items():
            if is_ready:
                self._ready_since.setdefault(member, view.now)

    def _forming(self, view: RingView, unowned: tuple[int, ...]) -> frozenset[int]:
        """Never-held buckets left to their owner among all live members (FORMATION_WAIT):
        until it has been ready two retry periods (its own claim comes first), at most
        FORMATION_WAIT after the bucket became claimable."""
        fresh = [b for b in unowned if b not in view.leases
                 and view.now - self._claimable_since[b] < FORMATION_WAIT]
        settled = 2 * self.timings.retry_period
        if not fresh or all(view.now - self._ready_since.get(m, view.now) >= settled
                            for m in view.members):
            return frozenset()
        eventual = self._preference(view, ready_only=False)
        waiting: set[int] = set()
        for bucket in fresh:
            choice = eventual.get(bucket)
            if choice is None or choice.owner == view.me:
                continue
            ready_at = self._ready_since.get(choice.owner)
            if ready_at is None or view.now - ready_at < settled:
                waiting.add(bucket)
        return frozenset(waiting)

    def _claim_due(self, view: RingView, bucket: int,
                   preferred: Mapping[int, ring.Preference]) -> bool:
        choice = preferred.get(bucket)
        delay = ring.claim_delay(view.leases.get(bucket), me=view.me,
                                 preferred=choice.owner if choice else "",
                                 retry_period=self.timings.retry_period)
        return view.now - self._claimable_since[bucket] >= delay

    def _remember_preference(self, view: RingView,
                             preferred: Mapping[int, ring.Preference]) -> None:
        for bucket in list(self._preferred_since):
            if bucket not in preferred:
                del self._preferred_since[bucket]
        for bucket, choice in preferred.items():
            seen = self._preferred_since.get(bucket)
            if seen is None or seen[0] != choice.owner:
                self._preferred_since[bucket] = (choice.owner, view.now)

    def _rebalance(self, view: RingView,
                   preferred: Mapping[int, ring.Preference]) -> tuple[tuple[int, str], ...]:
        """Hand over held buckets whose preferred owner is another live, ready member, once
        that preference has held for two retry periods (views settle first), a few at once;
        never while any bucket is unowned (the caller checks), so a failover is not slowed
        by voluntary moves."""
        room = MAX_RELEASES_IN_FLIGHT - len(view.releasing)
        releases: list[tuple[int, str]] = []
        for bucket in sorted(view.held):
            if len(releases) >= room:
                break
            if view.weights.get(bucket, 0) == 0:
                releases.append((bucket, ""))  # its targets left the config: free it
                continue
            choice = preferred.get(bucket)
            if choice is None or choice.owner == view.me or not view.members.get(choice.owner):
                continue
            owner, since = self._preferred_since[bucket]
            if view.now - since >= 2 * self.timings.retry_period:
                releases.append((bucket, owner))
        return tuple(releases)
