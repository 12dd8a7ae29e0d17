"""What this instance does first whenever it starts to act (at start, or on gaining the
Lease): read the saved history, then let passes run.

The read retries as long as it takes (``HistoryKeeper.restore``). The API server's clock is
waited for first (briefly: any answer tells it), to put the stored timestamps on ours. A
history that cannot be decoded is said loudly: a log line, a metric and an Event on every
target. Forecast history from Prometheus is then briefly waited for, so predicted metrics'
models are usable on the first pass.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import structlog

from autoscaler.algorithm import EventReason
from autoscaler.errors import StateSetAsideError
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.backfill import HistoryBackfill
from autoscaler.runtime.history import HistoryKeeper, Restored
from autoscaler.runtime.ports import EventPort
from autoscaler.runtime.scheduler import Scheduler

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig

log = structlog.get_logger("autoscaler.app")  # the daemon's lines, as before the split


class HistoryRestore:
    def __init__(
        self,
        *,
        keeper: HistoryKeeper,
        backfill: HistoryBackfill,
        scheduler: Scheduler,
        history_read: asyncio.Event,
        server_answered: asyncio.Event,
        server_wait: float,
        targets: Callable[[], Sequence[TargetConfig]],
        events: EventPort,
        concurrency: int,
        telemetry: DaemonMetrics,
    ) -> None:
        self.keeper, self.backfill, self.scheduler = keeper, backfill, scheduler
        self.history_read, self.server_answered = history_read, server_answered
        self.server_wait = server_wait
        """Seconds the API server's first answer is waited for (its request timeout)."""
        self.targets, self.events = targets, events
        self.concurrency, self.telemetry = concurrency, telemetry

    async def run(self) -> None:
        """Read the history (retrying as long as it takes), then let passes run."""
        self.history_read.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.server_answered.wait(), self.server_wait)
        restored = await self.keeper.restore(lambda: [t.key for t in self.targets()])
        log.info("history restored", store=self.keeper.store.description,
                 targets=restored.targets, removed_targets_kept=restored.retired,
                 clean_stop=restored.clean)
        if restored.set_aside is not None:
            await self._report_set_aside(restored, restored.set_aside)
        # Forecast history from Prometheus for the predicted metrics the store had less
        # than a season of: briefly waited for, so their models are usable on the first pass.
        self.backfill.want(self.targets(), again=True)
        await self.backfill.settle()
        self.history_read.set()
        self.scheduler.poke()

    async def _report_set_aside(self, restored: Restored, error: StateSetAsideError) -> None:
        """Loudly: a log line, a metric and an Event on every target whose history is gone."""
        message = (f"the saved history could not be decoded ({error}); it was kept as "
                   f"{error.kept_as} and the stabilization windows and scale policies of "
                   "every target start fresh")
        log.error("saved history set aside: starting fresh", store=self.keeper.store.description,
                  kept_as=error.kept_as, error=str(error), targets=restored.targets)
        self.telemetry.errors.labels(reason="state_set_aside").inc()
        limit = asyncio.Semaphore(max(1, self.concurrency))

        async def event(target: TargetConfig) -> None:
            async with limit:
                with contextlib.suppress(Exception):  # an event is never worth more
                    await self.events.record(
                        target.namespace, target.scale_target_ref, warning=True,
                        reason=EventReason.HISTORY_UNREADABLE, message=message)

        await asyncio.gather(*(event(t) for t in self.targets()))
