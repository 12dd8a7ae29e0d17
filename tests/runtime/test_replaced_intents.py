"""A write on its way replaced by a newer one over the same resourceVersion (the load moved
before the first one's answer came): whichever of them lands is counted, whether the
daemon is killed (a fresh daemon restored from the bytes the store held at the kill) or
not. Before, the store and the state kept only the newer intent, so a late landing of the
earlier write read as someone else's count, its step went uncounted and the next pass
stepped past the policy (2 -> 4 -> 6 within seconds under +2 pods per 60 s)."""
from __future__ import annotations

import asyncio
import json
import time

import pytest
from tenacity import wait_none

from autoscaler.adapters.local_state import MemoryStateStore
from autoscaler.errors import TransientError
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.history import HistoryKeeper
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from autoscaler.snapshot import Intent, SavedTarget, _target_from_json, decode, encode_target
from tests.runtime.doubles import Clock, Depths, Events, NoPods, Owners, Workload, depth
from tests.runtime.test_intents import WEB as POLICED

pytestmark = pytest.mark.asyncio
[WEB] = POLICED  # scaleUp: +2 pods per 60 s


def daemon(store: MemoryStateStore, workload: Workload, clock: Clock,
           units: int) -> tuple[Reconciler, HistoryKeeper]:
    r = Reconciler(scales=workload, pods=NoPods(), metrics=Depths({"web": depth(units)}),
                   events=Events(), owners=Owners(), telemetry=DaemonMetrics(), clock=clock,
                   options=ReconcileOptions())
    k = HistoryKeeper(store, r.states, clock=clock, retry_wait=wait_none())
    r.options = ReconcileOptions(persist=k.persist)
    return r, k


async def one_pass(r: Reconciler, units: int | None = None) -> None:
    if units is not None:
        r.metrics = Depths({"web": depth(units)})
    async with asyncio.timeout(10):
        await r.run_pass([WEB], deadline=time.monotonic() + 5)
        await asyncio.sleep(0.01)


async def restart_and_scale(data: bytes | None, workload: Workload, clock: Clock) -> Reconciler:
    """The restart: a fresh daemon over the store's bytes at the crash; load wants 6."""
    store = MemoryStateStore()
    store._data = data
    r, k = daemon(store, workload, clock, 60)
    await k.restore([WEB.key])
    clock.now += 1
    await one_pass(r)
    return r


class Reread(Workload):
    """The fresh re-read after a 409 (``reread_fails``) raises; ``at_reread`` runs first."""
    fail_reread = False
    at_reread = None
    puts_seen = 0

    async def update_scale(self, namespace, ref, replicas, resource_version):
        self.puts_seen += 1
        return await super().update_scale(namespace, ref, replicas, resource_version)

    async def get_scale(self, namespace, ref, *, fresh=False):
        if self.puts_seen and self.log and "conflict" in self.log[-1]:
            if self.at_reread is not None:
                self.at_reread()
            if self.fail_reread:
                self.log.append("reread fails")
                raise TransientError("timed out")
        return await super().get_scale(namespace, ref, fresh=fresh)


async def setup_on_its_way() -> tuple[Clock, MemoryStateStore, Reread, Reconciler]:
    """t=1000: 2 -> 4 decided, PUT answer lost (not applied): I0 on record, may be on its way."""
    clock, store = Clock(), MemoryStateStore()
    workload = Reread(faults=["lost"])
    r, k = daemon(store, workload, clock, 40)
    await k.restore([WEB.key])
    await one_pass(r)
    assert r.states[WEB.key].intent == Intent(previous=2, desired=4, resource_version="1",
                                              at=1000.0)
    return clock, store, workload, r


async def test_a_kill_after_a_409_whose_reread_failed_keeps_the_earlier_step() -> None:
    """t=1001: load fell (3). The pass writes 2 -> 3 over rv 1 (I1 replaces I0 in the store);
    I0 lands first, so the PUT is a 409 (web at 4, rv 2). The re-read times out: memory holds
    I0, the store keeps I1, and nothing asks for a record (no ``known()`` on this path), so
    the store still holds I1 after the pass. A kill now; the restart reads web at 4:
    I1 (2 -> 3) is OVERRIDDEN, the 2 -> 4 step is lost, and +2/60 s lets 4 -> 6 at t=1002."""
    clock, store, workload, r = await setup_on_its_way()
    workload.faults, workload.fail_reread = ["conflict->4"], True
    clock.now += 1
    await one_pass(r, units=30)
    await asyncio.sleep(1.2)  # past LINGER: any record asked for would be made by now
    assert r.states[WEB.key].intent.desired == 4           # memory: I0
    on_record = decode(store._data).targets[WEB.key].intent
    assert on_record is not None
    assert on_record.desired == 3  # store: the 409'd I1
    # crash here, restart:
    r2 = await restart_and_scale(store._data, workload, clock)
    assert workload.replicas == 4, workload.log  # before: 6, 2 -> 4 -> 6 within 2 s
    assert [e.change for e in r2.states[WEB.key].history.scale_up_events] == [2]


async def test_a_kill_during_the_reread_after_a_409_keeps_the_earlier_step() -> None:
    """Same, the kill lands during the re-read after the 409 (the re-read succeeds)."""
    clock, store, workload, r = await setup_on_its_way()
    crash = {}
    workload.at_reread = lambda: crash.setdefault("data", store._data)
    workload.faults = ["conflict->4"]
    clock.now += 1
    await one_pass(r, units=30)
    assert decode(crash["data"]).targets[WEB.key].intent.desired == 3
    r2 = await restart_and_scale(crash["data"], workload, clock)
    assert workload.replicas == 4, workload.log  # before: 6
    assert [e.change for e in r2.states[WEB.key].history.scale_up_events] == [2]


async def test_a_kill_before_the_replacing_write_is_sent_keeps_a_late_landing() -> None:
    """Not the 409 window: the replacement itself. I1 (2 -> 3) is on record; the kill comes
    before its PUT; I0 (2 -> 4), still on its way, lands while the daemon restarts. The
    restart reads web at 4: I1 is OVERRIDDEN, 2 -> 4 is lost, 4 -> 6 follows."""
    clock, store, workload, r = await setup_on_its_way()
    crash = {}

    orig = workload.update_scale

    async def killed(namespace, ref, replicas, resource_version):
        crash.setdefault("data", store._data)
        raise asyncio.CancelledError  # the process is gone; nothing after this happens
    workload.update_scale = killed
    clock.now += 1
    with pytest.raises(asyncio.CancelledError):
        await one_pass(r, units=30)
    workload.update_scale = orig
    assert decode(crash["data"]).targets[WEB.key].intent.desired == 3
    workload.replicas, workload.version = 4, workload.version + 1  # I0 lands late
    r2 = await restart_and_scale(crash["data"], workload, clock)
    assert workload.replicas == 4, workload.log  # before: 6
    assert [e.change for e in r2.states[WEB.key].history.scale_up_events] == [2]


async def test_the_replacing_write_timing_out_while_the_earlier_lands_counts_it() -> None:
    """No kill at all: the pass's 2 -> 3 (I1, replacing I0) times out and did not land, but
    I0 (2 -> 4) lands meanwhile (rv 2). Memory and store hold only I1; the next read says
    OVERRIDDEN, 2 -> 4 is never counted, and +2/60 s lets 4 -> 6 a second later."""
    clock, _, workload, r = await setup_on_its_way()

    async def i0_lands_ours_times_out(namespace, ref, replicas, resource_version):
        workload.replicas, workload.version = 4, workload.version + 1
        workload.log.append(f"put {replicas} (timeout; I0 landed)")
        raise TransientError("timed out")
    orig, workload.update_scale = workload.update_scale, i0_lands_ours_times_out
    clock.now += 1
    await one_pass(r, units=30)
    workload.update_scale = orig
    clock.now += 1
    await one_pass(r, units=60)
    assert workload.replicas == 4, workload.log  # before: 6
    assert [e.change for e in r.states[WEB.key].history.scale_up_events] == [2]


async def test_the_replaced_counts_are_stored_beside_the_intent_and_optional() -> None:
    """``"wa"``: written only when there are any; a store without it (an older daemon's)
    reads as an intent that replaced nothing."""
    intent = Intent(previous=2, desired=3, resource_version="1", at=1000.0, also=(4,))
    text = encode_target(SavedTarget(intent=intent))
    assert '"wa":[4]' in text
    assert '"wa"' not in encode_target(SavedTarget(intent=Intent(
        previous=2, desired=3, resource_version="1", at=1000.0)))
    assert _target_from_json(json.loads(text)).intent == intent
    older = json.loads(text)
    del older["wa"]
    assert _target_from_json(older).intent == Intent(previous=2, desired=3,
                                                     resource_version="1", at=1000.0)
