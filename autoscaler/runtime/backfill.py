"""Forecast history from Prometheus, so a model is usable on day one (issue #27).

When the daemon starts acting (at start and on gaining leadership, right after the saved
history is read) and when a reload adds a target or a prediction, every predicted metric
whose series holds less than a season of closed buckets gets one range query of its own
total over the history the predictor keeps (``HistoryPort.metric_history``). The points fill
the series' gaps (a bucket the daemon read itself keeps its value: ``series.backfill``); the
model is rebuilt over them at the target's next pass.

What it guarantees:

- **Off the passes.** Each query runs in a task of its own, at most ``CONCURRENCY`` at once
  (they share the Prometheus worker pool with the passes' queries). Only at start does the
  daemon wait for them, at most ``START_WAIT`` seconds, before its first pass, so a model
  with history in Prometheus is usable on that pass; what is not back by then lands later.
- **Once.** A metric is asked for once per start or reload that adds it (a success with
  no data is not asked again). A failure is retried after a backoff (``BACKOFF_INITIAL``
  seconds, doubling up to ``BACKOFF_MAX``), each said in a log line, for as long as the
  metric still lacks a season.
- **Never stale.** An answer for a target or prediction that a reload changed or removed
  meanwhile is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from autoscaler.runtime.ports import HistoryPort
from autoscaler.runtime.prediction import apply_history, closed_buckets
from autoscaler.runtime.status import TargetState

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig

log = structlog.get_logger("autoscaler.backfill")

CONCURRENCY = 2
START_WAIT = 5.0
"""Seconds the first pass after a start waits for the history queries at most."""
BACKOFF_INITIAL = 30.0
BACKOFF_MAX = 1800.0


@dataclass(slots=True, kw_only=True)
class _Wanted:
    """One predicted metric of one target, and how asking for its history went."""

    target: TargetConfig
    index: int
    signature: tuple[object, ...]
    failures: int = 0
    retry_at: float = 0.0
    task: asyncio.Task[None] | None = None
    done: bool = False

    @property
    def metric(self) -> str:
        return self.target.spec.metrics[self.index].name


def _signature(target: TargetConfig, index: int) -> tuple[object, ...]:
    """What the query and the series depend on: a reload changing any of it asks again."""
    return (target.namespace, target.scale_target_ref, target.prometheus,
            target.spec.metrics[index], target.metric_queries[index],
            target.predictions[index])


class HistoryBackfill:
    def __init__(
        self,
        port: HistoryPort,
        state_of: Callable[[str], TargetState],
        *,
        may_run: Callable[[str], bool] = lambda key: True,
        clock: Callable[[], float] = time.time,
        concurrency: int = CONCURRENCY,
        backoff: tuple[float, float] = (BACKOFF_INITIAL, BACKOFF_MAX),
    ) -> None:
        """``state_of`` gives (or makes) a target's state; ``may_run(key)`` is false while
        the saved history is not read (an answer applied before it would be overwritten) or
        another instance acts for that target."""
        self._port, self._state_of, self._may_run = port, state_of, may_run
        self._clock = clock
        self._limit = asyncio.Semaphore(max(1, concurrency))
        self._backoff = backoff
        self._wanted: dict[tuple[str, int], _Wanted] = {}
        self._changed = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    def want(self, targets: Sequence[TargetConfig], *, again: bool = False) -> None:
        """The targets in force (at start, at each reload). A predicted metric not seen
        before, or whose target or prediction changed, is asked for; with ``again`` (the
        history was just read from the store), every one is looked at anew."""
        wanted: dict[tuple[str, int], _Wanted] = {}
        for target in targets:
            for index, settings in enumerate(target.predictions):
                if settings is None:
                    continue
                key, signature = (target.key, index), _signature(target, index)
                known = self._wanted.get(key)
                if known is not None and known.signature == signature and not again:
                    known.target = target
                    wanted[key] = known
                else:
                    wanted[key] = _Wanted(target=target, index=index, signature=signature)
        self._wanted = wanted
        self._changed.set()

    def start_due(self) -> list[asyncio.Task[None]]:
        """Start the queries due now; the tasks in flight."""
        now = self._clock()
        for item in self._wanted.values():
            if (item.done or item.task is not None or item.retry_at > now
                    or not self._may_run(item.target.key)):
                continue
            state = self._state_of(item.target.key)
            season = item.target.predictions[item.index]
            if season is not None and closed_buckets(
                    state, item.target, item.index) >= season.season_buckets:
                item.done = True  # a season is there already (the store had it)
                continue
            item.task = task = asyncio.get_running_loop().create_task(self._fetch(item))
            self._tasks.add(task)  # a strong reference until done, even if a reload drops it
            task.add_done_callback(self._tasks.discard)
        return [item.task for item in self._wanted.values() if item.task is not None]

    async def settle(self, timeout: float = START_WAIT) -> None:
        """Start what is due and wait for it, at most ``timeout`` seconds."""
        tasks = self.start_due()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    async def run(self) -> None:
        """Starts what becomes due (a reload, a backoff that ran out); runs until cancelled."""
        while True:
            self._changed.clear()
            self.start_due()
            now = self._clock()
            waits = [item.retry_at - now for item in self._wanted.values()
                     if not item.done and item.task is None and item.retry_at > now]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(waits, default=None))

    def poke(self) -> None:
        """Look again now (the history was read, leadership was gained)."""
        self._changed.set()

    async def _fetch(self, item: _Wanted) -> None:
        settings = item.target.predictions[item.index]
        assert settings is not None  # only predicted metrics are wanted
        try:
            async with self._limit:
                # One point at the start of each closed bucket the series keeps; the bucket
                # of now is this run's to read.
                now = math.floor(self._clock() / settings.step)
                start, end = now - settings.kept_buckets, now - 1
                points = await self._port.metric_history(
                    item.target, item.index, start=start * settings.step,
                    end=end * settings.step, step=settings.step)
        except Exception as error:  # any adapter fault: said, and asked again later
            item.failures += 1
            initial, longest = self._backoff
            delay = min(longest, initial * 2 ** (item.failures - 1))
            item.retry_at = self._clock() + delay
            log.warning("forecast history not read from Prometheus: trying again later",
                        target=item.target.key, metric=item.metric,
                        error=str(error) or type(error).__name__, retry_in=delay)
            self._changed.set()
        else:
            item.done = True
            self._apply(item, points)
        finally:
            item.task = None

    def _apply(self, item: _Wanted, points: Sequence[tuple[float, float]]) -> None:
        if self._wanted.get((item.target.key, item.index)) is not item:
            return  # a reload changed or removed it meanwhile
        if not self._may_run(item.target.key):
            return  # another instance acts for it now (asked again if it comes back)
        try:
            filled = apply_history(self._state_of(item.target.key), item.target, item.index,
                                   points)
        except Exception:  # a bug must not stop the others: this metric learns from passes
            log.exception("forecast history could not be applied", target=item.target.key,
                          metric=item.metric)
            return
        log.info("forecast history read from Prometheus", target=item.target.key,
                 metric=item.metric, points=len(points), buckets=filled)
