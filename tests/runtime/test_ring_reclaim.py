"""A bucket lost and claimed again while a pass of the earlier claim still runs (its metrics
fetch slow past the claim's drain): the claim's history read makes new target states, whose
restored intent that pass never read fresh. The pass writes nothing for them, and the
claim waits for it, and is made the moment it ends, rather than read the history under
it."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from autoscaler.algorithm import History, ScaleEvent
from autoscaler.config import parse_config
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime import ring, ring_member
from autoscaler.runtime.history import HistoryKeeper
from autoscaler.runtime.ports import FetchedMetrics
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from autoscaler.runtime.ring import BucketLease
from autoscaler.runtime.ring_member import ClaimState, RingMember, RingParts
from autoscaler.runtime.scheduler import Scheduler
from autoscaler.snapshot import decode
from tests.runtime.doubles import Clock, NoPods, Quiet, Workload, depth

WEB = list(parse_config("""
[[autoscaler]]
namespace = "shop"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "web" }
maxReplicas = 10
metrics = [{ type = "External", external = { metric = { name = "depth" }, target = { type = "AverageValue", averageValue = "10" }, query = "sum(depth)" } }]
behavior = { scaleUp = { stabilizationWindowSeconds = 0, policies = [{ type = "Pods", value = 2, periodSeconds = 60 }] } }
""").targets)
KEY = WEB[0].key
pytestmark = pytest.mark.asyncio


@dataclass
class Observed:
    lease: BucketLease
    epoch: int


@dataclass
class Leases:
    identity: str = "a"
    view: dict[int, Observed] = field(default_factory=dict)
    synced: asyncio.Event = field(default_factory=asyncio.Event)  # never set: no warming
    problem: str | None = None

    def get(self, bucket: int) -> Observed | None:
        return self.view.get(bucket)

    async def claim(self, bucket: int, observed: object, *, after: int) -> int:
        epoch = after + 1
        self.view[bucket] = Observed(BucketLease(holder=self.identity), epoch=epoch)
        return epoch


@dataclass
class Membership:
    incarnation: str = "a"
    view_synced_at: float | None = 0.0

    def valid(self) -> bool:
        return True

    def members(self) -> dict[str, bool]:
        return {"a": True}


@dataclass
class BucketStore:
    """One bucket's state object, in memory (stamp, load, save)."""
    data: bytes | None = None
    description: str = "memory bucket"

    async def stamp(self, owner: str, epoch: int, *, still_claimed: Any) -> Any:
        return None if self.data is None else decode(self.data)

    async def load(self) -> Any:
        return None if self.data is None else decode(self.data)

    async def save(self, data: bytes) -> None:
        self.data = data


class Metrics:
    """depth 40 (4 replicas) for the first pass; the second pass's fetch waits on ``gate``
    and then says depth 80 (8 replicas)."""
    def __init__(self) -> None:
        self.units, self.gate, self.entered = 40, asyncio.Event(), asyncio.Event()

    async def fetch_metrics(self, wanted: Any, *, deadline: float) -> FetchedMetrics:
        if self.units != 40:
            self.entered.set()
            await self.gate.wait()  # a slow Prometheus
        return FetchedMetrics(values={w.target.key: (depth(self.units),) for w in wanted}, pods={})


def ring_of(reconciler: Reconciler, store: BucketStore, clock: Clock,
            scheduler: Scheduler) -> tuple[RingMember, Leases]:
    leases, holder = Leases(), []

    async def cached(namespaces: Any, bound: float) -> bool:
        return True

    async def warm(namespaces: Any) -> None:
        return None

    member = RingMember(
        parts=RingParts(membership=Membership(), leases=leases,  # type: ignore[arg-type]
                        store=lambda bucket, fence: store,  # type: ignore[arg-type,return-value]
                        keeper=lambda st, scope, fence: HistoryKeeper(
                            st, reconciler.states, clock=clock, leader=fence, scope=scope)),
        timings=ring.Timings(), placement="namespace", targets=lambda: WEB,
        ready=lambda: True, run_now=lambda keys: None, gained=lambda keys: None,
        lost=lambda keys: [reconciler.remove(k) for k in keys], idle=scheduler.idle,
        warm=warm, cached=cached, monotonic=time.monotonic, telemetry=DaemonMetrics(),
        ring_name="r")
    holder.append(member)
    reconciler.options = ReconcileOptions(may_write=member.may_write, persist=member.persist)
    return member, leases


async def settled(scheduler: Scheduler) -> None:
    assert await scheduler.idle([KEY], 5.0)


async def test_a_claim_made_again_under_a_pass_of_the_earlier_one_waits_for_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Behavior: +2 pods per 60 s. Claim 1's first pass scales 2 -> 4 (the PUT lands, its
    answer is lost: the intent stays on record). 10 s later pass P reads the target fresh
    (2 -> 4 counted in its state), then waits on Prometheus. The bucket's Lease is deleted
    by hand before that count is on record; the ring claims the bucket again. Before the fix
    the claim read the history under P (the drain timed out, its answer ignored) and P
    decided on the new state, without the 2 -> 4 step: it wrote 4 -> 6, 10 s after 2 -> 4.
    Now the claim waits while P runs, P writes nothing, and the claim, made as P ends,
    reads the intent, which its first pass settles (counted): nothing more is written
    before the policy's period ends, and 6 once it has."""
    # A hand-over's drain, short: the claim's wait for P is not bounded by it (before, the
    # claim went on under P once it passed; then it failed and backed off up to 8 s).
    monkeypatch.setattr(ring_member, "HAND_OVER_DRAIN", 0.05)
    cluster = Workload(replicas=2, faults=["applied"])  # 1st PUT lands, its answer is lost
    clock, metrics, store = Clock(), Metrics(), BucketStore()
    reconciler = Reconciler(scales=cluster, pods=NoPods(), metrics=metrics, events=Quiet(),
                            owners=Quiet(), options=ReconcileOptions(), telemetry=DaemonMetrics(),
                            clock=clock)
    holder: list[RingMember] = []

    async def run_pass(targets: Any, deadline: float) -> None:
        await reconciler.run_pass(targets, deadline=deadline)

    def may_run(key: str) -> bool:
        return holder[0].may_run(key)

    scheduler = Scheduler(run_pass, may_run=may_run)
    scheduler.set_targets(WEB)
    member, leases = ring_of(reconciler, store, clock, scheduler)
    holder.append(member)
    bucket = member.bucket_of(WEB[0])

    async with asyncio.timeout(10):
        member._start_claim(bucket)
        await member.claims[bucket].task
        assert member.claims[bucket].state is ClaimState.ACTIVE
        await reconciler.run_pass(WEB, deadline=time.monotonic() + 5)
        assert cluster.replicas == 4
        assert decode(store.data).targets[KEY].intent is not None

        clock.now += 10
        metrics.units = 80  # 8 wanted; the policy allows 6 at 1060
        scheduler._start(WEB, 15.0, time.monotonic())  # pass P
        await metrics.entered.wait()
        assert reconciler.states[KEY].intent is None  # settled by P's fresh read, in memory

        leases.view.pop(bucket)  # the Lease deleted by hand: the bucket is dropped
        member._drop_lost()
        assert bucket not in member.claims
        member._start_claim(bucket)
        await asyncio.sleep(0.2)  # many upkeep ticks' worth: the claim waits for P
        assert member.claims[bucket].state is ClaimState.CLAIMING
        assert KEY not in reconciler.states  # no history read under P

        metrics.gate.set()  # P ends: its target's state is gone, it writes nothing
        await member.claims[bucket].task  # and the claim is made at once
        assert member.claims[bucket].state is ClaimState.ACTIVE
        assert reconciler.states[KEY].intent is not None  # the 2 -> 4 write, from the store
        scheduler._start(WEB, 15.0, time.monotonic())  # the claim's first pass
        await settled(scheduler)
        assert reconciler.states[KEY].intent is None
        [counted] = reconciler.states[KEY].history.scale_up_events
        assert counted.change == 2

        # Liveness: once the period of the 2 -> 4 step (counted when it was seen) ends, the
        # next pass takes 4 -> 6.
        clock.now = counted.timestamp + 60.5
        scheduler._start(WEB, 15.0, time.monotonic())
        await settled(scheduler)

    puts = [line for line in cluster.log if line.startswith("put")]
    assert puts == ["put 4 (applied)", "put 6 (ok)"], cluster.log


async def test_a_pass_drops_a_target_whose_state_was_made_anew_while_it_ran() -> None:
    """The rule the claim relies on, in the reconciler alone: a pass began with a target's
    state; meanwhile its history was read anew (a new state object, holding a write on
    record the pass never read fresh). The pass decides nothing for it and writes nothing:
    the next pass reads it fresh first."""
    cluster = Workload(replicas=4)
    clock, metrics = Clock(), Metrics()
    metrics.units = 80
    reconciler = Reconciler(scales=cluster, pods=NoPods(), metrics=metrics, events=Quiet(),
                            owners=Quiet(), options=ReconcileOptions(), telemetry=DaemonMetrics(),
                            clock=clock)
    async with asyncio.timeout(10):
        running = asyncio.create_task(reconciler.run_pass(WEB, deadline=time.monotonic() + 5))
        await metrics.entered.wait()
        old = reconciler.remove(KEY)
        fresh = reconciler.state(KEY)
        assert fresh is not old
        fresh.history = History(scale_up_events=(ScaleEvent(change=2, timestamp=995.0),))
        metrics.gate.set()
        await running
        assert cluster.log == [], "the pass wrote with a state it did not begin with"
        assert fresh.last_decision is None
        await reconciler.run_pass(WEB, deadline=time.monotonic() + 5)
    # The next pass decides on the new state: +2 per 60 s since the step at 995.
    assert [line for line in cluster.log if line.startswith("put")] == []
    assert reconciler.states[KEY].last_decision is not None
