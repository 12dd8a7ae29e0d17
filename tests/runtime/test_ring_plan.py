"""The ring's planner: rule C's claims and delays, hand-over for balance, and a model of a
whole ring (members with their own views, bucket Leases written by compare-and-swap) that
checks the two properties together: never two valid holders of a bucket, and every bucket
held again within a lease duration and a few retry periods after its holder dies."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from autoscaler.runtime import ring
from autoscaler.runtime.ring import BucketLease, HolderView
from autoscaler.runtime.ring_plan import (
    FORMATION_WAIT,
    MAX_RELEASES_IN_FLIGHT,
    Plan,
    RingPlanner,
    RingView,
)

TIMINGS = ring.Timings()  # LD 3 s, RD 2 s, RP 1 s


def view(**fields: object) -> RingView:
    base: dict[str, object] = {
        "me": "a", "now": 100.0, "valid": True, "ready": True,
        "members": {"a": True, "b": True}, "holders": {},
        "leases": {}, "weights": {1: 5, 2: 5}, "held": frozenset()}
    base.update(fields)
    return RingView(**base)  # type: ignore[arg-type]


def preferred_bucket(owner: str, members: list[str], weights: dict[int, int]) -> int:
    chosen = ring.preferences(weights, members)
    return next(b for b, p in sorted(chosen.items()) if p.owner == owner)


def test_a_member_claims_its_preferred_free_buckets_at_once() -> None:
    weights = dict.fromkeys(range(8), 1)
    planner = RingPlanner(TIMINGS)
    plan = planner.plan(view(weights=weights))
    mine = {b for b, p in ring.preferences(weights, ["a", "b"]).items() if p.owner == "a"}
    assert set(plan.claims) == mine
    assert set(plan.unowned) == set(weights)


def test_a_bucket_preferred_for_another_is_claimed_after_two_retry_periods() -> None:
    weights = dict.fromkeys(range(8), 1)
    theirs = preferred_bucket("b", ["a", "b"], weights)
    planner = RingPlanner(TIMINGS)
    assert theirs not in planner.plan(view(weights=weights)).claims
    assert theirs not in planner.plan(view(weights=weights, now=101.9)).claims
    assert theirs in planner.plan(view(weights=weights, now=102.0)).claims


def test_a_bucket_handed_to_us_is_claimed_at_once() -> None:
    weights = dict.fromkeys(range(8), 1)
    theirs = preferred_bucket("b", ["a", "b"], weights)
    lease = BucketLease(holder="", handed_to="a")
    plan = RingPlanner(TIMINGS).plan(view(weights=weights, leases={theirs: lease}))
    assert theirs in plan.claims


def test_a_live_holders_bucket_is_never_claimed() -> None:
    weights = {1: 5}
    planner = RingPlanner(TIMINGS)
    for now in (100.0, 110.0, 1000.0):
        plan = planner.plan(view(weights=weights, now=now, members={"a": True},
                                 leases={1: BucketLease(holder="b")}))
        assert plan == Plan()


@pytest.mark.parametrize("gone", ["evicted", "absent"])
def test_a_dead_holders_bucket_is_claimed(gone: str) -> None:
    weights = {1: 5}
    leases = {1: BucketLease(holder="b")}
    planner = RingPlanner(TIMINGS)
    if gone == "evicted":
        plan = planner.plan(view(weights=weights, members={"a": True},
                                 holders={"b": HolderView(evicted=True)}, leases=leases))
        assert plan.claims == (1,)
        return
    # A member Lease deleted by hand: free only once it has been missing a lease duration.
    absent = {"b": HolderView(absent_since=99.0)}
    assert planner.plan(view(weights=weights, members={"a": True}, holders=absent,
                             leases=leases, now=101.9)).claims == ()
    assert planner.plan(view(weights=weights, members={"a": True}, holders=absent,
                             leases=leases, now=102.0)).claims == (1,)


def owned_by(owner: str, members: list[str], weights: dict[int, int]) -> set[int]:
    return {b for b, p in ring.preferences(weights, members).items() if p.owner == owner}


def test_a_forming_ring_leaves_a_new_bucket_to_its_owner_while_that_member_syncs() -> None:
    """No Leases yet (a ring starting): the first ready member claims only what is its own
    among all live members, not the fleet; a member that never gets ready delays its
    buckets by FORMATION_WAIT at most (the liveness twin)."""
    weights = dict.fromkeys(range(16), 1)
    mine, theirs = owned_by("a", ["a", "b"], weights), owned_by("b", ["a", "b"], weights)
    assert mine
    assert theirs
    planner = RingPlanner(TIMINGS)
    syncing = {"a": True, "b": False}
    assert set(planner.plan(view(weights=weights, members=syncing)).claims) == mine
    late = planner.plan(view(weights=weights, members=syncing, now=100 + FORMATION_WAIT - 0.1))
    assert not set(late.claims) & theirs
    due = planner.plan(view(weights=weights, members=syncing, now=100 + FORMATION_WAIT))
    assert set(due.claims) == mine | theirs


def test_a_member_that_gets_ready_claims_its_new_buckets_before_the_others() -> None:
    """Once the owner is ready it claims at once; the others wait two retry periods more,
    then claim what is still free (it may have died on the way)."""
    weights = dict.fromkeys(range(16), 1)
    theirs = owned_by("b", ["a", "b"], weights)
    planner = RingPlanner(TIMINGS)
    planner.plan(view(weights=weights, members={"a": True, "b": False}))
    both = {"a": True, "b": True}
    for now in (110.0, 111.9):
        assert not set(planner.plan(view(weights=weights, members=both, now=now)).claims) & \
            theirs
    assert set(planner.plan(view(weights=weights, members=both, now=112.0)).claims) >= theirs
    owner = RingPlanner(TIMINGS).plan(view(me="b", weights=weights, members=both, now=110.0))
    assert set(owner.claims) == theirs


def test_a_bucket_held_before_never_waits_for_a_syncing_member() -> None:
    """Failover is not slowed by a member that is still syncing: a dead holder's buckets
    are claimed by the rules of failover whoever would own them once everyone is ready."""
    weights = dict.fromkeys(range(16), 1)
    leases = {b: BucketLease(holder="c") for b in weights}
    plan = RingPlanner(TIMINGS).plan(view(
        weights=weights, leases=leases, members={"a": True, "b": False},
        holders={"c": HolderView(evicted=True)}))
    assert set(plan.claims) == set(weights)


@pytest.mark.parametrize(("valid", "ready"), [(False, True), (True, False)])
def test_a_member_that_may_not_write_claims_and_releases_nothing(valid: bool,
                                                                 ready: bool) -> None:
    plan = RingPlanner(TIMINGS).plan(view(valid=valid, ready=ready, now=1000.0))
    assert plan.claims == ()
    assert plan.releases == ()
    assert plan.unowned == (1, 2)  # still said: the metric and the alert need it


def test_a_bucket_whose_lease_names_us_but_we_do_not_act_for_is_claimed_again() -> None:
    plan = RingPlanner(TIMINGS).plan(view(weights={1: 5}, leases={1: BucketLease(holder="a")}))
    assert plan.claims == (1,)
    assert plan.unowned == ()


def test_a_join_hands_over_after_the_preference_settles_a_few_at_a_time() -> None:
    weights = dict.fromkeys(range(40), 1)
    leases = {b: BucketLease(holder="a") for b in weights}
    planner = RingPlanner(TIMINGS)
    members = {"a": True, "b": True}
    first = planner.plan(view(weights=weights, leases=leases, held=frozenset(weights),
                              members=members))
    assert first.releases == ()  # the newcomer's preference must hold 2 retry periods first
    later = planner.plan(view(weights=weights, leases=leases, held=frozenset(weights),
                              members=members, now=102.0))
    assert len(later.releases) == MAX_RELEASES_IN_FLIGHT
    assert all(to == "b" for _, to in later.releases)
    busy = planner.plan(view(weights=weights, leases=leases, held=frozenset(weights),
                             members=members, now=103.0,
                             releasing=frozenset(b for b, _ in later.releases)))
    assert busy.releases == ()


def test_a_bucket_whose_targets_left_the_config_is_released() -> None:
    """A held bucket of weight 0 (a reload removed its targets) is released to no one, so
    its Lease does not name us forever; the others stay."""
    weights = {1: 5, 2: 0}
    leases = {1: BucketLease(holder="a"), 2: BucketLease(holder="a")}
    plan = RingPlanner(TIMINGS).plan(view(weights=weights, leases=leases,
                                          held=frozenset({1, 2}), members={"a": True}))
    assert plan.releases == ((2, ""),)
    assert plan.claims == ()


def test_no_hand_over_to_a_member_not_ready_nor_while_a_bucket_is_unowned() -> None:
    weights = dict.fromkeys(range(40), 1)
    held = frozenset(range(39))
    leases = {b: BucketLease(holder="a") for b in held}
    planner = RingPlanner(TIMINGS)
    for now in (100.0, 105.0):
        plan = planner.plan(view(weights=weights, leases=leases, held=held, now=now,
                                 members={"a": True, "b": True}))
        assert plan.releases == ()  # bucket 39 is unowned: failover first
    full = {b: BucketLease(holder="a") for b in weights}
    for now in (106.0, 110.0):
        plan = planner.plan(view(weights=weights, leases=full, held=frozenset(weights),
                                 now=now, members={"a": True, "b": False}))
        assert plan.releases == ()


# --- a model of the whole ring ------------------------------------------------------------

@dataclass
class Member:
    name: str
    planner: RingPlanner = field(default_factory=lambda: RingPlanner(TIMINGS))
    held: set[int] = field(default_factory=set)
    releasing: set[int] = field(default_factory=set)
    handing: dict[int, str] = field(default_factory=dict)
    alive: bool = True
    last_renewal: float = 0.0

    def valid(self, now: float) -> bool:
        return self.alive and now - self.last_renewal < TIMINGS.renew_deadline


@dataclass
class Ring:
    """Bucket Leases with compare-and-swap, members that renew every retry period while
    alive, and evictions of a member whose renewals stopped for a lease duration."""

    weights: dict[int, int]
    members: dict[str, Member] = field(default_factory=dict)
    leases: dict[int, tuple[BucketLease, int]] = field(default_factory=dict)
    evicted: set[str] = field(default_factory=set)
    seen_at: dict[str, float] = field(default_factory=dict)

    def cas(self, bucket: int, version: int, lease: BucketLease) -> bool:
        current = self.leases.get(bucket, (BucketLease(holder=""), 0))
        if current[1] != version:
            return False
        self.leases[bucket] = (lease, version + 1)
        return True

    def step(self, now: float, rng: random.Random) -> None:
        for member in self.members.values():
            if member.alive and member.name not in self.evicted:
                member.last_renewal = now
                self.seen_at[member.name] = now
        for name, seen in self.seen_at.items():
            if name not in self.evicted and now - seen >= TIMINGS.lease_duration:
                self.evicted.add(name)  # a valid peer's CAS on the member Lease
        order = list(self.members.values())
        rng.shuffle(order)
        stale = dict(self.leases)  # every member plans on the same view: claims race
        for member in order:
            if not member.alive:
                continue
            if member.name in self.evicted:
                member.held.clear()
                member.releasing.clear()
                continue
            snapshot = stale if rng.random() < 0.5 else dict(self.leases)
            plan = member.planner.plan(RingView(
                me=member.name, now=now, valid=member.valid(now), ready=True,
                members={m.name: True for m in self.members.values()
                         if m.name not in self.evicted and now - self.seen_at.get(
                             m.name, now) < TIMINGS.lease_duration},
                holders={name: ring.HolderView(evicted=True) for name in self.evicted},
                leases={b: lease for b, (lease, _) in snapshot.items()},
                weights=self.weights, held=frozenset(member.held),
                releasing=frozenset(member.releasing)))
            for bucket in plan.claims:
                version = snapshot.get(bucket, (None, 0))[1]
                if self.cas(bucket, version, BucketLease(holder=member.name)):
                    member.held.add(bucket)
            for bucket in list(member.releasing):
                version = self.leases[bucket][1]
                if self.cas(bucket, version,
                            BucketLease(holder="", handed_to=member.handing.pop(bucket))):
                    member.releasing.discard(bucket)
            for bucket, to in plan.releases:
                member.held.discard(bucket)
                member.releasing.add(bucket)
                member.handing[bucket] = to

    def valid_holders(self, bucket: int, now: float) -> list[str]:
        return [m.name for m in self.members.values()
                if bucket in m.held and m.valid(now) and m.name not in self.evicted]


@pytest.mark.parametrize("seed", range(20))
def test_a_ring_never_has_two_valid_holders_and_heals_within_the_bound(seed: int) -> None:
    rng = random.Random(seed)
    weights = {b: 1 + rng.randrange(10) for b in rng.sample(range(ring.BUCKETS), 40)}
    model = Ring(weights)
    for i in range(3):
        model.members[f"m{i}"] = Member(f"m{i}")
    step = TIMINGS.retry_period / 4
    now, killed_at = 0.0, None
    for tick in range(400):
        now = tick * step
        if tick == 120:  # kill one
            victim = rng.choice(sorted(model.members))
            model.members[victim].alive = False
            killed_at = now
        if tick == 240:  # a newcomer
            model.members["m9"] = Member("m9")
        model.step(now, rng)
        for bucket in weights:
            assert len(model.valid_holders(bucket, now)) <= 1, (tick, bucket)
        if killed_at is not None and now >= killed_at + TIMINGS.lease_duration + \
                4 * TIMINGS.retry_period and (tick < 240 or tick > 300):
            unheld = [b for b in weights if not model.valid_holders(b, now)
                      and not any(b in m.releasing for m in model.members.values())]
            assert unheld == [], (tick, unheld)
    loads = {m.name: sum(weights[b] for b in m.held) for m in model.members.values() if m.alive}
    cap = ring.OVERLOAD * sum(weights.values()) / len(loads)
    assert loads["m9"] > 0  # the newcomer got a share by hand-over
    assert max(loads.values()) <= cap + max(weights.values())


@pytest.mark.parametrize("seed", range(40))
def test_survivors_that_see_the_claims_in_their_own_order_claim_every_bucket_at_once(
        seed: int) -> None:
    """A failover's claims land one by one: a survivor that plans after some of the other's
    claims must still place the failed holder's buckets as the other did, or a bucket each
    prefers for the other waits two retry periods (SIGSTOP rounds of bench/ring_failover.py
    took 6.5-6.7 s so). Here ``a`` plans first and claims, ``b`` plans over ``a``'s claims
    and claims, then both plan once more a tick later: nothing of ``c``'s may be left."""
    rng = random.Random(seed)
    weights = {b: 1 + rng.randrange(60) for b in rng.sample(range(ring.BUCKETS), 150)}
    holders = {b: p.owner for b, p in ring.preferences(weights, ["a", "b", "c"]).items()}
    leases = {b: BucketLease(holder=h) for b, h in holders.items()}
    planners = {"a": RingPlanner(TIMINGS), "b": RingPlanner(TIMINGS)}

    def plan_and_claim(me: str, now: float) -> None:
        plan = planners[me].plan(view(
            me=me, now=now, members={"a": True, "b": True},
            holders={"c": HolderView(evicted=True)}, leases=dict(leases), weights=weights,
            held=frozenset(b for b, lease in leases.items() if lease.holder == me)))
        for bucket in plan.claims:  # each a CAS that wins: no one else claimed it
            leases[bucket] = BucketLease(holder=me)

    plan_and_claim("a", 100.0)
    plan_and_claim("b", 100.05)
    plan_and_claim("a", 100.25)
    plan_and_claim("b", 100.3)
    left = sorted(b for b, lease in leases.items() if lease.holder == "c")
    assert left == [], f"still free after the survivors' first ticks: {left}"


def test_the_preference_follows_every_change_of_its_inputs() -> None:
    """Kept between ticks while the weights, ready members and holders stay: any change of
    one (a weights dict changed in place too) gives what a fresh computation gives."""
    weights = {b: 1 + b % 3 for b in range(16)}
    planner = RingPlanner(TIMINGS)
    views = [
        view(weights=weights),
        view(weights=weights, now=100.25),
        view(weights=weights, leases={3: BucketLease(holder="b")}),
        view(weights=weights, members={"a": True, "b": True, "c": True}),
        view(weights=weights, members={"a": True, "b": False, "c": True}),
    ]
    for each in views:
        ready = [m for m, is_ready in each.members.items() if is_ready]
        holders = {b: lease.holder for b, lease in each.leases.items() if lease.holder}
        assert planner.preference(each) == ring.preferences(weights, ready, holders=holders)
    weights[5] = 40  # in place
    assert planner.preference(views[-1]) == ring.preferences(weights, ["a", "c"])
