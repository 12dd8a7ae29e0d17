"""The reconciler's live paths: a write that loses a race is decided again from a fresh read,
drift is reported, another autoscaler's target is left alone, dry-run and shadow mode write
nothing, and the opt-in fallback takes over after enough passes without valid metrics.

The ports are the in-memory doubles of ``tests/runtime/doubles.py``; every target wants
10 units of its External metric per replica and has no behavior, so upstream's default
scale-up limit applies (at most double, at least 4).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from structlog.testing import capture_logs

from autoscaler.algorithm import ConditionType, MetricUnavailable, MetricValues, Reason
from autoscaler.config import ScaleTargetRef, TargetConfig
from autoscaler.errors import TransientError
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.pause import PAUSED_REPLICAS_ANNOTATION
from autoscaler.runtime.ports import FetchedMetrics, MetricsWanted
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from autoscaler.runtime.status import TargetState
from autoscaler.runtime.writes import CONFLICT_RETRIES
from autoscaler.snapshot import Intent
from tests.runtime.doubles import (
    Depths,
    Events,
    FixedScale,
    Fleet,
    NoPods,
    Owners,
    Workload,
    depth,
    targets,
)

[WEB] = targets("web")


def rig(workload: Workload, values: MetricValues, *, owners: Owners | None = None,
        dry_run: bool = False) -> tuple[Reconciler, Events]:
    events = Events()
    reconciler = Reconciler(
        scales=workload, pods=NoPods(), metrics=Depths({"web": values}), events=events,
        owners=owners or Owners(), options=ReconcileOptions(dry_run=dry_run),
        telemetry=DaemonMetrics())
    return reconciler, events


async def run_passes(reconciler: Reconciler, count: int = 1,
                     target: TargetConfig = WEB) -> TargetState:
    async with asyncio.timeout(10):
        for _ in range(count):
            await reconciler.run_pass([target], deadline=time.monotonic() + 5)
        await asyncio.sleep(0.01)  # events the pass sent in the background
    return reconciler.states[target.key]


@pytest.mark.parametrize(
    ("fault", "log", "replicas", "event"),
    [
        ("conflict->5", ["put 4 (conflict->5)", "get fresh=True", "put 6 (ok)"], 6,
         "New size: 6"),
        ("conflict->6", ["put 4 (conflict->6)", "get fresh=True"], 6, None),
        ("conflict", ["put 4 (conflict)", "get fresh=True", "put 4 (ok)"], 4, "New size: 4"),
    ],
    ids=["redecided", "already-there", "same-count"],
)
async def test_a_conflict_is_decided_again_from_a_fresh_read(
    fault: str, log: list[str], replicas: int, event: str | None,
) -> None:
    """A 409 means someone wrote in between: the target is read again from the server and
    the decision made again from that count, never written over blindly (60 units want 6:
    4 from 2, 6 from 5; from 6 there is nothing left to write)."""
    workload = Workload(faults=[fault])
    reconciler, events = rig(workload, depth(60))
    state = await run_passes(reconciler)
    assert workload.log == log
    assert workload.replicas == replicas
    assert state.expected_replicas == replicas
    rescales = [message for reason, message, _ in events.sent if reason == "SuccessfulRescale"]
    assert [m.split(";")[0] for m in rescales] == ([event] if event else [])
    assert state.last_outcome == "ok"


async def test_conflicts_are_bounded() -> None:
    """A write that loses every race gives up after CONFLICT_RETRIES re-reads: the target
    says it could not update the scale, and no intent is left (a 409 was not applied)."""
    workload = Workload(faults=["conflict"] * (CONFLICT_RETRIES + 1))
    reconciler, events = rig(workload, depth(60))
    state = await run_passes(reconciler)
    assert [line.split()[0] for line in workload.log] == ["put", "get"] * CONFLICT_RETRIES + [
        "put"]
    assert state.intent is None
    assert events.reasons() == ["FailedRescale"]
    able = next(c for c in state.conditions if c.type is ConditionType.ABLE_TO_SCALE)
    assert (able.status, able.reason) == (False, Reason.FAILED_UPDATE_SCALE)
    # The pass's outcome is that failure, counted once (it was "ok", after "error").
    assert (state.last_outcome, state.last_error) == ("error", able.message)
    assert reconciler.telemetry.target(WEB.key).reconciles == {"error": 1}


async def test_drift_is_reported_and_our_own_writes_are_not_drift() -> None:
    """Replicas changed between passes without our write: a ScaleDrift Event, the drift on
    /status and counted, and the pass decides from the new count (20 units want 2: 3 -> 2).
    The count we wrote is no drift at the next pass."""
    workload = Workload()
    reconciler, events = rig(workload, depth(20))
    await run_passes(reconciler)
    workload.replicas, workload.version = 3, 2  # kubectl scale
    state = await run_passes(reconciler)
    assert state.drift == "replicas changed from 2 to 3 outside the autoscaler"
    assert reconciler.telemetry.target(WEB.key).drift == 1
    assert state.last_decision is not None
    assert state.last_decision.current_replicas == 3
    assert workload.replicas == 2
    state = await run_passes(reconciler)
    assert state.drift is None
    assert [(r, warning) for r, _, warning in events.sent] == [
        ("ScaleDrift", False), ("SuccessfulRescale", False)]


async def test_a_target_another_autoscaler_owns_is_left_alone() -> None:
    """Another HPA on the target: no write whatever the metrics say, the owner named on
    /status, and one AutoscalerConflict Event however many passes it lasts."""
    workload = Workload()
    reconciler, events = rig(workload, depth(60),
                             owners=Owners(owners=("HorizontalPodAutoscaler shop/web",)))
    state = await run_passes(reconciler, 3)
    assert workload.log == []
    assert state.last_outcome == "blocked"
    assert state.blocked_by == ("HorizontalPodAutoscaler shop/web",)
    assert events.reasons() == ["AutoscalerConflict"]


async def test_dry_run_says_what_it_would_write_and_writes_nothing() -> None:
    """Dry-run: no PUT, a WouldScale Event with upstream's message, the would-be scale
    counted."""
    workload = Workload()
    reconciler, events = rig(workload, depth(60), dry_run=True)
    state = await run_passes(reconciler)
    assert workload.log == []
    [(reason, message, warning)] = events.sent
    assert (reason, warning) == ("WouldScale", False)
    assert message.startswith("New size: 4; reason: ")
    assert message.endswith(" (dry-run)")
    assert reconciler.telemetry.target(WEB.key).would_scale_events == (1, 0)
    assert state.last_outcome == "ok"


@pytest.mark.parametrize(
    ("theirs", "events_sent"),
    [(4, []), (3, ["ShadowDisagreement"])],
    ids=["agree", "disagree"],
)
async def test_shadow_mode_compares_and_writes_nothing(theirs: int,
                                                       events_sent: list[str]) -> None:
    """Shadow mode: the HPA that owns the target keeps it; we decide, write nothing, and say
    once when our count differs from the one it reports."""
    [shadow] = targets("web", extra="shadow = true")
    workload = Workload()
    reconciler, events = rig(workload, depth(60), owners=Owners(
        owners=("HorizontalPodAutoscaler shop/web",),
        reported=(("HorizontalPodAutoscaler shop/web", theirs),)))
    state = await run_passes(reconciler, 3, target=shadow)
    assert workload.log == []
    assert state.last_outcome == "shadow"
    assert state.shadow is not None
    assert (state.shadow.ours, state.shadow.theirs, state.shadow.agree) == (
        4, theirs, theirs == 4)
    assert events.reasons() == events_sent


async def test_a_target_removed_while_its_pass_runs_is_not_decided() -> None:
    """Removed between its read and its decision (a reload; a ring bucket lost, its state
    dropped for the member that holds it now): the pass makes no decision for it from an
    empty history, sends no Event (here: a shadow disagreement that fresh history would
    make), and gives it no state again."""
    [shadow] = targets("web", extra="shadow = true")
    workload = Workload()
    reconciler, events = rig(workload, depth(60), owners=Owners(
        owners=("HorizontalPodAutoscaler shop/web",),
        reported=(("HorizontalPodAutoscaler shop/web", 3),)))
    metrics = reconciler.metrics

    class RemovedWhileFetching:
        async def fetch_metrics(self, wanted: Sequence[MetricsWanted], *,
                                deadline: float) -> FetchedMetrics:
            reconciler.remove(shadow.key)
            return await metrics.fetch_metrics(wanted, deadline=deadline)

    reconciler.metrics = RemovedWhileFetching()
    async with asyncio.timeout(10):
        await reconciler.run_pass([shadow], deadline=time.monotonic() + 5)
        await asyncio.sleep(0.01)  # events the pass sent in the background
    assert events.reasons() == []
    assert shadow.key not in reconciler.states
    assert workload.log == []


@pytest.mark.parametrize(
    ("replicas", "extra", "log"),
    [
        (2, "", ["put 5 (ok)"]),
        (8, "", []),
        (8, ", allowScaleDown = true", ["put 5 (ok)"]),
    ],
    ids=["scale-up", "no-scale-down", "scale-down-allowed"],
)
async def test_fallback_after_enough_passes_without_valid_metrics(
    replicas: int, extra: str, log: list[str],
) -> None:
    """Every metric invalid: held for failureThreshold - 1 passes, then the fallback count,
    down only when allowed."""
    [target] = targets("web", extra=f"fallback = {{ failureThreshold = 3, replicas = 5{extra} }}")
    workload = Workload(replicas=replicas)
    reconciler, events = rig(workload, MetricUnavailable(reason="no series"))
    state = await run_passes(reconciler, 2, target=target)
    assert workload.log == []
    assert not state.fallback_active
    state = await run_passes(reconciler, 1, target=target)
    assert workload.log == log
    assert state.fallback_active
    assert state.consecutive_invalid == 3
    if log:
        assert any(message.startswith("New size: 5; reason: fallback after 3 passes")
                   for _, message, _ in events.sent)


@dataclass
class Unreadable(Workload):
    """A workload the caches do not hold, whose next ``failing`` reads fail."""

    failing: int = 0

    def cached_scale(self, namespace: str, ref: ScaleTargetRef) -> None:
        return None

    async def get_scale(self, namespace: str, ref: ScaleTargetRef, *,
                        fresh: bool = False) -> FixedScale:
        if self.failing:
            self.failing -= 1
            raise TransientError("HTTP 500: etcd leader changed")
        return await super().get_scale(namespace, ref, fresh=fresh)


def said(logs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(entry["log_level"], entry["event"]) for entry in logs]


async def test_a_target_that_cannot_be_read_is_said_once_and_when_it_ends() -> None:
    """Its scale unreadable for four passes: one warning (each pass still fails the target
    and sends its Event), then one line when it reads again."""
    workload = Unreadable(failing=4)
    reconciler, events = rig(workload, depth(20))
    with capture_logs() as logs:
        state = await run_passes(reconciler, 4)
        assert state.last_outcome == "error"
        assert events.reasons() == ["FailedGetScale"] * 4
        state = await run_passes(reconciler, 2)
    assert state.last_outcome == "ok"
    assert said(logs) == [("warning", "cannot read the target's scale"),
                          ("info", "target readable again")]
    assert logs[0]["reason"] == "HTTP 500: etcd leader changed"


async def test_a_write_that_keeps_failing_is_said_once_and_when_it_ends() -> None:
    """PUT /scale failing for three passes: one warning (each pass still sends its
    FailedRescale Event), then one line when a write lands."""
    workload = Workload(faults=["lost"] * 3)
    reconciler, events = rig(workload, depth(60))
    with capture_logs() as logs:
        await run_passes(reconciler, 4)
    assert events.reasons() == ["FailedRescale"] * 3 + ["SuccessfulRescale"]
    warnings = [event for level, event in said(logs) if level == "warning"]
    assert warnings == ["scale write failed"]
    assert ("info", "scale write succeeded again") in said(logs)
    assert workload.replicas == 4


class ReloadDuringFetch(Depths):
    """Metrics that take a while: a reload removes the target while they are read."""

    reconciler: Reconciler

    async def fetch_metrics(self, wanted: Sequence[MetricsWanted], *,
                            deadline: float) -> FetchedMetrics:
        removed = self.reconciler.remove(WEB.key)
        assert removed is not None
        self.removed = removed
        return await super().fetch_metrics(wanted, deadline=deadline)


async def test_a_target_removed_by_a_reload_mid_pass_is_neither_recreated_nor_written() -> None:
    """The pass that was reading its metrics when a reload removed the target: no write, no
    Event, and no new empty state in its place (which would hide the history kept for it)."""
    workload, events, metrics = Workload(), Events(), ReloadDuringFetch({"web": depth(60)})
    reconciler = Reconciler(
        scales=workload, pods=NoPods(), metrics=metrics, events=events, owners=Owners(),
        options=ReconcileOptions(), telemetry=DaemonMetrics())
    metrics.reconciler = reconciler
    async with asyncio.timeout(10):
        await reconciler.run_pass([WEB], deadline=time.monotonic() + 5)
        await asyncio.sleep(0.01)
    assert workload.log == []
    assert events.sent == []
    assert WEB.key not in reconciler.states
    assert not metrics.removed.in_flight


async def test_a_view_of_a_removed_target_does_not_make_it_a_state() -> None:
    """/status is written a target at a time; a target a reload removed meanwhile is shown
    pending, and no empty state is made for it (it would hide the history kept for it)."""
    reconciler, _ = rig(Workload(), depth(60))
    kept = await run_passes(reconciler)
    assert reconciler.viewed(WEB.key) is kept
    assert reconciler.remove(WEB.key) is kept
    assert reconciler.viewed(WEB.key).last_outcome == "pending"
    assert WEB.key not in reconciler.states


@pytest.mark.parametrize("during_record", ["target removed", "leadership lost"],
                         ids=["reload-removes", "leadership-lost"])
async def test_the_retry_after_a_conflict_is_not_sent_if_things_changed_while_on_record(
    during_record: str,
) -> None:
    """After a 409 the retry is put on record before it is sent; a reload that removes the
    target, or a lost lease, while that record is written stops the retry (as it stops a
    first write): the target is not written again."""
    workload, leader = Workload(faults=["conflict->5"]), [True]
    calls: list[int] = []

    async def persist() -> None:
        calls.append(1)
        await asyncio.sleep(0)
        if len(calls) == 2:  # the retry's record: the reload or the lost lease lands here
            if during_record == "target removed":
                reconciler.remove(WEB.key)
            else:
                leader[0] = False

    reconciler = Reconciler(
        scales=workload, pods=NoPods(), metrics=Depths({"web": depth(60)}), events=Events(),
        owners=Owners(), telemetry=DaemonMetrics(),
        options=ReconcileOptions(persist=persist, may_write=lambda key: leader[0]))
    async with asyncio.timeout(10):
        await reconciler.run_pass([WEB], deadline=time.monotonic() + 5)
        await asyncio.sleep(0.01)
    assert len(calls) == 2
    assert workload.log == ["put 4 (conflict->5)", "get fresh=True"]


async def test_a_removed_target_leaves_no_ongoing_warning_behind() -> None:
    """A target removed by a reload while it could not be read: its ongoing warning goes
    with it (none kept per removed target, so churn does not grow memory, and a target added
    back that fails again is warned about as a new failure, not as a repeat)."""
    workload = Unreadable(failing=2)
    reconciler, _ = rig(workload, depth(20))
    await run_passes(reconciler)
    assert reconciler.unreadable  # the warning is ongoing
    reconciler.remove(WEB.key)
    assert not reconciler.unreadable, "the removed target's warning is kept forever"


class Queue(Depths):
    """The queue's depth, changed by the test between passes."""

    def __init__(self, units: int) -> None:
        super().__init__({"web": depth(units)})

    def set(self, units: int) -> None:
        self.values = {"web": depth(units)}


async def test_a_worker_keda_left_at_zero_is_woken_after_the_cutover_from_shadow() -> None:
    """The README's move from KEDA: shadow beside the ScaledObject while KEDA holds the idle
    worker at 0, then the ScaledObject deleted and shadow removed. "The daemon takes over at
    the next pass": messages arrive and the worker is woken, not left at 0 for good as a
    zero set by hand."""
    zero = 'minReplicas = 0\ncooldownPeriod = "300s"'
    [shadowed] = targets("web", extra=zero + "\nshadow = true")
    [live] = targets("web", extra=zero)
    workload, queue = Workload(replicas=0), Queue(0)
    keda = Owners(owners=("ScaledObject shop/web",),
                  reported=(("HorizontalPodAutoscaler shop/keda-hpa-web", 1),))
    reconciler = Reconciler(scales=workload, pods=NoPods(), metrics=queue, events=Events(),
                            owners=keda, options=ReconcileOptions(), telemetry=DaemonMetrics())
    await run_passes(reconciler, 2, target=shadowed)
    reconciler.owners = Owners()  # kubectl delete scaledobject web; shadow removed
    queue.set(30)
    await run_passes(reconciler, 1, target=live)
    assert workload.replicas >= 1, workload.log


async def test_a_refused_write_leaves_the_intent_it_finds_for_a_fresh_read() -> None:
    """A restore lands while the pass puts its write on record and brings the store's own
    intent (an earlier write whose outcome is unknown): the pass's write is refused, not on
    record any more, and that intent stays for the next pass's fresh read to settle."""
    earlier = Intent(previous=1, desired=2, resource_version="0", at=900.0)

    async def persist() -> None:
        await asyncio.sleep(0)
        reconciler.states[WEB.key].intent = earlier  # the restore's _apply

    workload = Workload()
    reconciler = Reconciler(
        scales=workload, pods=NoPods(), metrics=Depths({"web": depth(60)}), events=Events(),
        owners=Owners(), telemetry=DaemonMetrics(), options=ReconcileOptions(persist=persist))
    state = await run_passes(reconciler)
    assert workload.log == []
    assert state.intent is earlier


async def test_a_paused_target_read_again_is_able_to_scale_again() -> None:
    """A paused target whose scale could not be read (AbleToScale False, FailedGetScale) and
    then is read: AbleToScale True, SucceededGetScale, as upstream says after any successful
    read; not the failure of a pass long gone."""
    [paused] = targets("web", extra="paused = true")
    reconciler, _ = rig(Unreadable(failing=1), depth(20))
    state = await run_passes(reconciler, 1, target=paused)
    able = next(c for c in state.conditions if c.type is ConditionType.ABLE_TO_SCALE)
    assert (able.status, able.reason) == (False, Reason.FAILED_GET_SCALE)
    state = await run_passes(reconciler, 1, target=paused)
    assert state.last_outcome == "paused"
    able = next(c for c in state.conditions if c.type is ConditionType.ABLE_TO_SCALE)
    assert (able.status, able.reason) == (True, Reason.SUCCEEDED_GET_SCALE)


def said_everywhere(reconciler: Reconciler, state: TargetState) -> tuple[Any, ...]:
    """(current, desired, recommended, shadow) as /status says them, once /metrics is checked
    to say the same: one state, two views."""
    body = state.to_json()
    series = reconciler.telemetry.target(state.key)
    shadow = body.get("shadow")
    said = (body.get("currentReplicas"), body.get("desiredReplicas"), body.get("stabilized"),
            None if shadow is None else (shadow["desiredReplicas"],
                                         shadow["theirDesiredReplicas"]))
    assert (series.current, series.desired, series.recommended, series.shadow) == said
    assert bool(series.metrics) == ("currentMetrics" in body)
    return said


async def test_a_pause_after_decisions_shows_the_count_it_holds_not_the_last_decision() -> None:
    """Decided at 6 (60 units), then paused at 3: the passes while paused say 3 current / 3
    desired, no recommendation and no metric, on /status and /metrics alike (they said the
    last decision's counts as long as the pause lasted)."""
    [web] = targets("web")
    [paused] = targets("web", extra="pausedReplicas = 3")
    workload = Workload(replicas=6)
    reconciler, _ = rig(workload, depth(60))
    state = await run_passes(reconciler, 1, target=web)
    assert said_everywhere(reconciler, state) == (6, 6, 6, None)
    state = await run_passes(reconciler, 2, target=paused)
    assert workload.replicas == 3
    assert said_everywhere(reconciler, state) == (3, 3, None, None)
    assert state.to_json()["decision"]["latest"] is False


async def test_shadow_mode_switched_off_takes_its_comparison_with_it() -> None:
    """In shadow mode our 4 against the HPA's 3 on both views; a reload without shadow
    (the HPA still there: the target is left to it) leaves no comparison anywhere."""
    [shadow] = targets("web", extra="shadow = true")
    owners = Owners(owners=("HorizontalPodAutoscaler shop/web",),
                    reported=(("HorizontalPodAutoscaler shop/web", 3),))
    reconciler, _ = rig(Workload(), depth(40), owners=owners)
    state = await run_passes(reconciler, 1, target=shadow)
    assert said_everywhere(reconciler, state) == (2, 4, 4, (4, 3))
    state = await run_passes(reconciler, 1, target=WEB)
    assert state.last_outcome == "blocked"
    assert said_everywhere(reconciler, state) == (2, None, None, None)


async def test_the_fallback_count_is_the_desired_count_everywhere() -> None:
    """Held at the fallback's 5: desired 5 on both views every pass, not the decision's 2
    (the target's count, as no metric is valid)."""
    [target] = targets("web", extra="fallback = { failureThreshold = 3, replicas = 5 }")
    workload = Workload()
    reconciler, _ = rig(workload, MetricUnavailable(reason="no series"))
    state = await run_passes(reconciler, 4, target=target)
    assert workload.replicas == 5
    assert said_everywhere(reconciler, state)[:2] == (5, 5)
    assert state.to_json()["fallbackActive"] is True


class StatusReadDuringFetch(Depths):
    """Metrics that take a while: ``/status`` is read, as a user may at any moment, while
    they are fetched (the pass has observed every target and decided none)."""

    reconciler: Reconciler

    def __init__(self, values: dict[str, MetricValues]) -> None:
        super().__init__(values)
        self.read: list[dict[str, dict[str, Any]]] = []

    async def fetch_metrics(self, wanted: Sequence[MetricsWanted], *,
                            deadline: float) -> FetchedMetrics:
        self.read.append({key: state.to_json() for key, state in self.reconciler.states.items()})
        return await super().fetch_metrics(wanted, deadline=deadline)


async def test_a_paused_target_is_shown_paused_in_the_middle_of_a_pass() -> None:
    """Held at 2 by its annotation beside a target that is autoscaled: ``/status`` read while
    the pass fetches the other's metrics says paused, as it does between passes (it said not
    paused there: the pass forgot the pause when it read the scale and set it again only
    when it settled the target, after the fetch)."""
    cluster = Fleet({"held": {PAUSED_REPLICAS_ANNOTATION: "2"}})
    metrics = StatusReadDuringFetch({"web": depth(20)})
    reconciler = Reconciler(scales=cluster, pods=NoPods(), metrics=metrics, events=cluster,
                            owners=Owners(), options=ReconcileOptions(),
                            telemetry=DaemonMetrics())
    metrics.reconciler = reconciler
    fleet = targets("web", "held")
    held = fleet[1].key
    async with asyncio.timeout(10):
        for _ in range(3):
            await reconciler.run_pass(fleet, deadline=time.monotonic() + 5)
    paused = f"annotation {PAUSED_REPLICAS_ANNOTATION}"
    assert [read[held].get("paused") for read in metrics.read] == [paused] * 3
    assert reconciler.states[held].to_json()["paused"] == paused
    assert "paused" not in reconciler.states[fleet[0].key].to_json()
    assert cluster.log == []


async def test_memory_keeps_only_the_recommendations_a_window_can_use_and_scales_down_on_time(
) -> None:
    """Between passes a target keeps only the recommendations that can still decide a
    window (as the store does): 1 in a steady run, not upstream's one a pass over the
    longest window (12 here, 11 at a 30 s period and 5 minutes). The twin: the scale-down
    held by the default 300 s window lands at the first pass after the last high
    recommendation left it, not one pass later, and not earlier (depth 60 wants 6, then 20
    wants 2). Without a ``behavior``, upstream's ``stabilizeRecommendation`` drops only
    recommendations ``Before`` the cutoff: one exactly 300 s old still holds."""
    now = [1_000.0]
    workload = Workload(replicas=6)
    values = {"web": depth(60)}
    reconciler = Reconciler(
        scales=workload, pods=NoPods(), metrics=Depths(values), events=Events(),
        owners=Owners(), options=ReconcileOptions(), telemetry=DaemonMetrics(),
        clock=lambda: now[0])
    kept = []
    for _ in range(20):  # 570 s of a steady 6
        state = await run_passes(reconciler)
        kept.append(len(state.history.recommendations))
        now[0] += 30
    assert workload.replicas == 6
    assert max(kept[:10]) <= 2, kept
    assert kept[-1] == 1, kept
    last_high = now[0] - 30
    values["web"] = depth(20)
    counts = []
    while now[0] <= last_high + 330:
        state = await run_passes(reconciler)
        counts.append((now[0] - last_high, workload.replicas))
        assert len(state.history.recommendations) <= 3, state.history.recommendations
        now[0] += 30
    assert counts == [(30.0 * n, 6) for n in range(1, 11)] + [(330.0, 2)], counts
