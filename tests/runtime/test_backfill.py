"""Forecast history at start: asked once per predicted metric that lacks a season, off the
passes, again after a backoff when it failed, and never applied to a target a reload changed.

The history port is ``test_prediction``'s ``PastDepth`` (a Prometheus holding three seasons)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable

from autoscaler.algorithm.forecast import Series
from autoscaler.runtime.backfill import HistoryBackfill
from autoscaler.runtime.status import TargetState
from tests.runtime.test_prediction import START, STEP, PastDepth, target

WORKER = target(forecast_only=True)
KEY = WORKER.key


class Clock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def filler(history: PastDepth, *, clock: Callable[[], float] | None = None, may_run: bool = True,
           backoff: tuple[float, float] = (30.0, 1800.0)) -> tuple[
        HistoryBackfill, dict[str, TargetState]]:
    states: dict[str, TargetState] = {}

    def state_of(key: str) -> TargetState:
        return states.setdefault(key, TargetState(key=key))

    made = HistoryBackfill(history, state_of, clock=clock or Clock(), may_run=lambda key: may_run,
                           backoff=backoff)
    return made, states


async def test_each_predicted_metric_is_asked_once_for_the_buckets_the_series_keeps() -> None:
    """One query per predicted metric, over the closed buckets kept (three seasons), ending
    before the bucket of now (this run reads that one); settling again asks nothing."""
    history = PastDepth()
    made, states = filler(history)
    made.want([WORKER])
    await made.settle()
    await made.settle()
    now = START // STEP * STEP
    assert history.asked == [(KEY, 0, now - 30 * STEP, now - STEP, STEP)]
    (series,) = states[KEY].forecasts.values()
    assert len(series.values) == 30


async def test_a_series_with_a_season_already_is_not_asked_for() -> None:
    """The store had a season (or more) of this metric: nothing to ask Prometheus."""
    history = PastDepth()
    made, states = filler(history)
    first = START // STEP - 10
    states[KEY] = TargetState(key=KEY, forecasts={"0/External/depth": Series(
        step=STEP, first=int(first), values=(1.0,) * 10)})
    made.want([WORKER])
    await made.settle()
    assert history.asked == []


async def test_nothing_is_asked_before_the_saved_history_is_read() -> None:
    """An answer applied before the store is read would be overwritten by it: wait."""
    history = PastDepth()
    made, _ = filler(history, may_run=False)
    made.want([WORKER])
    await made.settle()
    assert history.asked == []


async def test_a_failure_is_asked_again_after_the_backoff_and_not_before() -> None:
    """Failed: not asked again until the backoff has passed; then once, and it lands."""
    history, clock = PastDepth(failures=1), Clock()
    made, states = filler(history, clock=clock)
    made.want([WORKER])
    await made.settle()
    clock.now += 29
    await made.settle()
    assert len(history.asked) == 1
    clock.now += 1
    await made.settle()
    assert len(history.asked) == 2
    assert states[KEY].forecasts


async def test_the_backoff_doubles_up_to_its_bound() -> None:
    """30 s, 60 s, 120 s...: a Prometheus that stays down is asked less and less often."""
    history, clock = PastDepth(failures=10), Clock()
    made, _ = filler(history, clock=clock, backoff=(30.0, 60.0))
    made.want([WORKER])
    waits = []
    for _ in range(4):
        before = len(history.asked)
        waited = 0
        while len(history.asked) == before:
            await made.settle()
            clock.now += 1
            waited += 1
        waits.append(waited)
    assert waits[1:] == [30, 60, 60]


async def test_the_loop_asks_again_by_itself_after_the_backoff() -> None:
    """``run`` (the daemon's background task) retries when the backoff runs out."""
    history = PastDepth(failures=1)
    made, states = filler(history, clock=time.time, backoff=(0.05, 0.05))  # the loop sleeps
    made.want([WORKER])
    task = asyncio.create_task(made.run())
    try:
        for _ in range(100):
            if states.get(KEY) and states[KEY].forecasts:
                break
            await asyncio.sleep(0.02)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert len(history.asked) == 2
    assert states[KEY].forecasts


async def test_a_reload_asks_for_what_it_adds_or_changes_and_nothing_else() -> None:
    """Unchanged predictions are not asked again; a changed one is; the restore asks anew."""
    history = PastDepth(failures=0)
    made, states = filler(history)
    made.want([WORKER])
    await made.settle()
    states.clear()  # (as if the store had lost it: only ``again`` looks anew)
    made.want([WORKER])
    await made.settle()
    assert len(history.asked) == 1
    changed = dataclasses.replace(WORKER, predictions=(dataclasses.replace(
        WORKER.predictions[0], horizon=180.0),))
    made.want([changed])
    await made.settle()
    assert len(history.asked) == 2
    states.clear()
    made.want([changed], again=True)
    await made.settle()
    assert len(history.asked) == 3


async def test_an_answer_for_a_target_a_reload_removed_is_dropped() -> None:
    """The target went away while its history was being read: nothing is applied."""
    history = PastDepth()
    made, states = filler(history)
    made.want([WORKER])
    tasks = made.start_due()
    made.want([])
    await asyncio.gather(*tasks)
    assert not states.get(KEY, TargetState(key=KEY)).forecasts


async def test_an_answer_for_a_target_no_longer_ours_is_dropped() -> None:
    """The gate closed while its history was being read (a ring bucket lost, its state
    dropped): nothing is applied, and no state is made again for a target another instance
    acts for. It is asked again if the target comes back (``want(..., again=True)``)."""
    history = PastDepth()
    ours = {KEY}
    states: dict[str, TargetState] = {}
    made = HistoryBackfill(history, lambda key: states.setdefault(key, TargetState(key=key)),
                           clock=Clock(), may_run=lambda key: key in ours)
    made.want([WORKER])
    tasks = made.start_due()
    ours.clear()
    states.clear()
    await asyncio.gather(*tasks)
    assert KEY not in states
