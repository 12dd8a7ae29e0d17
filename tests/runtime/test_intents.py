"""A scale write is on record before it is sent, and one whose outcome is unknown is settled
by a fresh read before the target's next decision.

The ``Workload`` double keeps the target's replicas and resourceVersion and can fail a
write before or after applying it, as a real API server behind a flaky network can."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import pytest

from autoscaler.config import parse_config
from autoscaler.errors import TransientError
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from autoscaler.snapshot import Intent
from tests.runtime.doubles import Clock, NoPods, QueueDepth, Quiet, Workload

# Scale events are kept only for a target with a behavior, as upstream's storeScaleEvent.
WEB = list(parse_config("""
[[autoscaler]]
namespace = "shop"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "web" }
maxReplicas = 10
metrics = [{ type = "External", external = { metric = { name = "depth" }, target = { type = "AverageValue", averageValue = "10" }, query = "sum(depth)" } }]
behavior = { scaleUp = { policies = [{ type = "Pods", value = 2, periodSeconds = 60 }] } }
""").targets)


@dataclass
class Record:
    """The store as ``persist`` sees it: the intents on record at each call."""

    reconciler: Reconciler | None = None
    calls: list[Intent | None] = field(default_factory=list)
    fail: bool = False
    cluster: Workload | None = None

    async def persist(self) -> None:
        assert self.reconciler is not None
        assert self.cluster is not None
        self.cluster.log.append("persist")
        if self.fail:
            raise TransientError("ConfigMap write refused")
        self.calls.append(self.reconciler.states[WEB[0].key].intent)


def rig(cluster: Workload, *, dry_run: bool = False,
        fail_persist: bool = False) -> tuple[Reconciler, Record, Clock]:
    record, clock = Record(fail=fail_persist, cluster=cluster), Clock()
    reconciler = Reconciler(
        scales=cluster, pods=NoPods(), metrics=QueueDepth(60), events=Quiet(), owners=Quiet(),
        options=ReconcileOptions(persist=record.persist, dry_run=dry_run),
        telemetry=DaemonMetrics(), clock=clock)
    record.reconciler = reconciler
    return reconciler, record, clock


async def run_pass(reconciler: Reconciler) -> None:
    async with asyncio.timeout(10):
        await reconciler.run_pass(WEB, deadline=time.monotonic() + 5)


async def test_a_write_is_on_record_before_it_is_sent() -> None:
    """One store write, carrying the intent (previous, desired, the resourceVersion the PUT
    carries), then the PUT; after it succeeds the event is in the history and the intent
    gone."""
    cluster = Workload()
    reconciler, record, _ = rig(cluster)
    await run_pass(reconciler)
    assert cluster.log == ["persist", "put 4 (ok)"]
    assert record.calls == [Intent(previous=2, desired=4, resource_version="1", at=1_000.0)]
    state = reconciler.states[WEB[0].key]
    assert state.intent is None
    assert [e.change for e in state.history.scale_up_events] == [2]


async def test_a_pass_without_a_write_writes_no_history() -> None:
    """Steady state costs no store write."""
    cluster = Workload(replicas=6)
    reconciler, record, _ = rig(cluster)
    await run_pass(reconciler)
    await run_pass(reconciler)
    assert cluster.log == []
    assert record.calls == []


async def test_no_write_is_sent_when_its_record_cannot_be_saved() -> None:
    """A write the store could not record is not sent: the target says why."""
    cluster = Workload()
    reconciler, _, _ = rig(cluster, fail_persist=True)
    await run_pass(reconciler)
    assert cluster.log == ["persist"]
    state = reconciler.states[WEB[0].key]
    assert state.intent is None
    assert state.last_outcome == "error"
    assert "history could not be saved" in (state.last_error or "")


@pytest.mark.parametrize(("fault", "counted"), [("applied", True), ("lost", False)])
async def test_a_write_of_unknown_outcome_is_settled_by_a_fresh_read(
    fault: str, counted: bool,
) -> None:
    """A timeout leaves the intent; the next pass reads the target from the server (not the
    cache), counts the write if the resourceVersion moved, and only then decides."""
    cluster = Workload(faults=[fault])
    reconciler, _, clock = rig(cluster)
    await run_pass(reconciler)
    state = reconciler.states[WEB[0].key]
    assert state.intent is not None
    assert state.history.scale_up_events == ()
    clock.now += 1
    cluster.log.clear()
    await run_pass(reconciler)
    assert cluster.log[0] == "get fresh=True"
    events = [(e.change, e.timestamp) for e in state.history.scale_up_events]
    if counted:
        # Counted at the read, the latest it can have happened; 4 -> 8 is a new step.
        assert events[0] == (2, 1_001.0)
    else:
        assert cluster.log[1:] == ["persist", "put 4 (ok)"]
        assert events == [(2, 1_001.0)]


async def test_a_retry_after_a_conflict_is_on_record_before_it_is_sent() -> None:
    """A 409 proves the first PUT did not land; the retry, made from a fresh read, is a new
    write with its own intent, recorded first."""
    cluster = Workload(faults=["conflict"])
    reconciler, record, _ = rig(cluster)
    await run_pass(reconciler)
    assert cluster.log == ["persist", "put 4 (conflict)", "get fresh=True", "persist",
                           "put 4 (ok)"]
    assert [i.resource_version if i else None for i in record.calls] == ["1", "2"]
    assert reconciler.states[WEB[0].key].intent is None


async def test_a_429_holds_the_target_for_its_retry_after() -> None:
    """No PUT before Retry-After has passed; the target says when the next write may come."""
    cluster = Workload(faults=[30.0])
    reconciler, _, clock = rig(cluster)
    await run_pass(reconciler)
    assert cluster.log == ["persist", "put 4 (30.0)"]
    state = reconciler.states[WEB[0].key]
    assert state.intent is None  # a 429 was not applied
    for _ in range(3):
        clock.now += 9
        await run_pass(reconciler)
    assert cluster.log == ["persist", "put 4 (30.0)"]
    assert "429 Retry-After" in (state.last_error or "")
    clock.now += 4
    await run_pass(reconciler)
    assert cluster.log[-1] == "put 4 (ok)"


async def test_dry_run_records_nothing() -> None:
    """A dry run sends no write, so it has nothing to put on record."""
    cluster = Workload()
    reconciler, record, _ = rig(cluster, dry_run=True)
    await run_pass(reconciler)
    assert cluster.log == []
    assert record.calls == []


async def test_a_restored_history_with_a_gap_holds_the_current_count_for_the_window() -> None:
    """After an unclean stop the first decision puts the current count into the windows, as
    upstream's first sight of a target does: a scale-down waits out the window."""
    cluster = Workload(replicas=8)  # load for 6
    reconciler, _, _ = rig(cluster)
    state = reconciler.state(WEB[0].key)
    state.bridge_gap = True
    await run_pass(reconciler)
    assert not state.bridge_gap
    assert (8, 1_000.0) in [(r.replicas, r.timestamp) for r in state.history.recommendations]
    assert cluster.replicas == 8
