"""A bounded pool of workers that every reconcile pass shares.

``each`` runs a piece of work on every item of a sequence, at most ``concurrency`` at once
across all passes, by that many workers: not a task per item (10,000 targets made 20,000
tasks a pass). With ``until`` an item still waiting then is abandoned and a substitute
result given, while the items after it still run; the time an item spends waiting for a
slot another pass holds does not count against it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
U = TypeVar("U")


class WorkerPool:
    """At most ``concurrency`` pieces of work at once, whichever pass they belong to."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = max(1, concurrency)
        self._limit = asyncio.Semaphore(self.concurrency)

    async def each(
        self, items: Sequence[U], work: Callable[[U], Awaitable[T]], *,
        until: float | None = None, timed_out: Callable[[U], T] | None = None,
    ) -> list[T]:
        """``work`` on every item, results in the items' order.

        With ``until`` (loop time), an item whose work is still waiting then is abandoned
        and ``timed_out`` gives its result; items after it still run (reads served from the
        caches finish without waiting). One timer per worker, not one per item.
        """
        slots: dict[int, T] = {}
        queue = iter(enumerate(items))

        async def worker() -> None:
            current: int | None = None
            while True:
                try:
                    async with asyncio.timeout_at(until) as timer:
                        for current, item in queue:  # shared: each item goes to one worker
                            await self._take_slot(timer, until)
                            try:
                                slots[current] = await work(item)
                            finally:
                                self._limit.release()
                            if timer.expired():
                                break  # the work swallowed its cancellation: a fresh timer
                        else:
                            return
                except TimeoutError:
                    if not timer.expired() or current is None or timed_out is None:
                        raise
                    slots[current] = timed_out(items[current])

        workers = min(len(items), self.concurrency)
        await asyncio.gather(*(worker() for _ in range(workers)))
        return [slots[index] for index in range(len(items))]

    async def _take_slot(self, timer: asyncio.Timeout, until: float | None) -> None:
        """One slot of the limit all passes share. Waiting for one while another pass holds
        them all is not this item's slowness: the deadline is paused meanwhile."""
        if not self._limit.locked():
            await self._limit.acquire()  # a free slot is taken without suspending
            return
        timer.reschedule(None)
        try:
            await self._limit.acquire()
        finally:
            timer.reschedule(until)
