"""The ring of dynamic sharding, as arithmetic (issue 38; docs/design/active-active.md
§4.2-4.5): which bucket a target falls in, the KEP-5866 ``shardSelector`` that asks the API
server for a set of namespaces' objects, which live member should own
each bucket, when a bucket may be claimed, and when a member's renewal still lets it write.

Pure: no I/O, no clock reads (every instant is an argument, read from the caller's monotonic
clock), no logging. Every hash is FNV-1a-64 over UTF-8, never Python's ``hash()`` (salted per
process), so every replica, and the API server, computes the same buckets.

Safety never rests on this module's answers agreeing between replicas: the preference only
guides claims and hand-overs; exclusivity comes from compare-and-swap writes on Leases (§4.4).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from autoscaler.config import ShardingSettings

FNV64_OFFSET_BASIS = 0xCBF29CE484222325
FNV64_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1

BUCKET_BITS = 8
BUCKETS = 1 << BUCKET_BITS
"""Fixed: part of the ring's identity (a ring made with another count is a different ring)."""
_SHIFT = 64 - BUCKET_BITS

OVERLOAD = 1.05
"""Bounded loads: a member takes a bucket by preference only while its load stays within
``ceil(OVERLOAD * total weight / members)``. The most loaded member is at that bound (256
buckets of uneven weight never spread evenly by rank alone), and its memory is the fleet's
peak: at 1.15, 11,500 targets of 50,000 over 5 against 10,500 at 1.05. A tight bound also
gives a joining member its share: sticky, a join moved 0.46-0.68 of a fair share at 1.15
and moves 0.72-0.85 at 1.05 (the balanced figure is N/(N+1): 0.80-0.89 for 4-8 members)."""

Placement = Literal["namespace", "target"]
"""What a target's bucket is the hash of: its namespace (the default: then the API server can
filter pods by bucket), or its key ``namespace/kind/name`` (balanced when namespaces are few)."""

NAMESPACE_FIELD = "object.metadata.namespace"
"""The KEP-5866 field a replica's watches filter on (pods are in their target's namespace)."""


def fnv1a64(text: str) -> int:
    """The 64-bit FNV-1a hash of ``text``'s UTF-8 bytes (Go's ``hash/fnv.New64a``, which the
    API server uses for ``shardRange``)."""
    value = FNV64_OFFSET_BASIS
    for byte in text.encode():
        value = ((value ^ byte) * FNV64_PRIME) & _MASK64
    return value


def placement_field(*, namespace: str, key: str, placement: Placement) -> str:
    """The string a target is placed by: its namespace, or its key ``namespace/kind/name``."""
    return namespace if placement == "namespace" else key


def mix64(value: int) -> int:
    """MurmurHash3's 64-bit finaliser: every input bit moves every output bit. FNV-1a alone
    does not: names that differ only at the end (``team-a``, ``team-b``; ``ns-1`` ..
    ``ns-50``) share its top bits, and would all fall in one bucket."""
    value ^= value >> 33
    value = (value * 0xFF51AFD7ED558CCD) & _MASK64
    value ^= value >> 33
    value = (value * 0xC4CEB9FE1A85EC53) & _MASK64
    return value ^ (value >> 33)


def bucket_of(field: str) -> int:
    """The bucket of a placement field: the top ``BUCKET_BITS`` bits of its mixed hash."""
    return mix64(fnv1a64(field)) >> _SHIFT


def target_bucket(*, namespace: str, key: str, placement: Placement) -> int:
    return bucket_of(placement_field(namespace=namespace, key=key, placement=placement))


@dataclass(frozen=True, slots=True)
class HashRange:
    """``[start, end)`` over the API server's 64-bit FNV-1a hash; ``end`` may be ``2**64``."""

    start: int
    end: int


def namespace_ranges(namespaces: Iterable[str]) -> list[HashRange]:
    """One range per namespace, exactly its FNV-1a hash (adjacent ones merged), in order:
    what the API server filters on, whichever buckets the namespaces fall in."""
    ranges: list[HashRange] = []
    for value in sorted({fnv1a64(namespace) for namespace in namespaces}):
        if ranges and ranges[-1].end == value:
            ranges[-1] = HashRange(ranges[-1].start, value + 1)
        else:
            ranges.append(HashRange(value, value + 1))
    return ranges


def shard_selector(namespaces: Iterable[str]) -> str:
    """The KEP-5866 ``shardSelector`` that lists only the objects of these namespaces, e.g.
    ``shardRange(object.metadata.namespace, '0x8d0b3f6a5c1e2d44', '0x8d0b3f6a5c1e2d45')``,
    one ``shardRange`` per namespace joined by `` || ``."""
    ranges = namespace_ranges(namespaces)
    if not ranges:
        raise ValueError("a selector for no namespace would select nothing")
    return " || ".join(f"shardRange({NAMESPACE_FIELD}, '0x{r.start:016x}', '0x{r.end:016x}')"
                       for r in ranges)


@dataclass(frozen=True, slots=True)
class Preference:
    """Who should own a bucket in one member's view, and who takes it next (warm standby)."""

    owner: str
    successor: str | None


def rendezvous_rank(bucket: int, members: Iterable[str]) -> list[str]:
    """Members by descending ``fnv1a64(f"{bucket}/{member}")`` (ties by name): the bucket's
    order of preference, the same whatever order the members are given in."""
    return list(_rank(bucket, tuple(sorted(members))))


@functools.lru_cache(maxsize=4096)
def _rank(bucket: int, members: tuple[str, ...]) -> tuple[str, ...]:
    # Cached: a member plans four times a second, and the members rarely change.
    return tuple(sorted(members, key=lambda member: (-fnv1a64(f"{bucket}/{member}"), member)))


def preferences(weights: Mapping[int, int], members: Iterable[str], *,
                overload: float = OVERLOAD,
                holders: Mapping[int, str] | None = None) -> dict[int, Preference]:
    """Rendezvous hashing with bounded loads (§4.4), sticky: buckets by descending weight
    (then number) first stay with their current holder (``holders``: who holds each bucket's
    Lease now) while it is live and its load stays within ``ceil(overload * W / |members|)``;
    the rest each go to the first member in their rank within that bound (a bucket shed by
    a live holder over the bound: to the least loaded within it, then by rank), else to the
    least loaded (its holder first, then by rank). ``weights``: configured targets per
    bucket; buckets of weight 0 are owned by no one.

    Stickiness is what keeps a membership change from moving more than it must: a join takes
    only what lifts the others above the bound (measured: 0.72-0.85 of a fair share W/N), a
    leave moves only the leaver's buckets; and the answer is a fixed point (computed again
    with its own owners as ``holders`` it is unchanged), so views that agree never hand a
    bucket back and forth. Without ``holders``, plain bounded loads (1.3-1.8 shares move)."""
    live = sorted(set(members))
    if not live:
        return {}
    total = sum(weights.values())
    bound = overload * total / len(live)
    cap = bound if math.isinf(bound) else math.ceil(bound)  # inf: plain rendezvous hashing
    load = dict.fromkeys(live, 0)
    owners: dict[int, str] = {}
    placed = sorted((b for b, w in weights.items() if w > 0), key=lambda b: (-weights[b], b))
    for bucket in placed:
        holder = (holders or {}).get(bucket)
        if holder in load and load[holder] + weights[bucket] <= cap:
            load[holder] += weights[bucket]
            owners[bucket] = holder
    for bucket in placed:
        if bucket in owners:
            continue
        rank = rendezvous_rank(bucket, live)
        weight = weights[bucket]
        roomy = [m for m in rank if load[m] + weight <= cap]
        holder = (holders or {}).get(bucket)
        if holder in load:
            # Shed by a live holder over the bound (a member joined): to the least loaded
            # with room, so the newcomer takes the spill rather than another old member.
            roomy.sort(key=lambda m: load[m])  # stable: equals stay in rank order
        # With room nowhere (the bound leaves less room than the buckets' sizes need), to
        # the least loaded, its holder first among equals: a spill that must go over the
        # bound somewhere stays where it is rather than move to another member as full.
        owner = roomy[0] if roomy else min(rank, key=lambda m: (load[m], m != holder))
        load[owner] += weight
        owners[bucket] = owner
    chosen: dict[int, Preference] = {}
    for bucket in placed:
        owner = owners[bucket]
        chosen[bucket] = Preference(owner=owner, successor=next(
            (m for m in rendezvous_rank(bucket, live) if m != owner), None))
    return chosen


def warm_buckets(weights: Mapping[int, int], members: Iterable[str], *, me: str,
                 holders: Mapping[int, str], standby: bool = True) -> frozenset[int]:
    """The buckets member ``me`` keeps its caches warm for: those it holds or is preferred
    for now, and its standby, those it would be preferred for if any one other member left
    (so a failover finds its targets' pods already cached). ``members``: the live members,
    ready or not (``me`` counts as one: it becomes ready once its caches are); ``holders``:
    who holds each bucket's Lease now.

    About 2/N of the buckets in a ring of N: its own share, and a 1/(N-1) share of each
    other member's. Two members leaving at once can give it a bucket it does not cache; that
    bucket's first pass then waits for a relist. Without ``standby`` (``standby = "none"``),
    its own share only (1/N): every inherited bucket waits for that relist."""
    live = sorted(set(members) | {me})
    current = preferences(weights, live, holders=holders)
    warm = {b for b, p in current.items() if p.owner == me}
    warm.update(b for b, holder in holders.items() if holder == me and weights.get(b, 0) > 0)
    for gone in live if standby else ():
        if gone == me:
            continue
        rest = [m for m in live if m != gone]
        kept = {b: h for b, h in holders.items() if h != gone}
        warm.update(b for b, p in preferences(weights, rest, holders=kept).items()
                    if p.owner == me)
    return frozenset(warm)


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketLease:
    """What a member saw of a bucket's Lease."""

    holder: str
    """The holding member's incarnation; "" once released (or never held)."""
    handed_to: str = ""
    """Set by a release: the member the holder handed the bucket to."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HolderView:
    """What a member saw of the holder's member Lease."""

    evicted: bool = False
    """Its holder field was emptied by an eviction (a CAS by some valid member, §4.3 M4)."""
    absent_since: float | None = None
    """Monotonic instant (the observer's) since which the member Lease has been missing
    from the observer's view; None while it exists."""


def claimable(lease: BucketLease | None, holder: HolderView, *, now: float,
              lease_duration: float) -> bool:
    """Rule C (§4.4): a bucket may be claimed if its Lease is absent or released, or its
    holder's member Lease was evicted, or has been absent for at least a lease duration in
    this observer's view (deleted by hand). A live holder's bucket never is."""
    if lease is None or lease.holder == "" or holder.evicted:
        return True
    return holder.absent_since is not None and now - holder.absent_since >= lease_duration


def claim_delay(lease: BucketLease | None, *, me: str, preferred: str,
                retry_period: float) -> float:
    """How long after a bucket became claimable ``me`` waits before claiming it: at once if
    it was handed to ``me``, or is ``me``'s by preference and was handed to no one else;
    otherwise ``2 * retry_period``, so a claim still happens when views of the ring disagree
    or the member it was meant for is slow. A hand-over's receiver comes first even for a
    member that prefers itself: its view may not yet show the receiver ready (a join), and
    racing it would take the newcomer's share back."""
    if lease is not None and lease.handed_to:
        return 0.0 if lease.handed_to == me else 2 * retry_period
    return 0.0 if me == preferred else 2 * retry_period


@dataclass(frozen=True, slots=True, kw_only=True)
class Timings:
    """``lease_duration`` > ``renew_deadline`` > 0 < ``retry_period`` (§5.1; defaults 3, 2, 1)."""

    lease_duration: float = 3.0
    renew_deadline: float = 2.0
    retry_period: float = 1.0

    def problem(self) -> str | None:
        """Why these timings cannot fence safely, or None (the config's rule, one copy)."""
        if min(self.lease_duration, self.renew_deadline, self.retry_period) <= 0:
            return "leaseDuration, renewDeadline and retryPeriod must be positive"
        problem = ShardingSettings(lease_duration=self.lease_duration,
                                   renew_deadline=self.renew_deadline,
                                   retry_period=self.retry_period).timing_problem()
        return None if problem is None else f"{problem[0]}: {problem[1]}"

    @classmethod
    def of(cls, settings: ShardingSettings) -> Timings:
        return cls(lease_duration=settings.lease_duration,
                   renew_deadline=settings.renew_deadline, retry_period=settings.retry_period)

    @property
    def rate_tolerance(self) -> float:
        """How much faster an observer's clock may run than the holder's (local seconds per
        real second, ratio) before an eviction could land while the holder still trusts
        itself: ``LD / RD`` (M4's argument)."""
        return self.lease_duration / self.renew_deadline


def renewed(last_ok_send: float | None, sent_at: float) -> float:
    """M1: a successful renewal sent at ``sent_at`` (holder's monotonic clock, read before
    the request went out) extends validity from its send, never from its answer; a late answer
    to an older renewal never moves it back."""
    return sent_at if last_ok_send is None else max(last_ok_send, sent_at)


SINGLE_LEADER_NOT_READ = "(not read yet)"
"""Who holds the single-leader Lease of the ring's name, before it was first read: the ring
waits as if one did (design §4.6)."""


def valid(*, now: float, last_ok_send: float | None, evicted: bool,
          renew_deadline: float) -> bool:
    """M2: a member may write while not evicted and its last successful renewal was sent
    less than ``renew_deadline`` ago on its own monotonic clock."""
    return not evicted and last_ok_send is not None and now - last_ok_send < renew_deadline


@dataclass(frozen=True, slots=True)
class Sighting:
    """M3: a member Lease's resourceVersion and when (observer's monotonic clock) this
    observer first saw it."""

    resource_version: str
    first_seen: float


def sighted(previous: Sighting | None, resource_version: str, now: float) -> Sighting:
    """The sighting after seeing ``resource_version`` at ``now``: the clock restarts only
    when the version changed (a renewal), never on a re-read of the same version."""
    if previous is not None and previous.resource_version == resource_version:
        return previous
    return Sighting(resource_version, now)


def expired(sighting: Sighting, *, now: float, lease_duration: float,
            their_duration: float | None = None) -> bool:
    """M3: the member is evictable in this observer's view once its Lease has stayed
    unchanged for a lease duration, the longer of ours and the one it declares (a peer
    mid-rollout with a longer duration is respected)."""
    duration = max(lease_duration, their_duration or 0.0)
    return now - sighting.first_seen >= duration


def movement(before: Mapping[int, Preference], after: Mapping[int, Preference]) -> set[int]:
    """Buckets whose preferred owner differs between two views (for reports and tests)."""
    return {b for b in before.keys() | after.keys()
            if (p := before.get(b)) is None or (q := after.get(b)) is None or p.owner != q.owner}


def loads(chosen: Mapping[int, Preference], weights: Mapping[int, int],
          members: Sequence[str]) -> dict[str, int]:
    """Each member's total weight under ``chosen`` (0 for members given no bucket)."""
    total = dict.fromkeys(members, 0)
    for bucket, preference in chosen.items():
        total[preference.owner] = total.get(preference.owner, 0) + weights[bucket]
    return total
