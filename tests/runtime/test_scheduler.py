"""The scheduler: batching by sync period, no overlapping passes, leader gating, drain.

The tests run in fake time (looptime): the event loop's clock only moves when every task
waits, by exactly what they wait for, so each period and hold below is exact, and none of
these tests sleeps for real."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from autoscaler.runtime.scheduler import Scheduler

pytestmark = pytest.mark.looptime


@dataclass(frozen=True)
class Target:
    key: str
    sync_period: float


def now() -> float:
    return asyncio.get_running_loop().time()


def scheduler_for(run_pass: Any, **options: Any) -> Scheduler:
    """A scheduler on the event loop's (fake) clock."""
    return Scheduler(run_pass, monotonic=now, **options)


class Recorder:
    """Collects passes; each pass can be held open to stand for a slow pass."""

    def __init__(self, hold: float = 0.0) -> None:
        self.passes: list[list[str]] = []
        self.started: list[float] = []
        self.ended: list[float] = []
        self.hold = hold
        self.running = self.max_running = 0

    async def __call__(self, targets: Sequence[Any], deadline: float) -> None:
        self.passes.append(sorted(t.key for t in targets))
        self.started.append(now())
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            await asyncio.sleep(self.hold)
        finally:
            self.running -= 1
            self.ended.append(now())


async def run_for(scheduler: Scheduler, seconds: float) -> None:
    """Run the scheduler for ``seconds`` of loop time, then stop and drain it."""
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.wait_for(task, 2)
    await scheduler.drain(2)


async def run_until(scheduler: Scheduler, done: Callable[[], bool], *, timeout: float) -> None:
    """Run the scheduler until ``done()`` holds (checked every 10 ms of loop time) or
    ``timeout`` seconds of loop time pass, then stop and drain it."""
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    limit = now() + timeout
    while now() < limit and not done():  # noqa: ASYNC110 - done() reads the recorder
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 2)
    await scheduler.drain(2)


async def test_targets_sharing_a_period_run_in_one_pass() -> None:
    """Targets with the same sync period are reconciled together (their queries batch)."""
    recorder = Recorder()
    scheduler = scheduler_for(recorder, jitter=0, rng=random.Random(1))
    scheduler.set_targets([Target("a", 0.2), Target("b", 0.2), Target("c", 10)])
    await run_until(scheduler, lambda: recorder.passes.count(["a", "b"]) == 2, timeout=5)
    assert recorder.passes[0] in (["a", "b"], ["c"])
    assert recorder.passes.count(["a", "b"]) == 2
    assert recorder.passes.count(["c"]) == 1  # its period is 10 s
    first, second = (at for at, keys in zip(recorder.started, recorder.passes, strict=True)
                     if keys == ["a", "b"])
    assert second - first == pytest.approx(0.2, abs=0.011)  # one period apart, no sooner


async def test_a_target_in_flight_is_not_reconciled_twice() -> None:
    """A pass slower than the period makes the next pass skip, never overlap."""
    recorder = Recorder(hold=0.35)
    scheduler = scheduler_for(recorder, jitter=0)
    scheduler.set_targets([Target("a", 0.1)])
    await run_until(scheduler, lambda: len(recorder.passes) == 2, timeout=5)
    assert recorder.max_running == 1
    assert len(recorder.passes) == 2
    # The passes due at 0.1, 0.2 and 0.3 s were skipped: the next began after the first ended.
    assert recorder.started[1] >= recorder.ended[0]
    assert recorder.started[1] - recorder.ended[0] <= 0.1 + 0.011  # and within a period


async def test_no_pass_while_not_leader() -> None:
    """With the gate closed (standby), nothing runs; opening it starts passes."""
    recorder = Recorder()
    leader = False
    scheduler = scheduler_for(recorder, jitter=0, may_run=lambda: leader)
    scheduler.set_targets([Target("a", 0.1)])
    await run_for(scheduler, 5.0)  # fifty periods
    assert recorder.passes == []
    leader = True
    scheduler.poke()
    await run_for(scheduler, 0.15)
    assert recorder.passes


async def test_the_jitter_spreads_a_group_within_its_share_of_the_period() -> None:
    """Each pass of a 10 s group comes 9 to 11 s after the one before (jitter 0.1)."""
    recorder = Recorder()
    scheduler = scheduler_for(recorder, jitter=0.1, rng=random.Random(7))
    scheduler.set_targets([Target("a", 10)])
    await run_until(scheduler, lambda: len(recorder.passes) == 6, timeout=120)
    gaps = [b - a for a, b in zip(recorder.started, recorder.started[1:], strict=False)]
    assert len(gaps) == 5
    assert all(9 - 0.011 <= gap <= 11 + 0.011 for gap in gaps), gaps
    assert len({round(gap, 3) for gap in gaps}) > 1  # spread, not one fixed offset


def test_set_targets_reports_removed_keys() -> None:
    """A reload that drops a target says which, so its state can be forgotten."""
    scheduler = Scheduler(Recorder())
    scheduler.set_targets([Target("a", 15), Target("b", 15)])
    assert scheduler.set_targets([Target("b", 15), Target("c", 30)]) == ["a"]


SYNC_PERIODS = """\
[daemon]
syncPeriod = 4

[[autoscaler]]
namespace = "shop"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "fast" }
maxReplicas = 3
%s

[[autoscaler]]
namespace = "shop"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "plain" }
maxReplicas = 3
"""


async def test_sync_period_seconds_from_the_config_sets_a_target_s_period() -> None:
    """KEP-6003's syncPeriodSeconds gives one target its own period, the others keep the
    daemon's, and a reload without it hands the target back to the daemon's (as the POC's
    TestPerItemIntervalRateLimiter_DefaultInterval, _PerItemOverride and _RemoveItem)."""
    from autoscaler.config import parse_config

    recorder = Recorder()
    scheduler = scheduler_for(recorder, jitter=0)
    scheduler.set_targets(parse_config(SYNC_PERIODS % "syncPeriodSeconds = 1").targets)
    await run_for(scheduler, 4.5)
    fast, plain = "shop/Deployment/fast", "shop/Deployment/plain"
    assert recorder.passes.count([fast]) == 5  # at 0, 1, 2, 3 and 4 s
    assert recorder.passes.count([plain]) == 2  # at 0 and 4 s
    recorder.passes.clear()
    scheduler.set_targets(parse_config(SYNC_PERIODS % "").targets)
    await run_for(scheduler, 4.5)
    # One group again, in the surviving 4 s group's phase: its next pass was due at 8 s.
    assert recorder.passes == [[fast, plain]]
