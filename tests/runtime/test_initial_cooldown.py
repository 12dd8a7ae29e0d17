"""``initialCooldownPeriod`` counts from the daemon's start (config/README.md), or from the
target's first pass if that is later (a target a reload added), which the store keeps: a
ring move or a takeover does not start it again, a restart does. Before, it counted from
the first pass over each target state, and a bucket moved away and back (its states
dropped and read again) started it over: scale to zero came up to the whole initial
cooldown late (review); and counting a move from the run's start alone (a first fix) let a
target a reload added go to zero early (review)."""

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
from autoscaler.snapshot import decode
from tests.runtime.doubles import Clock, NoPods, QueueDepth, Quiet, Workload, targets

TABLE = """
[[autoscaler]]
namespace = "jobs"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "worker" }
minReplicas = 0
maxReplicas = 10
cooldownPeriod = "300s"
initialCooldownPeriod = "600s"
metrics = [{ type = "External", external = { metric = { name = "depth" }, target = { type = "AverageValue", averageValue = "10" }, query = "sum(depth)" } }]
"""
[WORKER] = list(parse_config(TABLE).targets)
[WITHOUT_INITIAL] = list(parse_config(TABLE.replace('initialCooldownPeriod = "600s"\n', ""))
                         .targets)
pytestmark = pytest.mark.asyncio


def daemon(cluster: Workload, clock: Clock, depth: QueueDepth) -> Reconciler:
    """A reconciler whose run starts now (``clock``)."""
    return Reconciler(scales=cluster, pods=NoPods(), metrics=depth, events=Quiet(),
                      owners=Quiet(), options=ReconcileOptions(), telemetry=DaemonMetrics(),
                      clock=clock)


async def read_history(reconciler: Reconciler, store: MemoryStateStore, clock: Clock,
                       keys: list[str]) -> HistoryKeeper:
    """A keeper over ``store`` (a start, a claim, a takeover): it reads the history of
    ``keys`` and writes every pass's."""
    keeper = HistoryKeeper(store, reconciler.states, clock=clock, retry_wait=wait_none())
    reconciler.options = ReconcileOptions(persist=keeper.persist)
    await keeper.restore(keys)
    return keeper


async def one_pass(reconciler: Reconciler) -> None:
    async with asyncio.timeout(10):
        await reconciler.run_pass([WORKER], deadline=time.monotonic() + 5)
        await asyncio.sleep(0.01)


async def to_zero_at(reconciler: Reconciler, cluster: Workload, clock: Clock, moment: float,
                     *, not_before: tuple[float, ...]) -> None:
    """Passes at each of ``not_before`` leave the target up; the one at ``moment`` takes it
    to 0."""
    for now in not_before:
        clock.now = now
        await one_pass(reconciler)
        assert cluster.replicas > 0, now
    clock.now = moment
    await one_pass(reconciler)
    assert cluster.replicas == 0


async def added_at_1000(cluster: Workload, clock: Clock, store: MemoryStateStore
                        ) -> tuple[Reconciler, HistoryKeeper]:
    """A run started at 0 over ``store``; a reload adds the target, inactive, at 1000 (its
    first pass)."""
    clock.now = 0.0
    reconciler = daemon(cluster, clock, QueueDepth(0))
    keeper = await read_history(reconciler, store, clock, [])
    clock.now = 1_000.0
    await one_pass(reconciler)
    return reconciler, keeper


async def test_a_move_does_not_start_the_initial_cooldown_again() -> None:
    """Active at 1000 (this run's start), inactive from 1100; at 1650 the target's bucket
    moves away and back (its state dropped, its history read again by a new claim's
    keeper). At 1700 the cooldown (1000 + 300) and the initial cooldown (1000 + 600) have
    both passed: the target goes to 0 (before: held until 2300, 600 s after the first
    pass following the move)."""
    cluster, clock, depth, store = Workload(replicas=2), Clock(), QueueDepth(20), \
        MemoryStateStore()
    reconciler = daemon(cluster, clock, depth)
    await read_history(reconciler, store, clock, [WORKER.key])
    await one_pass(reconciler)
    depth.units = 0
    clock.now = 1_100.0
    await one_pass(reconciler)
    assert cluster.replicas == 2

    clock.now = 1_650.0
    reconciler.remove(WORKER.key)  # the bucket lost: its state dropped
    await read_history(reconciler, store, clock, [WORKER.key])  # claimed again: read
    assert reconciler.states[WORKER.key].zero.last_active is not None

    clock.now = 1_700.0
    await one_pass(reconciler)
    assert cluster.replicas == 0, reconciler.states[WORKER.key].idle_until


async def test_a_target_first_seen_after_the_start_waits_its_whole_initial_cooldown() -> None:
    """The run started at 0; the target (nothing on record: a reload added it) is first seen,
    inactive, at 1000: not at 0 before 1600 (1000 + 600), at 0 from then on."""
    cluster, clock, depth = Workload(replicas=2), Clock(), QueueDepth(0)
    clock.now = 0.0
    reconciler = daemon(cluster, clock, depth)
    await to_zero_at(reconciler, cluster, clock, 1_600.0, not_before=(1_000.0, 1_400.0, 1_599.0))


async def test_a_target_added_after_the_start_keeps_its_initial_cooldown_across_a_move() -> None:
    """The run started at 0; a reload adds the target at 1000 (first pass, inactive); at
    1100 its bucket moves away and back. Its first pass is kept in the store (``"fs"``), so
    its initial cooldown still counts from 1000, not from the run's start: not at 0 at
    1400 (the cooldown has passed, the initial cooldown has not), at 0 from 1600."""
    cluster, clock, store = Workload(replicas=2), Clock(), MemoryStateStore()
    reconciler, keeper = await added_at_1000(cluster, clock, store)
    await keeper.persist()

    clock.now = 1_100.0
    reconciler.remove(WORKER.key)
    await read_history(reconciler, store, clock, [WORKER.key])
    assert reconciler.states[WORKER.key].first_seen == 1_000.0

    await to_zero_at(reconciler, cluster, clock, 1_600.0, not_before=(1_400.0,))


async def test_a_restart_counts_the_initial_cooldown_from_its_own_start() -> None:
    """As documented: a daemon started at 2000 over a store that says the target was first
    seen at 1000 holds it up until 2600 (its own start plus the initial cooldown)."""
    store = MemoryStateStore()
    first, clock = Workload(replicas=2), Clock()
    before = daemon(first, clock, QueueDepth(0))
    keeper = await read_history(before, store, clock, [WORKER.key])
    await one_pass(before)
    await keeper.persist()

    clock.now = 2_000.0
    cluster = Workload(replicas=2)
    after = daemon(cluster, clock, QueueDepth(0))
    await read_history(after, store, clock, [WORKER.key])
    await to_zero_at(after, cluster, clock, 2_600.0, not_before=(2_000.0, 2_599.0))


async def test_a_target_a_reload_adds_back_waits_its_initial_cooldown_again() -> None:
    """Removed at 1100 and added back at 2000 (its history kept for an hour): added again,
    it waits its initial cooldown again, as KEDA's does for a ScaledObject made again;
    not at 0 before 2600."""
    cluster, clock, store = Workload(replicas=2), Clock(), MemoryStateStore()
    reconciler, keeper = await added_at_1000(cluster, clock, store)
    clock.now = 1_100.0
    state = reconciler.remove(WORKER.key)
    assert state is not None
    keeper.retire(state)
    clock.now = 2_000.0
    keeper.revive(reconciler.state(WORKER.key))
    await to_zero_at(reconciler, cluster, clock, 2_600.0, not_before=(2_000.0, 2_599.0))


async def test_only_a_target_with_an_initial_cooldown_keeps_its_first_pass() -> None:
    """The store keeps ``"fs"`` only where it counts (10,000 targets: 117 KB of store
    would grow to 209 KB with it on every target)."""
    store = MemoryStateStore()
    clock = Clock()
    clock.now = 1_000.25
    reconciler = daemon(Workload(replicas=2), clock, QueueDepth(20))
    [web] = targets("web")
    keeper = await read_history(reconciler, store, clock, [WORKER.key, web.key])
    async with asyncio.timeout(10):
        await reconciler.run_pass([WORKER, web], deadline=time.monotonic() + 5)
    await keeper.persist()
    saved = decode(store._data).targets  # type: ignore[arg-type]
    assert saved[WORKER.key].first_seen == 1_000.25
    assert saved[web.key].first_seen is None


async def test_an_initial_cooldown_a_reload_adds_counts_from_the_first_pass() -> None:
    """The run and the target's first pass at 1000, no initial cooldown; active until 4400.
    At 4500 a reload gives it a 600 s initial cooldown, and it goes inactive: that cooldown
    counts from the daemon's start and the target's first pass (1000), long past, so the
    target goes to 0 once its cooldown has (4400 + 300), not at 4500 + 600 (review)."""
    cluster, clock, depth = Workload(replicas=2), Clock(), QueueDepth(20)
    reconciler = daemon(cluster, clock, depth)
    for now in (1_000.0, 4_400.0):
        clock.now = now
        async with asyncio.timeout(10):
            await reconciler.run_pass([WITHOUT_INITIAL], deadline=time.monotonic() + 5)
    assert WORKER.scale_to_zero is not None
    assert WORKER.scale_to_zero.initial_cooldown == 600
    depth.units = 0
    await to_zero_at(reconciler, cluster, clock, 4_700.0, not_before=(4_500.0, 4_699.0))
