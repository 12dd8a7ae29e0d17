"""A ring member, tick by tick with its ports faked: its gauges of unowned buckets (when a
bucket counts as overdue, the ``AutoscalerTargetsUnowned`` alert) and the caches it keeps
warm for its standby (what ``/status`` says is pending)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from autoscaler.config import TargetConfig
from autoscaler.errors import FencedError
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime import ring
from autoscaler.runtime.history import Restored
from autoscaler.runtime.ring import BucketLease
from autoscaler.runtime.ring_member import (
    HISTORY_WRITES_AT_ONCE,
    WARM_SETTLE,
    Claim,
    ClaimState,
    RingMember,
    RingParts,
)
from autoscaler.runtime.ring_plan import FORMATION_WAIT
from tests.runtime.doubles import targets


@dataclass
class Observed:
    lease: BucketLease
    epoch: int = 1


@dataclass
class Leases:
    identity: str = "a"
    view: dict[int, Observed] = field(default_factory=dict)
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    problem: str | None = None

    def get(self, bucket: int) -> Observed | None:
        return self.view.get(bucket)


@dataclass
class Membership:
    incarnation: str = "a"
    live: tuple[str, ...] = ("a",)
    view_synced_at: float | None = 0.0
    renewing: bool = True

    def valid(self) -> bool:
        return self.renewing

    def members(self) -> dict[str, bool]:
        return dict.fromkeys(self.live, True)


def unused(*_: Any, **__: Any) -> Any:
    raise AssertionError("not used here")


def member(now: list[float], leases: Leases, *, membership: Membership | None = None,
           configured: list[TargetConfig] | None = None,
           warm: Callable[[frozenset[str]], Awaitable[None]] = unused,
           ready: Callable[[], bool] = lambda: True,
           lost: Callable[[Sequence[str]], None] = lambda _: None,
           standby: bool = True) -> RingMember:
    configured = targets("web") if configured is None else configured
    return RingMember(
        parts=RingParts(membership=membership or Membership(), leases=leases,  # type: ignore[arg-type]
                        store=unused, keeper=unused),
        timings=ring.Timings(), placement="namespace", targets=lambda: configured,
        ready=ready, run_now=unused, gained=unused, lost=lost, idle=unused, warm=warm,
        cached=unused, monotonic=lambda: now[0], telemetry=DaemonMetrics(), ring_name="r",
        standby=standby)


@dataclass
class ThreeMembers:
    """Member a of a ring of a, b and c over 30 namespaces, recording what it warms."""

    now: list[float] = field(default_factory=lambda: [100.0])
    leases: Leases = field(default_factory=Leases)
    membership: Membership = field(default_factory=lambda: Membership(live=("a", "b", "c")))
    warmed: list[frozenset[str]] = field(default_factory=list)
    spread: list[TargetConfig] = field(default_factory=lambda: [
        t for n in range(30) for t in targets("web", namespace=f"ns-{n:02d}")])

    async def warm(self, namespaces: frozenset[str]) -> None:
        self.warmed.append(frozenset(namespaces))

    def member(self, ready: Callable[[], bool] = lambda: True, *,
               standby: bool = True) -> RingMember:
        self.leases.synced.set()
        return member(self.now, self.leases, membership=self.membership,
                      configured=self.spread, warm=self.warm, ready=ready, standby=standby)


@pytest.fixture
def three() -> ThreeMembers:
    return ThreeMembers()


def overdue(subject: RingMember) -> float:
    value = subject.telemetry.registry.get_sample_value(
        "autoscaler_ring_overdue_buckets", {"ring": "r"})
    assert value is not None
    return value


@pytest.mark.parametrize(("held_before", "wait"), [(True, 0.0), (False, FORMATION_WAIT)],
                         ids=["held-before", "never-held"])
def test_an_unowned_bucket_is_overdue_a_lease_duration_and_two_passes_after(
        held_before: bool, wait: float) -> None:
    """A bucket never held may also wait FORMATION_WAIT for its owner to sync."""
    now, leases = [100.0], Leases()
    subject = member(now, leases)
    (bucket,) = {subject.bucket_of(t) for t in targets("web")}
    if held_before:
        leases.view[bucket] = Observed(BucketLease(holder=""))  # released
    bound = ring.Timings().lease_duration + 2 * 15.0 + wait  # 15 s: the targets' period
    subject._report((bucket,))
    now[0] = 100.0 + bound
    subject._report((bucket,))
    assert overdue(subject) == 0
    now[0] += 0.1
    subject._report((bucket,))
    assert overdue(subject) == 1


async def test_a_standby_that_goes_back_to_what_is_cached_wants_nothing_more(
        three: ThreeMembers) -> None:
    """A member leaves and comes back before the standby's settle time: the wish returns to
    what is cached, so nothing is pending (``/status`` said "N more once the ring settles"
    for ever), and the next change waits its own settle time, not the first one's."""
    now, membership, warmed = three.now, three.membership, three.warmed
    subject = three.member()
    await subject._keep_warm()
    assert len(warmed) == 1
    of_three = warmed[0]
    membership.live = ("a", "b")  # c is gone: a's standby grows (it inherits more)
    now[0] = 101.0
    await subject._keep_warm()
    assert len(warmed) == 1  # only the standby changed: after the settle time
    assert subject._standby_pending() > 0
    membership.live = ("a", "b", "c")  # c is back before that
    now[0] = 102.0
    await subject._keep_warm()
    assert subject._standby_pending() == 0
    membership.live = ("a", "b")  # gone again: a new change, a new wait
    now[0] = 130.0
    await subject._keep_warm()
    assert warmed == [of_three]
    now[0] = 130.0 + 2 * WARM_SETTLE  # doubled at most, by the member's name
    await subject._keep_warm()
    assert len(warmed) == 2
    assert warmed[1] > of_three
    assert subject._standby_pending() == 0


@pytest.mark.parametrize("cause", ["a-bucket-unowned", "renewals-lapsing", "caches-not-synced"])
async def test_a_standby_grows_only_once_the_ring_has_been_steady_for_the_settle_time(
        cause: str, three: ThreeMembers) -> None:
    """c drops out of a's view (its renewals lapse on a struggling API server, say) and a's
    standby grows; while the ring is not steady (``cause``: a bucket without an owner, a's
    own renewals lapsing, a's caches not synced yet) a does not relist for it, however long
    that lasts, and once steady it waits the settle time again. Before, a widened once the
    wish was old enough: on a struggling server every member relisted its whole standby (at
    50,000 targets over 5, all 500 namespaces) and the ring never formed; a member whose own
    renewals had lapsed widened at once when they got through again."""
    now, membership, warmed = three.now, three.membership, three.warmed
    listing = [False]
    subject = three.member(ready=lambda: not listing[0])
    await subject._keep_warm()
    assert len(warmed) == 1

    def unsteady(on: bool) -> None:
        if cause == "a-bucket-unowned":
            subject.unowned = (7,) if on else ()
        elif cause == "renewals-lapsing":
            membership.renewing = not on
        else:
            listing[0] = on

    membership.live = ("a", "b")  # c is gone from a's view: a's standby grows
    now[0] = 101.0
    await subject._keep_warm()
    unsteady(True)
    for tick in range(1, 13):  # a minute, a tick every 5 s
        now[0] = 101.0 + 5 * tick
        await subject._keep_warm()
    assert len(warmed) == 1
    unsteady(False)
    now[0] += 5
    steady_since = now[0]
    await subject._keep_warm()
    assert len(warmed) == 1  # steady again: the settle time counts from here
    assert subject._standby_pending() > 0
    now[0] = steady_since + 2 * WARM_SETTLE  # doubled at most, by the member's name
    await subject._keep_warm()
    assert len(warmed) == 2
    assert warmed[1] > warmed[0]


async def test_without_standby_a_member_caches_the_namespaces_of_its_share_only(
        three: ThreeMembers) -> None:
    """``daemon.sharding.standby = "none"``: a member caches the namespaces of the buckets
    it is preferred for, none of what it would inherit; with a warm standby it caches
    more."""
    subject = three.member(standby=False)
    await subject._keep_warm()
    preferred = ring.preferences(subject._layout().weights, ["a", "b", "c"])
    share = frozenset(t.namespace for t in three.spread
                      if preferred[subject.bucket_of(t)].owner == "a")
    assert three.warmed == [share]
    warm = ThreeMembers()
    await warm.member()._keep_warm()
    assert share < warm.warmed[0]


async def test_a_claim_adds_its_namespaces_at_once_and_leaves_the_standby_to_wait(
        three: ThreeMembers) -> None:
    """c drops out of a's view: a's standby grows, and waits for the ring to be steady. A
    bucket a claims meanwhile (outside what it caches) has its namespaces cached at once,
    and only those: before, the claim took the whole pending standby along, so after a
    join every member that claimed a released bucket relisted its standby at the same
    moment (10,000 targets over 5 on the simulated server: every renewal lapsed)."""
    now, membership, warmed, spread = three.now, three.membership, three.warmed, three.spread
    subject = three.member()
    await subject._keep_warm()
    first = warmed[0]
    membership.live = ("a", "b")
    now[0] = 101.0
    await subject._keep_warm()
    assert subject._standby_pending() > 0
    outside = next(t for t in spread if t.namespace not in first)
    bucket = subject.bucket_of(outside)
    subject.claims[bucket] = Claim(bucket=bucket, epoch=1)
    now[0] = 102.0
    await subject._keep_warm()
    assert warmed[1] == first | {outside.namespace}
    assert subject._standby_pending() > 0  # the standby still waits
    now[0] = 102.0 + 2 * WARM_SETTLE  # its settle time, from the wish the claim changed
    await subject._keep_warm()
    assert subject._standby_pending() == 0
    assert warmed[-1] > warmed[1]


async def test_a_claim_caches_its_namespaces_once_its_lease_write_succeeded(
        three: ThreeMembers) -> None:
    """At a leave the receivers race for each of the leaver's buckets; a member whose Lease
    write is still on its way (and may lose) relists nothing for it. Before, every attempt
    added its namespaces, and while the ring is unsteady the set only grows: at 50,000
    targets over 5 a receiver's cached namespaces went from 105 to 181 and back."""
    now, membership, warmed, spread = three.now, three.membership, three.warmed, three.spread
    subject = three.member(standby=False)
    await subject._keep_warm()
    first = warmed[0]
    membership.live = ("a", "b")
    now[0] = 101.0
    outside = next(t for t in spread if t.namespace not in first)
    bucket = subject.bucket_of(outside)
    attempt = subject.claims[bucket] = Claim(bucket=bucket, epoch=-1)  # its write under way
    await subject._keep_warm()
    assert warmed == [first]
    attempt.epoch = 1  # the write succeeded: the bucket is ours
    now[0] = 101.5
    await subject._keep_warm()
    assert warmed[1] == first | {outside.namespace}


def test_a_pass_that_ends_after_its_bucket_moved_leaves_no_series_behind() -> None:
    """A pass over a bucket's targets still running when the bucket moves (a hand-over
    whose drain timed out, a claim by another member) ends afterwards: the series it
    records are not exported here (the new owner exports them). Before, they came back on
    the old owner's /metrics: at 30,000 targets over 5, 688 targets were exported by two
    replicas for good, and the bench never saw the ring settle."""
    now, leases = [100.0], Leases()
    subject = member(now, leases)
    (key,) = [t.key for t in targets("web")]
    bucket = subject.bucket_of(targets("web")[0])
    claim = subject.claims[bucket] = Claim(bucket=bucket, epoch=1, state=ClaimState.ACTIVE)
    subject.telemetry.target(key).last_reconcile = 1.0  # a pass while we held it
    assert key in subject.telemetry.per_target
    subject._forget(claim)  # the bucket moved
    assert key not in subject.telemetry.per_target
    subject.telemetry.target(key).last_reconcile = 2.0  # the pass in flight ends
    assert key not in subject.telemetry.per_target


@pytest.mark.parametrize("how", ["lease-names-another", "claim-failed"])
def test_the_targets_of_a_bucket_no_longer_held_are_let_go(how: str) -> None:
    """Their states (each with its last decision and per-pod samples) are dropped with the
    bucket: a member keeps the targets it holds now, not every one it held while the ring
    formed or before a hand-over. A later claim reads their history afresh."""
    now, leases, lost = [100.0], Leases(), []
    subject = member(now, leases, lost=lost.append)
    (key,) = [t.key for t in targets("web")]
    bucket = subject.bucket_of(targets("web")[0])
    claim = subject.claims[bucket] = Claim(bucket=bucket, epoch=1, state=ClaimState.ACTIVE)
    if how == "lease-names-another":
        leases.view[bucket] = Observed(BucketLease(holder="b"), epoch=2)
        subject._drop_lost()
    else:
        subject._failed(claim, "someone else wrote its Lease first")
    assert lost == [[key]]
    assert bucket not in subject.claims


@dataclass
class StartsOverOnceRead(Membership):
    """Evicted as "a"; its loop (another thread) starts over as "b" right after the ring's
    thread has read that."""

    ready: bool = False
    asked: list[str] = field(default_factory=list)

    @property
    def evicted(self) -> bool:
        was = self.incarnation == "a"
        self.incarnation = "b"
        return was

    def rejoin(self, incarnation: str) -> None:
        self.asked.append(incarnation)


async def test_a_rejoin_names_the_incarnation_seen_evicted() -> None:
    """The ring asks for a rejoin naming the incarnation it read before ``evicted``: the
    membership loop may start over between the two reads, and a request naming the new
    incarnation would make it start over again."""
    membership = StartsOverOnceRead()
    subject = member([100.0], Leases(), membership=membership)
    await subject._tick()
    assert membership.asked == ["a"]


def test_the_scheduler_asks_about_the_targets_of_active_buckets_only(
        three: ThreeMembers) -> None:
    """``candidates()`` holds every target ``may_run`` lets run and none of a bucket we do
    not hold active (claiming, handing over, or someone else's): the scheduler asks the
    gate about these only, not about the whole fleet at every wake."""
    subject = three.member()
    restored = asyncio.Event()
    restored.set()
    keeper: Any = SimpleNamespace(restored=restored)  # a restored history, all the gate asks
    buckets = sorted({subject.bucket_of(t) for t in three.spread})
    states = [ClaimState.ACTIVE, ClaimState.ACTIVE, ClaimState.CLAIMING, ClaimState.RELEASING]
    for bucket, state in zip(buckets, states, strict=False):
        subject.claims[bucket] = Claim(bucket=bucket, epoch=1, state=state, keeper=keeper)
        three.leases.view[bucket] = Observed(BucketLease(holder="a"))
    active = {t.key for t in three.spread if subject.bucket_of(t) in buckets[:2]}
    assert len(buckets) > len(states)
    assert active
    assert {t.key for t in three.spread if subject.may_run(t.key)} == active
    assert subject.candidates() == active
    three.membership.renewing = False  # the fence closes: the gate, not the candidates, says so
    assert subject.candidates() == active
    assert not any(subject.may_run(key) for key in subject.candidates())
    # Kept between calls, and made again as soon as a claim changes state or the list does.
    subject.claims[buckets[2]].state = ClaimState.ACTIVE
    subject.claims[buckets[0]].state = ClaimState.RELEASING
    moved = {t.key for t in three.spread if subject.bucket_of(t) in buckets[1:3]}
    assert subject.candidates() == moved
    reloaded = three.spread[:1]
    subject.targets = lambda: reloaded
    assert subject.candidates() == moved & {reloaded[0].key}


@dataclass
class Claimable(Leases):
    """Lease writes that always win: the claimed bucket's Lease is ours at epoch 1."""

    async def claim(self, bucket: int, observed: object, *, after: int) -> int:
        self.view[bucket] = Observed(BucketLease(holder=self.identity), epoch=1)
        return 1


@dataclass
class EmptyStore:
    async def stamp(self, holder: str, epoch: int, *, still_claimed: Callable[[], bool]) -> None:
        return None


@dataclass
class FreshKeeper:
    restored: asyncio.Event = field(default_factory=asyncio.Event)

    async def restore(self, keys: Callable[[], object]) -> Restored:
        self.restored.set()
        return Restored(targets=0, retired=0, clean=True)

    def invalidate(self) -> None:
        self.restored.clear()


async def test_a_target_added_while_its_bucket_is_claimed_runs_when_the_claim_ends(
        three: ThreeMembers) -> None:
    """A reload adds a target to a bucket whose claim waits for its caches: the claim's
    first pass includes it. Before, the claim ran the keys it had read before that wait,
    and the ring never pokes the scheduler, so the added target waited for its group's
    next start: up to a period late."""
    subject = three.member()
    leases = Claimable()
    subject.parts = RingParts(membership=three.membership, leases=leases,  # type: ignore[arg-type]
                              store=lambda bucket, fence: EmptyStore(),  # type: ignore[arg-type,return-value]
                              keeper=lambda store, keys, fence: FreshKeeper())  # type: ignore[arg-type,return-value]
    first = three.spread[0]
    bucket = subject.bucket_of(first)
    (added,) = targets("added", namespace=first.namespace)  # placed by namespace
    assert subject.bucket_of(added) == bucket
    ran: list[list[str]] = []

    async def cached(namespaces: Sequence[str], bound: float) -> bool:
        subject.targets = lambda: [*three.spread, added]  # the reload, during the wait
        return True

    async def idle(keys: Sequence[str], bound: float) -> bool:
        return True

    subject.cached, subject.idle = cached, idle
    subject.run_now = lambda keys: ran.append(list(keys))
    subject.gained = lambda keys: None
    subject._start_claim(bucket)
    claim = subject.claims[bucket]
    assert claim.task is not None
    await claim.task
    assert claim.state is ClaimState.ACTIVE
    assert ran == [subject._keys(bucket)]
    assert added.key in ran[0]
    assert added.key in claim.awaiting_pass


@dataclass
class KeeperFencedOnceReleased:
    """A bucket's history keeper whose write waits, then finds another writer's stamp."""

    restored: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.restored.set()

    async def persist(self, clean: bool = False) -> None:
        await self.release.wait()
        raise FencedError("another writer stamped the bucket's state")

    def invalidate(self) -> None:
        pass


async def test_a_bucket_lost_while_its_history_is_written_is_let_go_once() -> None:
    """A bucket whose Lease names another member while a pass writes its history is dropped
    then; the write's refusal that follows does not drop it again. Before, the loss was
    logged and counted in ``ring_moves{reason="lost"}`` twice."""
    now, leases = [100.0], Leases()
    subject = member(now, leases)
    bucket = subject.bucket_of(targets("web")[0])
    keeper = KeeperFencedOnceReleased()
    subject.claims[bucket] = Claim(bucket=bucket, epoch=1, state=ClaimState.ACTIVE,
                                   keeper=keeper)  # type: ignore[arg-type]
    persisting = asyncio.create_task(subject.persist())
    await asyncio.sleep(0)  # the history write is on its way
    leases.view[bucket] = Observed(BucketLease(holder="b"), epoch=2)
    subject._drop_lost()
    keeper.release.set()
    await persisting  # the refusal of a bucket already let go fails nothing
    assert subject.telemetry.registry.get_sample_value(
        "autoscaler_ring_moves_total", {"ring": "r", "reason": "lost"}) == 1


@dataclass
class CountingKeeper:
    """A bucket's history keeper that counts the writes in flight across all its peers."""

    flight: list[int]
    """[in flight now, most at once, written]: shared by the keepers of one member."""
    restored: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.restored.set()

    async def persist(self, clean: bool = False) -> None:
        self.flight[0] += 1
        self.flight[1] = max(self.flight[1], self.flight[0])
        for _ in range(3):  # a request's round trip
            await asyncio.sleep(0)
        self.flight[0] -= 1
        self.flight[2] += 1


async def test_a_member_writes_a_bounded_number_of_bucket_histories_at_once() -> None:
    """A member holding many buckets writes each one's history, at most
    ``HISTORY_WRITES_AT_ONCE`` at a time. Before, one ``gather`` sent them all at once: each
    write in flight needs its own connection, and each TLS connection a 256 KiB buffer (~80
    connections at every pass of a member holding ~75 buckets)."""
    now, leases = [100.0], Leases()
    subject = member(now, leases)
    flight = [0, 0, 0]
    held = 5 * HISTORY_WRITES_AT_ONCE
    for bucket in range(held):
        subject.claims[bucket] = Claim(bucket=bucket, epoch=1, state=ClaimState.ACTIVE,
                                       keeper=CountingKeeper(flight))  # type: ignore[arg-type]
    await asyncio.gather(subject.persist(), subject.persist())  # two passes' writes overlap
    assert flight[1] == HISTORY_WRITES_AT_ONCE
    assert flight[2] == 2 * held  # every bucket written, for each pass


@pytest.mark.parametrize("standby", [True, False], ids=["warm", "none"])
async def test_a_member_that_saw_itself_alone_narrows_its_caches_once_its_wish_held(
        standby: bool, three: ThreeMembers) -> None:
    """The first member of a ring to start sees no peer yet and caches the whole fleet (it
    would be preferred for everything). Once b and c appear and its wish has held for the
    settle time, it narrows to what a member of a ring of three caches, although the ring is
    still not steady (a bucket without an owner, as while a ring forms). Before, narrowing
    waited for a steady ring: at 50,000 targets over 5 the first member cached all 500
    namespaces for two minutes (445 MB; its peers 250-390). Not at once either: during a
    join the wish turns with each hand-over, and a claim relists what was dropped."""
    now, membership, warmed = three.now, three.membership, three.warmed
    membership.live = ("a",)
    subject = three.member(standby=standby)
    await subject._keep_warm()
    assert warmed == [frozenset(t.namespace for t in three.spread)]
    subject.unowned = (7,)  # the ring forming: not steady for as long as this test runs
    membership.live = ("a", "b", "c")
    now[0] += 1.0
    await subject._keep_warm()
    assert len(warmed) == 1  # the wish is new
    now[0] += 2 * WARM_SETTLE  # doubled at most, by the member's name
    await subject._keep_warm()
    assert len(warmed) == 2
    of_three = ThreeMembers()
    await of_three.member(standby=standby)._keep_warm()
    assert warmed[1] == of_three.warmed[0] < warmed[0]


async def test_the_first_caches_wait_a_lease_duration_for_the_peers_that_started_too(
        three: ThreeMembers) -> None:
    """Replicas started together join within a second or two of each other. The first
    member's view of the ring syncs while it is alone in it: its first caches wait a lease
    duration after that, by when the others are in its view, and are its share of a ring
    of three. Before, it listed the whole fleet at once (10,000 targets over 5: 188 MB peak,
    its peers 150-157 MB). A member alone in its ring still caches everything then."""
    now, membership, warmed = three.now, three.membership, three.warmed
    membership.live, membership.view_synced_at = ("a",), now[0]
    subject = three.member()
    await subject._keep_warm()
    assert warmed == []
    membership.live = ("a", "b", "c")  # the others join
    now[0] += 1.0
    await subject._keep_warm()
    assert warmed == []
    now[0] += subject.timings.lease_duration
    await subject._keep_warm()
    of_three = ThreeMembers()
    await of_three.member()._keep_warm()
    assert warmed == of_three.warmed

    alone = ThreeMembers()
    alone.membership.live, alone.membership.view_synced_at = ("a",), alone.now[0]
    member_alone = alone.member()
    alone.now[0] += member_alone.timings.lease_duration
    await member_alone._keep_warm()
    assert alone.warmed == [frozenset(t.namespace for t in alone.spread)]
