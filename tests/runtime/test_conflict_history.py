"""A write conflict (409) met after the pass decided: the decision made again keeps what a
store conflict folded into the target's history meanwhile (another writer's steps), so no
step the behavior forbids follows and none of those steps is lost from the store; and a
write on its way that the 409 says landed stays counted even if the re-read fails."""
from __future__ import annotations

import asyncio
import time

import pytest
from tenacity import wait_none

from autoscaler.algorithm import History, ScaleEvent
from autoscaler.config import TargetConfig, parse_config
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.history import HistoryKeeper
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from autoscaler.snapshot import Intent, SavedTarget, Snapshot
from tests.runtime.doubles import Clock, Depths, Events, NoPods, Owners, Workload, depth
from tests.runtime.test_history import Shared
from tests.runtime.test_intents import WEB as POLICED

pytestmark = pytest.mark.asyncio

[WEB] = POLICED  # +2 pods per 60 s


async def after_their_step(target: TargetConfig, event: ScaleEvent, workload: Workload
                           ) -> tuple[Reconciler, HistoryKeeper, Shared]:
    """A reconciler whose history store holds another writer's (B's) ``event`` for
    ``target``, written after our read: our next save conflicts and folds it in."""
    clock = Clock()  # 1000.0
    store = Shared(reads=[None, Snapshot(targets={target.key: SavedTarget(
        history=History(scale_up_events=(event,)))}, clean=False, saved_at=990.0)])
    reconciler = Reconciler(
        scales=workload, pods=NoPods(), metrics=Depths({"web": depth(60)}), events=Events(),
        owners=Owners(), telemetry=DaemonMetrics(), clock=clock, options=ReconcileOptions())
    keeper = HistoryKeeper(store, reconciler.states, clock=clock, retry_wait=wait_none())
    reconciler.options = ReconcileOptions(persist=keeper.persist)
    await keeper.restore([target.key])
    store.before_save = ["theirs"]  # B wrote the store after our read: our save is a 409
    return reconciler, keeper, store


@pytest.mark.parametrize(("on_its_way", "theirs"), [(False, 4), (True, 5)],
                         ids=["a-new-decision", "a-new-decision-over-a-write-on-its-way"])
async def test_a_fold_in_before_the_409_is_kept_by_the_redecision(
        on_its_way: bool, theirs: int) -> None:
    """Another writer (B) scaled web 2 -> ``theirs`` at t=990 and put that step in the store.
    Our pass read web at 2 (rv 1) and decided 4 (Pods 2 per 60 s). Putting it on record
    conflicts in the store: B's event is folded into state.history. Our PUT is a 409 (web at
    ``theirs`` now): the re-decision must see B's step (period start 2, limit 4) and write
    nothing; with B's event dropped it writes 6: 2 -> 6 within 60 s."""
    b_event = ScaleEvent(change=theirs - 2, timestamp=990.0)
    workload = Workload(faults=[f"conflict->{theirs}"])
    reconciler, keeper, store = await after_their_step(WEB, b_event, workload)
    if on_its_way:  # our own earlier write 2 -> 4, not landed, still possibly on its way
        reconciler.state(WEB.key).intent = Intent(previous=2, desired=4,
                                                  resource_version="1", at=995.0)
    async with asyncio.timeout(10):
        await reconciler.run_pass([WEB], deadline=time.monotonic() + 5)
        await asyncio.sleep(0.01)
    assert keeper.conflicts == 1  # the fold-in happened, before our PUT
    # The behavior allows at most +2 within 60 s of B's step from 2: web stays at `theirs`.
    assert workload.replicas == theirs, workload.log
    # B's step, folded in, is still in memory and in the store.
    assert b_event in reconciler.states[WEB.key].history.scale_up_events
    assert b_event in store.saved[-1].targets[WEB.key].history.scale_up_events


async def test_a_paused_write_that_meets_a_409_keeps_a_fold_in() -> None:
    """Paused at 3 (config) with our earlier 2 -> 4 possibly on its way: the pass writes 3.
    Putting that on record folds B's step (2 -> 5 at 990) into state.history; the PUT is a
    409 (web at 5). _settle_paused gave _settling_first the history as it was at decision
    time, so the conflict sets state.history back to it: B's step is lost, in memory and,
    at the next write, in the store."""
    [paused] = list(parse_config("""
[[autoscaler]]
namespace = "shop"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "web" }
maxReplicas = 10
pausedReplicas = 3
metrics = [{ type = "External", external = { metric = { name = "depth" }, target = { type = "AverageValue", averageValue = "10" }, query = "sum(depth)" } }]
behavior = { scaleUp = { policies = [{ type = "Pods", value = 2, periodSeconds = 60 }] } }
""").targets)
    b_event = ScaleEvent(change=3, timestamp=990.0)
    workload = Workload(faults=["conflict->5"])
    reconciler, keeper, store = await after_their_step(paused, b_event, workload)
    reconciler.state(paused.key).intent = Intent(previous=2, desired=4, resource_version="1",
                                                 at=995.0)
    async with asyncio.timeout(10):
        await reconciler.run_pass([paused], deadline=time.monotonic() + 5)
        await asyncio.sleep(0.01)
    assert keeper.conflicts == 1
    assert workload.replicas == 3  # the pause holds
    assert b_event in reconciler.states[paused.key].history.scale_up_events
    assert b_event in store.saved[-1].targets[paused.key].history.scale_up_events


async def test_a_write_on_its_way_that_lands_is_counted_even_if_the_reread_fails() -> None:
    """Our earlier 2 -> 4 (rv 1) may be on its way; the pass writes 4 again over rv 1 and
    gets a 409 because that earlier write landed (web at 4, rv 2). _put clears the intent at
    the 409, before the fresh read; the read fails (a timeout): nothing settles the write on
    its way, nothing keeps it on record, so its step is never counted and the next pass takes
    2 -> 6 within 60 s (Pods 2 per 60 s)."""
    from autoscaler.errors import TransientError

    class Flaky(Workload):
        reads = 0

        async def get_scale(self, namespace, ref, *, fresh=False):  # type: ignore[no-untyped-def]
            self.reads += 1
            if self.reads == 2:
                self.log.append("get fails")
                raise TransientError("timed out")
            return await super().get_scale(namespace, ref, fresh=fresh)

    clock = Clock()
    workload = Flaky(faults=["conflict->4"])
    persisted: list[Intent | None] = []
    reconciler = Reconciler(
        scales=workload, pods=NoPods(), metrics=Depths({"web": depth(60)}), events=Events(),
        owners=Owners(), telemetry=DaemonMetrics(), clock=clock, options=ReconcileOptions())

    async def persist() -> None:
        persisted.append(reconciler.states[WEB.key].intent)
    reconciler.options = ReconcileOptions(persist=persist)
    reconciler.state(WEB.key).intent = Intent(previous=2, desired=4, resource_version="1",
                                              at=995.0)
    async with asyncio.timeout(10):
        await reconciler.run_pass([WEB], deadline=time.monotonic() + 5)
        await asyncio.sleep(0.01)
        # The 409 said the write on its way landed; the re-read failed: it stays pending.
        assert reconciler.states[WEB.key].intent is not None
        clock.now += 10
        await reconciler.run_pass([WEB], deadline=time.monotonic() + 5)
        await asyncio.sleep(0.01)
    assert workload.replicas == 4, workload.log
    assert [e.change for e in reconciler.states[WEB.key].history.scale_up_events] == [2]


async def test_a_second_409_keeps_what_the_first_one_folded_in() -> None:
    """Another writer's 2 -> 3 (at 990) is folded in as the pass goes on record; the PUT
    meets two 409s (web at 3). Both redos decide with that step: +2 per 60 s from 2 allows
    4, never 5."""
    b_event = ScaleEvent(change=1, timestamp=990.0)
    workload = Workload(faults=["conflict->3", "conflict->3"])
    reconciler, keeper, store = await after_their_step(WEB, b_event, workload)
    async with asyncio.timeout(10):
        await reconciler.run_pass([WEB], deadline=time.monotonic() + 5)
        await asyncio.sleep(0.01)
    assert keeper.conflicts == 1
    assert workload.replicas == 4, workload.log
    assert b_event in reconciler.states[WEB.key].history.scale_up_events
    assert b_event in store.saved[-1].targets[WEB.key].history.scale_up_events
