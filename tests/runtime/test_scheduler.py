"""The scheduler: batching by sync period, no overlapping passes, leader gating, drain."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from autoscaler.runtime.scheduler import Scheduler


@dataclass(frozen=True)
class Target:
    key: str
    sync_period: float


class Recorder:
    """Collects passes; each pass can be held open to simulate a slow pass."""

    def __init__(self, hold: float = 0.0) -> None:
        self.passes: list[list[str]] = []
        self.started: list[float] = []
        self.ended: list[float] = []
        self.hold = hold
        self.running = self.max_running = 0

    async def __call__(self, targets: Sequence[Any], deadline: float) -> None:
        self.passes.append(sorted(t.key for t in targets))
        self.started.append(time.monotonic())
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            await asyncio.sleep(self.hold)
        finally:
            self.running -= 1
            self.ended.append(time.monotonic())


async def run_for(scheduler: Scheduler, seconds: float) -> None:
    await run_until(scheduler, lambda: False, timeout=seconds)


async def run_until(scheduler: Scheduler, done: Callable[[], bool], *, timeout: float) -> None:
    """Run the scheduler until ``done()`` holds or ``timeout`` seconds pass, then drain it.

    Tests that count passes wait for the passes they need rather than for a wall-clock span,
    so a stalled event loop on a loaded machine delays them but cannot fail them."""
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    limit = time.monotonic() + timeout
    while time.monotonic() < limit:
        if done():
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 2)
    await scheduler.drain(2)


async def test_targets_sharing_a_period_run_in_one_pass() -> None:
    """Targets with the same sync period are reconciled together (their queries batch)."""
    recorder = Recorder()
    scheduler = Scheduler(recorder, jitter=0, rng=random.Random(1))
    scheduler.set_targets([Target("a", 0.2), Target("b", 0.2), Target("c", 10)])
    await run_until(scheduler, lambda: recorder.passes.count(["a", "b"]) == 2, timeout=5)
    assert recorder.passes[0] in (["a", "b"], ["c"])
    assert recorder.passes.count(["a", "b"]) == 2
    assert recorder.passes.count(["c"]) == 1  # its period is 10 s
    first, second = (at for at, keys in zip(recorder.started, recorder.passes, strict=True)
                     if keys == ["a", "b"])
    assert second - first >= 0.2 - 1e-3  # one period apart, not sooner


async def test_a_target_in_flight_is_not_reconciled_twice() -> None:
    """A pass slower than the period makes the next pass skip, never overlap."""
    recorder = Recorder(hold=0.35)
    scheduler = Scheduler(recorder, jitter=0)
    scheduler.set_targets([Target("a", 0.1)])
    await run_until(scheduler, lambda: len(recorder.passes) == 2, timeout=5)
    assert recorder.max_running == 1
    assert len(recorder.passes) == 2
    # The passes due at 0.1, 0.2 and 0.3 s were skipped: the next began after the first ended.
    assert recorder.started[1] >= recorder.ended[0]


async def test_no_pass_while_not_leader() -> None:
    """With the gate closed (standby), nothing runs; opening it starts passes."""
    recorder = Recorder()
    leader = False
    scheduler = Scheduler(recorder, jitter=0, may_run=lambda: leader)
    scheduler.set_targets([Target("a", 0.1)])
    await run_for(scheduler, 0.25)
    assert recorder.passes == []
    leader = True
    await run_for(scheduler, 0.15)
    assert recorder.passes


def test_set_targets_reports_removed_keys() -> None:
    """A reload that drops a target says which, so its state can be forgotten."""
    scheduler = Scheduler(Recorder())
    scheduler.set_targets([Target("a", 15), Target("b", 15)])
    assert scheduler.set_targets([Target("b", 15), Target("c", 30)]) == ["a"]
