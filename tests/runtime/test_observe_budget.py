"""One target whose API reads hang must not hold back the others' pass.

The ports are filled by the in-memory doubles of ``tests/runtime/doubles.py``."""

from __future__ import annotations

import asyncio
import time

import pytest

from autoscaler.algorithm.reasons import Reason
from autoscaler.config import ScaleTargetRef
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from tests.runtime.doubles import FixedScale, NoPods, QueueDepth, Quiet, Scales, targets


@pytest.mark.parametrize("concurrency", [1, 10])
async def test_hanging_reads_fail_their_targets_and_the_others_are_decided(
    concurrency: int,
) -> None:
    """The observation budget is one deadline for the whole phase: with one worker, two
    hanging reads in a row still end it after half the pass, not after twice that."""
    reconciler = Reconciler(scales=Scales("stuck", "stalled"), pods=NoPods(),
                            metrics=QueueDepth(), events=Quiet(), owners=Quiet(),
                            options=ReconcileOptions(concurrency=concurrency),
                            telemetry=DaemonMetrics())
    fleet = targets("stuck", "stalled", "web", "api")
    started = time.monotonic()
    async with asyncio.timeout(10):
        await reconciler.run_pass(fleet, deadline=started + 2.0)
    assert time.monotonic() - started < 1.8
    states = {t.scale_target_ref.name: reconciler.states[t.key] for t in fleet}
    for name in ("stuck", "stalled"):
        assert states[name].last_outcome == "error"
        assert "within the pass's 1.0s for observation" in (states[name].last_error or "")
        assert any(c.reason is Reason.FAILED_GET_SCALE for c in states[name].conditions)
    for name in ("web", "api"):
        assert states[name].last_outcome == "ok"
        decision = states[name].last_decision
        assert decision is not None
        assert decision.desired_replicas == 2


def reconciler(scales: Scales, concurrency: int) -> Reconciler:
    return Reconciler(scales=scales, pods=NoPods(), metrics=QueueDepth(), events=Quiet(),
                      owners=Quiet(), options=ReconcileOptions(concurrency=concurrency),
                      telemetry=DaemonMetrics())


async def test_waiting_for_a_slot_another_pass_holds_is_not_a_slow_read() -> None:
    """Passes share the concurrency limit. A pass whose targets wait for the slot a slow
    pass holds past their deadline still reads them (from the caches) and decides them."""
    shared = reconciler(Scales(slow=("slow",)), concurrency=1)
    slow_fleet, quick_fleet = targets("slow"), targets("web")
    async with asyncio.timeout(10):
        holding = asyncio.create_task(
            shared.run_pass(slow_fleet, deadline=time.monotonic() + 10))
        await asyncio.sleep(0.1)  # the slow pass holds the only slot for 1.5 s
        await shared.run_pass(quick_fleet, deadline=time.monotonic() + 1.0)  # 0.5 s budget
        await holding
    for target in (*slow_fleet, *quick_fleet):
        state = shared.states[target.key]
        assert state.last_outcome == "ok", state.last_error


async def test_a_read_that_swallows_its_cancellation_does_not_lift_the_deadline() -> None:
    """The worker arms a fresh timer after such a read, so a hanging read after it is still
    abandoned at the deadline (with one worker: no other worker could take it over)."""
    shared = reconciler(Scales("stuck", stubborn=("stubborn",)), concurrency=1)
    fleet = targets("stubborn", "stuck", "web")
    started = time.monotonic()
    async with asyncio.timeout(10):
        await shared.run_pass(fleet, deadline=started + 2.0)
    assert time.monotonic() - started < 1.8
    states = {t.scale_target_ref.name: shared.states[t.key] for t in fleet}
    assert states["stuck"].last_outcome == "error"
    assert "within the pass's 1.0s for observation" in (states["stuck"].last_error or "")
    assert states["web"].last_outcome == "ok"


class CachedScales(Scales):
    """Scales of ``cached`` targets come from memory (``replicas`` of them); the others only
    from ``get_scale``, which records who asked."""

    def __init__(self, *cached: str) -> None:
        super().__init__()
        self.cached, self.replicas, self.asked = cached, 2, list[str]()

    def cached_scale(self, namespace: str, ref: ScaleTargetRef) -> FixedScale | None:
        if ref.name not in self.cached:
            return None
        return FixedScale(spec_replicas=self.replicas, status_replicas=self.replicas)

    async def get_scale(self, namespace: str, ref: ScaleTargetRef, *,
                        fresh: bool = False) -> FixedScale:
        self.asked.append(ref.name)
        return await super().get_scale(namespace, ref)


class ListedOwners(Quiet):
    """An HPA owns ``owned``; the owner lists of ``unlisted`` must be fetched."""

    def __init__(self, *, owned: str, unlisted: str) -> None:
        self.owned, self.unlisted, self.asked = owned, unlisted, list[str]()

    def cached_owners(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...] | None:
        if ref.name == self.unlisted:
            return None
        return ("HorizontalPodAutoscaler legacy-hpa",) if ref.name == self.owned else ()

    async def owners_of(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...]:
        self.asked.append(ref.name)
        return ()


async def test_targets_the_caches_answer_for_are_read_without_asking() -> None:
    """A target is read from memory when both its scale and its owners are there; the
    others are asked (both reads), and the cached reads get the same checks (ownership,
    drift) as the asked ones."""
    scales = CachedScales("web", "api", "legacy")
    owners = ListedOwners(owned="legacy", unlisted="api")
    shared = Reconciler(scales=scales, pods=NoPods(), metrics=QueueDepth(), events=Quiet(),
                        owners=owners, options=ReconcileOptions(), telemetry=DaemonMetrics())
    fleet = targets("web", "api", "cron", "legacy")
    states = {t.scale_target_ref.name: shared.state(t.key) for t in fleet}
    async with asyncio.timeout(10):
        await shared.run_pass(fleet, deadline=time.monotonic() + 5)
        assert (scales.asked, owners.asked) == (["api", "cron"], ["api", "cron"])
        assert {name: s.last_outcome for name, s in states.items()} == {
            "web": "ok", "api": "ok", "cron": "ok", "legacy": "blocked"}
        assert states["legacy"].blocked_by == ("HorizontalPodAutoscaler legacy-hpa",)
        scales.replicas = 3  # someone else scaled the cached targets
        await shared.run_pass(fleet, deadline=time.monotonic() + 5)
    assert states["web"].drift == "replicas changed from 2 to 3 outside the autoscaler"
    assert states["cron"].drift is None
    assert scales.asked == ["api", "cron", "api", "cron"]
