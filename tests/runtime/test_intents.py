"""A scale write is on record before it is sent, its outcome on record as soon as it is
known, and one whose outcome is unknown is settled by a fresh read, from the count the
object holds, before the target's next decision.

The ``Workload`` double keeps the target's replicas and resourceVersion and can fail a
write before or after applying it, as a real API server behind a flaky network can."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field

import pytest

from autoscaler.algorithm import Behavior, MetricUnavailable, ScaleEvent
from autoscaler.config import parse_config
from autoscaler.errors import TransientError
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.intents import IN_FLIGHT_HORIZON, OutcomeRecorder
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from autoscaler.snapshot import Intent
from tests.runtime.doubles import (
    Clock,
    Depths,
    Fleet,
    NoPods,
    QueueDepth,
    Quiet,
    Workload,
    targets,
)

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
    """The store as ``persist`` sees it: the intent and the scale-up events (change, time)
    on record at each call."""

    reconciler: Reconciler | None = None
    calls: list[Intent | None] = field(default_factory=list)
    events: list[list[tuple[int, float]]] = field(default_factory=list)
    fail: bool = False
    cluster: Workload | None = None

    async def persist(self) -> None:
        assert self.reconciler is not None
        assert self.cluster is not None
        self.cluster.log.append("persist")
        if self.fail:
            raise TransientError("ConfigMap write refused")
        state = self.reconciler.states[WEB[0].key]
        self.calls.append(state.intent)
        self.events.append([(e.change, e.timestamp) for e in state.history.scale_up_events])


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


async def test_a_write_is_on_record_before_it_is_sent_and_its_outcome_after() -> None:
    """One store write carrying the intent (previous, desired, the resourceVersion the PUT
    carries), then the PUT, then, once it is answered, one carrying the scale event at the
    time of the answer and no intent: a kill after that leaves nothing to count again."""
    cluster = Workload()
    reconciler, record, clock = rig(cluster)
    cluster.during_put = lambda: setattr(clock, "now", clock.now + 0.25)  # the PUT's time
    await run_pass(reconciler)
    assert cluster.log == ["persist", "put 4 (ok)", "persist"]
    assert record.calls == [Intent(previous=2, desired=4, resource_version="1", at=1_000.0),
                            None]
    assert record.events == [[], [(2, 1_000.25)]]
    state = reconciler.states[WEB[0].key]
    assert state.intent is None
    assert [e.change for e in state.history.scale_up_events] == [2]


async def test_a_pass_without_a_scale_write_writes_the_history_once() -> None:
    """Steady state costs one store write a pass: its recommendations go on record (a later
    window may need them after a kill), and no intent."""
    cluster = Workload(replicas=6)
    reconciler, record, _ = rig(cluster)
    await run_pass(reconciler)
    await run_pass(reconciler)
    assert cluster.log == ["persist", "persist"]
    assert record.calls == [None, None]  # no intent on record at either


async def test_no_write_is_sent_when_its_record_cannot_be_saved() -> None:
    """A write the store could not record is not sent: the target says why."""
    cluster = Workload()
    reconciler, _, _ = rig(cluster, fail_persist=True)
    await run_pass(reconciler)
    assert [entry for entry in cluster.log if entry.startswith("put")] == []
    state = reconciler.states[WEB[0].key]
    assert state.intent is None
    assert state.last_outcome == "error"
    assert "history could not be saved" in (state.last_error or "")


@pytest.mark.parametrize(("fault", "then", "counted"), [
    ("applied", None, True),
    ("lost", None, False),
    ("lost", 2, False),
    ("applied", 7, False),
], ids=["applied", "lost", "lost-then-touched", "applied-then-set-by-hand"])
async def test_a_write_of_unknown_outcome_is_settled_from_the_count_read_fresh(
    fault: str, then: int | None, counted: bool,
) -> None:
    """A timeout leaves the intent (2 -> 4); another writer may then set the count
    (``then``; at 2 it only moves the resourceVersion, as a status update does). The next
    pass reads the target from the server (not the cache) and counts the write iff the
    object holds 4, dated at that read; the store then holds the outcome, not the intent."""
    cluster = Workload(faults=[fault])
    reconciler, record, clock = rig(cluster)
    await run_pass(reconciler)
    state = reconciler.states[WEB[0].key]
    assert state.intent is not None
    assert state.history.scale_up_events == ()
    if then is not None:
        cluster.replicas, cluster.version = then, cluster.version + 1
    clock.now += 1
    cluster.log.clear()
    await run_pass(reconciler)
    assert cluster.log[0] == "get fresh=True"
    events = [(e.change, e.timestamp) for e in state.history.scale_up_events]
    if counted:
        # Counted at the read, the latest it can have happened; 4 -> 6 is a new step.
        assert events[0] == (2, 1_001.0)
        assert cluster.log[1:] == ["persist"]  # the settled outcome, on record
    elif then is None or then == 2:
        assert cluster.log[1:] == ["persist", "put 4 (ok)", "persist"]  # written again
        assert events == [(2, 1_001.0)]
    else:
        assert events == []  # drift: someone else's count, not our step
    assert record.calls[-1] is None


UP_DISABLED = parse_config("""
[[autoscaler]]
namespace = "shop"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "web" }
maxReplicas = 10
metrics = [{ type = "External", external = { metric = { name = "depth" }, target = { type = "AverageValue", averageValue = "10" }, query = "sum(depth)" } }]
behavior = { scaleUp = { selectPolicy = "Disabled" } }
""").targets[0].spec.behavior


@dataclass
class Then:
    """The world of the pass after the lost write: how old the intent is, the metric
    (None: unavailable), ``maxReplicas`` and ``behavior`` now (a reload), and how the next
    PUT goes."""

    age: float = 1.0
    units: int | None = 20
    max_replicas: int = 10
    behavior: Behavior | None = None
    fault: str = "ok"


@pytest.mark.parametrize(("then", "log", "counted"), [
    (Then(), ["persist", "put 4 (ok)", "persist"], True),
    (Then(fault="conflict->4"),
     ["persist", "put 4 (conflict->4)", "get fresh=True", "persist"], True),
    (Then(fault="conflict"), ["persist", "put 4 (conflict)", "get fresh=True", "persist"],
     False),
    (Then(age=IN_FLIGHT_HORIZON + 1), ["persist"], False),
    (Then(units=None), ["persist"], False),
    (Then(max_replicas=3), ["persist"], False),
    (Then(behavior=UP_DISABLED), ["persist"], False),
], ids=["sent-again", "first-landed-meanwhile", "touched-meanwhile", "too-old",
        "no-metrics", "out-of-bounds-now", "scale-up-disabled-now"])
async def test_a_write_that_may_still_be_on_its_way_is_sent_again_if_the_pass_writes_not(
    then: Then, log: list[str], counted: bool,
) -> None:
    """A timeout leaves the intent 2 -> 4 on an object still at its resourceVersion: the
    request may yet reach the server (one holding it, or a frozen sender). The next pass's
    decision is to stay at 2 (the load fell); it sends 2 -> 4 again, with that
    resourceVersion, so exactly one of the two can land (the other is a 409): a step the
    history counts, not one landing later unseen. If the object changed meanwhile
    (``conflict->4``: the first landed; ``conflict``: a status update), the fresh read
    settles it and nothing is written over it. An intent older than ``IN_FLIGHT_HORIZON``
    is dropped. A pass without metrics, or with the count now beyond what the rules allow
    (a reload lowered ``maxReplicas`` to 3, or disabled scaling up), sends nothing and keeps
    the intent on record (the store holds it already: no write): if the first PUT lands
    later, the next read counts it."""
    cluster = Workload(faults=["lost"])
    reconciler, record, clock = rig(cluster)
    await run_pass(reconciler)
    state = reconciler.states[WEB[0].key]
    assert state.intent is not None
    reconciler.metrics = QueueDepth(then.units) if then.units is not None else Depths(
        {"web": MetricUnavailable(reason="no series")})
    cluster.faults, clock.now = [then.fault], clock.now + then.age
    cluster.log.clear()
    reloaded = [dataclasses.replace(WEB[0], spec=dataclasses.replace(
        WEB[0].spec, max_replicas=then.max_replicas,
        behavior=then.behavior or WEB[0].spec.behavior))]
    async with asyncio.timeout(10):
        await reconciler.run_pass(reloaded, deadline=time.monotonic() + 5)
    assert cluster.log == ["get fresh=True", *log]
    events = [(e.change, e.timestamp) for e in state.history.scale_up_events]
    assert events == ([(2, 1_000.0 + then.age)] if counted else [])
    assert cluster.replicas == (4 if counted else 2)
    if any(e.startswith("put") for e in log) or then.age > IN_FLIGHT_HORIZON:
        assert state.intent is None
        assert record.calls[-1] is None
        return
    await kept_then_counted_when_it_lands(reconciler, cluster, clock)


async def kept_then_counted_when_it_lands(reconciler: Reconciler, cluster: Workload,
                                         clock: Clock) -> None:
    """The lost 2 -> 4 (decided at 1,000) is still on record; the first PUT lands now, and
    the next pass's read counts it."""
    state = reconciler.states[WEB[0].key]
    assert state.intent == Intent(previous=2, desired=4, resource_version="1", at=1_000.0)
    cluster.replicas, cluster.version = 4, cluster.version + 1
    clock.now += 1
    await run_pass(reconciler)
    assert [(e.change, e.timestamp) for e in state.history.scale_up_events] == [
        (2, clock.now)]
    assert state.intent is None


async def test_a_resend_that_meets_a_conflict_keeps_what_the_store_folded_in_meanwhile(
) -> None:
    """The lost 2 -> 4 is sent again; the store write putting it on record meets another
    writer's and folds in a scale-down event of theirs (``HistoryKeeper._fold_in``), then
    the PUT is a 409 (the first one landed). Settling it counts 2 -> 4 on the history as it
    is then, the folded-in event kept. (Found by review of 2b45388, which settled it on the
    history as the pass had left it.)"""
    cluster = Workload(faults=["lost"])
    reconciler, record, clock = rig(cluster)
    await run_pass(reconciler)
    state = reconciler.states[WEB[0].key]
    assert state.intent is not None
    theirs = ScaleEvent(change=-1, timestamp=990.0)

    folded: list[bool] = []

    async def folding_persist() -> None:
        if not folded:  # the first store write of the pass, once
            folded.append(True)
            state.history = dataclasses.replace(state.history, scale_down_events=(theirs,))
        await record.persist()

    reconciler.options = dataclasses.replace(reconciler.options, persist=folding_persist)
    reconciler.metrics = QueueDepth(20)  # the load fell: the pass would stay, so it resends
    cluster.faults, clock.now = ["conflict->4"], clock.now + 1
    cluster.log.clear()
    await run_pass(reconciler)
    assert [e for e in cluster.log if e.startswith("put")] == ["put 4 (conflict->4)"]
    assert [(e.change, e.timestamp) for e in state.history.scale_up_events] == [(2, 1_001.0)]
    assert state.history.scale_down_events == (theirs,)


async def test_a_write_from_zero_is_not_sent_again_once_scaling_is_disabled_at_zero() -> None:
    """A target that may scale to zero (``minReplicas = 0``) is woken 0 -> 2 and the answer
    is lost. A reload then sets ``minReplicas = 1``: at 0 replicas that target's scaling is
    disabled (upstream's ScalingDisabled: a workload at 0 is the user's pause). The pass
    sends nothing again, though the rate limits would allow 0 -> 2, and keeps the intent on
    record: if the first PUT lands later, the next read counts it."""
    cluster = Workload(replicas=0, faults=["lost"])
    reconciler, _, clock = rig(cluster)
    from_zero = [dataclasses.replace(WEB[0], spec=dataclasses.replace(
        WEB[0].spec, min_replicas=0))]
    async with asyncio.timeout(10):
        await reconciler.run_pass(from_zero, deadline=time.monotonic() + 5)
    state = reconciler.states[WEB[0].key]
    assert state.intent == Intent(previous=0, desired=2, resource_version="1", at=1_000.0)
    clock.now += 1
    cluster.log.clear()
    await run_pass(reconciler)  # WEB: minReplicas = 1
    assert cluster.log == ["get fresh=True", "persist"]
    assert "ScalingDisabled" in {c.reason for c in state.conditions}
    assert state.intent == Intent(previous=0, desired=2, resource_version="1", at=1_000.0)
    cluster.replicas, cluster.version = 2, cluster.version + 1  # the first PUT lands now
    clock.now += 1
    await run_pass(reconciler)
    assert [(e.change, e.timestamp) for e in state.history.scale_up_events] == [
        (2, clock.now)]
    assert state.intent is None


async def test_a_conflict_with_a_write_that_was_on_its_way_counts_it_before_deciding_again(
) -> None:
    """The lost 2 -> 4 lands just before this pass's own 2 -> 4 (the load is still high):
    that PUT is a 409, and the fresh read counts the first one before the decision is made
    again, so the policy (2 pods per 60 s) holds the target at 4. Counted as nothing, the
    decision made again would have taken 4 -> 6 a second after 2 -> 4."""
    cluster = Workload(faults=["lost"])
    reconciler, _, clock = rig(cluster)
    await run_pass(reconciler)
    cluster.faults, clock.now = ["conflict->4"], clock.now + 1
    cluster.log.clear()
    await run_pass(reconciler)
    assert [e for e in cluster.log if e.startswith("put")] == ["put 4 (conflict->4)"]
    state = reconciler.states[WEB[0].key]
    assert [(e.change, e.timestamp) for e in state.history.scale_up_events] == [(2, 1_001.0)]
    assert cluster.replicas == 4


@pytest.mark.parametrize("refusal", ["429", "store-write-fails"])
async def test_a_write_on_its_way_stays_on_record_when_the_write_replacing_it_is_not_made(
    refusal: str,
) -> None:
    """The pass sends the lost 2 -> 4 again, but that PUT is refused (a 429) or never sent
    (the store cannot record it): the first PUT may still land, so its intent stays on
    record, and when it lands the next read counts it."""
    cluster = Workload(faults=["lost"])
    reconciler, record, clock = rig(cluster)
    await run_pass(reconciler)
    reconciler.metrics = QueueDepth(20)
    if refusal == "429":
        cluster.faults = [30.0]
    else:
        record.fail = True
    clock.now += 1
    await run_pass(reconciler)
    record.fail = False
    await kept_then_counted_when_it_lands(reconciler, cluster, clock)


async def test_a_paused_count_written_over_a_write_that_landed_counts_that_write() -> None:
    """A reload pauses the target at 3 while the lost 2 -> 4 may still be on its way; it
    lands just before the pause's PUT, which is a 409: the fresh read counts 2 -> 4 (the
    policy's period holds it after the pause ends) before 3 is written."""
    cluster = Workload(faults=["lost"])
    reconciler, _, clock = rig(cluster)
    await run_pass(reconciler)
    cluster.faults, clock.now = ["conflict->4"], clock.now + 1
    cluster.log.clear()
    paused = [dataclasses.replace(WEB[0], paused_replicas=3)]
    async with asyncio.timeout(10):
        await reconciler.run_pass(paused, deadline=time.monotonic() + 5)
    assert [e for e in cluster.log if e.startswith("put")] == [
        "put 3 (conflict->4)", "put 3 (ok)"]
    state = reconciler.states[WEB[0].key]
    assert [(e.change, e.timestamp) for e in state.history.scale_up_events] == [(2, 1_001.0)]
    assert cluster.replicas == 3


async def test_a_write_sent_again_keeps_its_decision_time() -> None:
    """A write sent again whose answer is lost too goes back on record with the time it was
    decided, not the time it was sent again: past ``IN_FLIGHT_HORIZON`` of the decision it
    is dropped, however often it was sent."""
    cluster = Workload(faults=["lost"])
    reconciler, _, clock = rig(cluster)
    await run_pass(reconciler)
    reconciler.metrics = QueueDepth(20)
    for _ in range(3):
        cluster.faults, clock.now = ["lost"], clock.now + IN_FLIGHT_HORIZON / 3 - 1
        await run_pass(reconciler)
        state = reconciler.states[WEB[0].key]
        assert state.intent is not None
        assert state.intent.at == 1_000.0
    clock.now = 1_000.0 + IN_FLIGHT_HORIZON + 1
    cluster.log.clear()
    await run_pass(reconciler)
    assert cluster.log == ["get fresh=True", "persist"]
    assert state.intent is None


async def test_a_retry_after_a_conflict_is_on_record_before_it_is_sent() -> None:
    """A 409 proves the first PUT did not land; the retry, made from a fresh read, is a new
    write with its own intent, recorded first."""
    cluster = Workload(faults=["conflict"])
    reconciler, record, _ = rig(cluster)
    await run_pass(reconciler)
    assert cluster.log == ["persist", "put 4 (conflict)", "get fresh=True", "persist",
                           "put 4 (ok)", "persist"]
    assert [i.resource_version if i else None for i in record.calls] == ["1", "2", None]
    assert reconciler.states[WEB[0].key].intent is None


async def test_a_429_holds_the_target_for_its_retry_after() -> None:
    """No PUT before Retry-After has passed; the target says when the next write may come."""
    cluster = Workload(faults=[30.0])
    reconciler, _, clock = rig(cluster)
    await run_pass(reconciler)
    assert cluster.log == ["persist", "put 4 (30.0)", "persist"]
    state = reconciler.states[WEB[0].key]
    assert state.intent is None  # a 429 was not applied: the store no longer holds it
    for _ in range(3):
        clock.now += 9
        await run_pass(reconciler)
    assert [entry for entry in cluster.log if entry.startswith("put")] == ["put 4 (30.0)"]
    assert "429 Retry-After" in (state.last_error or "")
    clock.now += 4
    await run_pass(reconciler)
    assert cluster.log[-3:] == ["persist", "put 4 (ok)", "persist"]


async def test_dry_run_records_its_pass_and_no_intent() -> None:
    """A dry run sends no write, so it puts no intent on record: only its pass, as any."""
    cluster = Workload()
    reconciler, record, _ = rig(cluster, dry_run=True)
    await run_pass(reconciler)
    assert cluster.log == ["persist"]
    assert record.calls == [None]


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


async def test_a_pass_that_scales_many_targets_records_their_outcomes_in_one_write() -> None:
    """Three targets scale in one pass: one store write for their intents before any PUT,
    one for their outcomes once the last is answered."""
    fleet = Fleet({})
    calls: list[int] = []

    async def persist() -> None:
        calls.append(len([entry for entry in fleet.log if entry[1].startswith("write")]))

    reconciler = Reconciler(scales=fleet, pods=NoPods(), metrics=QueueDepth(60),
                            events=fleet, owners=fleet, telemetry=DaemonMetrics(),
                            options=ReconcileOptions(persist=persist, concurrency=3))
    async with asyncio.timeout(10):
        await reconciler.run_pass(targets("a", "b", "c"), deadline=time.monotonic() + 5)
    assert calls == [0, 3]  # before any write, after all three


class Recorded:
    """A ``persist`` that records when it was called, and fails while ``failing``."""

    def __init__(self) -> None:
        self.at: list[float] = []
        self.failing = False
        self.errors: list[Exception | None] = []

    async def persist(self) -> None:
        self.at.append(asyncio.get_running_loop().time())
        if self.failing:
            raise TransientError("HTTP 500")


async def test_an_answered_write_waits_for_the_others_at_most_the_linger() -> None:
    """An outcome is on record when the pass ends (``flush``), or ``linger`` after it was
    known if the pass's other writes take longer (one hangs); never one write per outcome."""
    store = Recorded()
    recorder = OutcomeRecorder(lambda: store.persist, store.errors.append, linger=0.05)
    loop = asyncio.get_running_loop()
    known = loop.time()
    recorder.want()
    recorder.want()
    await asyncio.sleep(0.2)  # a PUT hangs: the pass has not ended
    assert len(store.at) == 1
    assert 0.05 <= store.at[0] - known < 0.15
    recorder.want()
    await recorder.flush()  # the pass ends: at once, not after the linger
    assert len(store.at) == 2
    assert store.at[1] - store.at[0] < 0.2 + 0.05
    await recorder.flush()
    assert len(store.at) == 2  # nothing new: no write


async def test_a_failed_outcome_record_is_tried_again_at_the_next_pass() -> None:
    """The store refuses the record: the failure is reported, the next pass's ``flush``
    writes it and reports that it is over."""
    store = Recorded()
    recorder = OutcomeRecorder(lambda: store.persist, store.errors.append)
    store.failing = True
    recorder.want()
    await recorder.flush()
    assert [str(e) for e in store.errors] == ["HTTP 500"]
    store.failing = False
    await recorder.flush()
    assert len(store.at) == 2
    assert store.errors[1:] == [None]
    await recorder.flush()
    assert len(store.at) == 2
