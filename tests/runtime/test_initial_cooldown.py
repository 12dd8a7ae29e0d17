"""``initialCooldownPeriod`` counts from the daemon's start (config/README.md), not from a
move: a target whose history this run read from the store (a ring claim, a takeover, a
restart) was seen before, so its initial cooldown counts from this run's start. Before, a
bucket moved away and back (its states dropped and read again) started it over: scale to
zero came up to the whole initial cooldown late (review). A target this run sees first
(added by a reload) still waits the whole initial cooldown from its first pass."""

from __future__ import annotations

import asyncio
import time

import pytest
from tenacity import wait_none

from autoscaler.adapters.local_state import MemoryStateStore
from autoscaler.config import parse_config
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.history import HistoryKeeper
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from tests.runtime.doubles import Clock, NoPods, QueueDepth, Quiet, Workload

[WORKER] = list(parse_config("""
[[autoscaler]]
namespace = "jobs"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "worker" }
minReplicas = 0
maxReplicas = 10
cooldownPeriod = "300s"
initialCooldownPeriod = "600s"
metrics = [{ type = "External", external = { metric = { name = "depth" }, target = { type = "AverageValue", averageValue = "10" }, query = "sum(depth)" } }]
""").targets)
pytestmark = pytest.mark.asyncio


async def one_pass(reconciler: Reconciler) -> None:
    async with asyncio.timeout(10):
        await reconciler.run_pass([WORKER], deadline=time.monotonic() + 5)
        await asyncio.sleep(0.01)


async def test_a_move_does_not_start_the_initial_cooldown_again() -> None:
    """Active at 1000 (this run's start), inactive from 1100; at 1650 the target's bucket
    moves away and back (its state dropped, its history read again by a new claim's
    keeper). At 1700 the cooldown (1000 + 300) and the initial cooldown (1000 + 600) have
    both passed: the target goes to 0 (before: held until 2300, 600 s after the first
    pass following the move)."""
    cluster, clock, depth, store = Workload(replicas=2), Clock(), QueueDepth(20), \
        MemoryStateStore()
    reconciler = Reconciler(scales=cluster, pods=NoPods(), metrics=depth, events=Quiet(),
                            owners=Quiet(), options=ReconcileOptions(),
                            telemetry=DaemonMetrics(), clock=clock)
    keeper = HistoryKeeper(store, reconciler.states, clock=clock, retry_wait=wait_none())
    reconciler.options = ReconcileOptions(persist=keeper.persist)
    await keeper.restore([WORKER.key])
    await one_pass(reconciler)
    depth.units = 0
    clock.now = 1_100.0
    await one_pass(reconciler)
    assert cluster.replicas == 2

    clock.now = 1_650.0
    reconciler.remove(WORKER.key)  # the bucket lost: its state dropped
    claimed = HistoryKeeper(store, reconciler.states, clock=clock, retry_wait=wait_none())
    reconciler.options = ReconcileOptions(persist=claimed.persist)
    await claimed.restore([WORKER.key])  # and claimed again: its history read
    assert reconciler.states[WORKER.key].zero.last_active is not None

    clock.now = 1_700.0
    await one_pass(reconciler)
    assert cluster.replicas == 0, reconciler.states[WORKER.key].idle_until


async def test_a_target_first_seen_after_the_start_waits_its_whole_initial_cooldown() -> None:
    """The run started at 0; the target (nothing on record: a reload added it) is first seen,
    inactive, at 1000: not at 0 before 1600 (1000 + 600), at 0 from then on."""
    cluster, clock, depth = Workload(replicas=2), Clock(), QueueDepth(0)
    clock.now = 0.0
    reconciler = Reconciler(scales=cluster, pods=NoPods(), metrics=depth, events=Quiet(),
                            owners=Quiet(), options=ReconcileOptions(),
                            telemetry=DaemonMetrics(), clock=clock)
    for now in (1_000.0, 1_400.0, 1_599.0):
        clock.now = now
        await one_pass(reconciler)
        assert cluster.replicas > 0, now
    clock.now = 1_600.0
    await one_pass(reconciler)
    assert cluster.replicas == 0
