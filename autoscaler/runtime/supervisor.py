"""The daemon's background tasks that matter, and what it means when one of them dies.

A task started here is expected to run until the daemon stops (passes, reloads, the config
watch, leadership, the heartbeat) or to finish on its own (``finishes=True``: the cache sync,
a history restore). One that ends by an exception, or returns when it should run forever, is
recorded in ``failures``: ``/healthz`` then fails and the watchdog pings stop, so systemd or
the kubelet restarts a daemon that would otherwise look alive while no longer reloading,
scaling or renewing its lease.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

from autoscaler.observability.logs import debug_traceback

log = structlog.get_logger("autoscaler.supervisor")


class Supervisor:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self.failures: dict[str, str] = {}
        """Task name -> why it ended, for every task that ended when it should not have."""
        self.stopping = False

    def start(self, name: str, coroutine: Coroutine[Any, Any, Any], *,
              finishes: bool = False) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._ended(name, done, finishes=finishes))
        return task

    def _ended(self, name: str, task: asyncio.Task[Any], *, finishes: bool) -> None:
        self._tasks.discard(task)
        if task.cancelled() or self.stopping:
            return
        error = task.exception()
        if error is None and finishes:
            return
        why = f"{type(error).__name__}: {error}" if error is not None else "returned"
        self.failures[name] = why
        log.error("a background task died: the daemon reports itself unhealthy", task=name,
                  error=why, exc_info=debug_traceback(error) if error else None)

    async def cancel_all(self, timeout: float) -> None:
        """Stop every task (waiting at most ``timeout`` for them to end)."""
        self.stopping = True
        tasks = [task for task in self._tasks if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
