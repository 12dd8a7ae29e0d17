"""When each target is reconciled: once per its sync period, in batches, never twice at once.

Targets that share a sync period are reconciled together in one pass, so their PromQL is
batched; each group's next pass is jittered by up to ``jitter`` of its period so several
daemons (shards) do not hit Prometheus in lockstep. A target still in flight from the
previous pass is skipped rather than queued. A pass runs as its own task, so a slow pass
never delays another group.

A target that a reload adds or changes is due at once, in a pass of its own, rather than at
its group's next start (upstream enqueues an HPA without delay when it is created or its
``metadata.generation`` moves, kubernetes#138294). Its group keeps its phase, so the target
also runs at the group's next start, as upstream's pending periodic reconcile also still
fires. One still in flight runs as soon as its pass ends; one the gate holds back runs once
a ``poke`` finds the gate open (leadership gained), else at its group's next start.

``may_run(key)`` gates each target at launch: a pass includes only the targets it allows. A
group none of whose targets may run is not launched and keeps its due time, so it runs as soon
as the gate opens (as after gaining the Lease). ``candidates()`` names the targets the gate may
allow (a superset), or None for all: only those are asked about. A ring member's are its
buckets' targets, a fifth of the fleet over five members; asking about the whole fleet at every
wake cost a quarter of a member's main thread while a ring of 50,000 targets formed.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig

log = structlog.get_logger("autoscaler.scheduler")

RunPass = Callable[[Sequence["TargetConfig"], float], Awaitable[None]]
"""``run_pass(targets, deadline)``; ``deadline`` is a ``time.monotonic()`` instant."""


@dataclass(slots=True)
class _Group:
    period: float
    keys: list[str] = field(default_factory=list)
    next_due: float = 0.0


class Scheduler:
    def __init__(
        self,
        run_pass: RunPass,
        *,
        jitter: float = 0.1,
        may_run: Callable[[str], bool] = lambda key: True,
        candidates: Callable[[], Set[str] | None] = lambda: None,
        monotonic: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self._run_pass = run_pass
        self._jitter = jitter
        self._may_run = may_run
        self._candidates = candidates
        self._now = monotonic
        self._rng = rng or random.Random()  # jitter, not security
        self._targets: dict[str, TargetConfig] = {}
        self._groups: dict[float, _Group] = {}
        self._in_flight: set[str] = set()
        self._changed: set[str] = set()
        """Targets a reload added or changed that no pass has started on since."""
        self._parked: set[str] = set()
        """Changed targets the gate held back when last looked at: looked at again after a
        ``poke`` (the gate may have opened), else run by their group's next start. A ring
        member's changed targets are mostly others' (all 10,000 at its start, 8,000 of them
        never its own): looked at each wake, they cost a scan of every key a second; it
        parks only its candidates."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self.passes = 0

    @property
    def in_flight(self) -> frozenset[str]:
        return frozenset(self._in_flight)

    def set_targets(self, targets: Sequence[TargetConfig]) -> list[str]:
        """Replace the target set (config load or reload); returns the keys that left.
        Targets new or changed since the last set are due at once."""
        removed = [key for key in self._targets if key not in {t.key for t in targets}]
        self._changed = {t.key for t in targets if self._targets.get(t.key) != t} | {
            key for key in self._changed if key not in removed}
        self._parked = {key for key in self._parked if key not in removed} - self._changed
        self._targets = {t.key: t for t in targets}
        groups: dict[float, _Group] = {}
        for target in targets:
            group = groups.setdefault(target.sync_period, _Group(period=target.sync_period))
            group.keys.append(target.key)
            old = self._groups.get(target.sync_period)
            # Keep a surviving group's phase; a new group starts at once.
            group.next_due = old.next_due if old else self._now()
        self._groups = groups
        self._wake.set()
        return removed

    async def run(self, stop: asyncio.Event) -> None:
        """Launch passes as they fall due until ``stop`` is set."""
        while not stop.is_set():
            now, candidates = self._now(), self._candidates()
            for group in self._groups.values():
                if group.next_due <= now and (runnable := self._runnable(group, candidates)):
                    self._launch(group, runnable, now)
            self._launch_changed(now, candidates)
            self._wake.clear()
            delay = self._sleep_time(now, candidates)
            waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())]
            try:
                await asyncio.wait(waiters, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()

    def poke(self) -> None:
        """Re-evaluate now (e.g. after gaining leadership)."""
        self._changed |= self._parked
        self._parked.clear()
        self._wake.set()

    def run_now(self, keys: Collection[str]) -> None:
        """The configured targets among ``keys`` are due at once, in a pass of their own
        (targets a ring member just gained), their groups keeping their phase."""
        self._changed.update(key for key in keys if key in self._targets)
        self._wake.set()

    async def idle(self, keys: Collection[str], timeout: float) -> bool:
        """Wait until no pass over any of ``keys`` is in flight (a bucket being handed
        over); True if none is, False if ``timeout`` passed first."""
        deadline = self._now() + timeout
        while self._in_flight & set(keys):
            running = set(self._tasks)
            left = deadline - self._now()
            if not running or left <= 0:
                return False
            await asyncio.wait(running, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        return True

    async def drain(self, timeout: float) -> bool:
        """Wait for in-flight passes (their writes) to finish; True if they all did."""
        if not self._tasks:
            return True
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        return not pending

    async def cancel(self, timeout: float) -> None:
        """Cancel the passes still running (at a stop, once ``drain`` gave up on them)."""
        tasks = [task for task in self._tasks if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    def _sleep_time(self, now: float, candidates: Set[str] | None) -> float:
        due_times = [group.next_due for group in self._groups.values()
                     if any(self._may_run(key) for key in self._askable(group, candidates))]
        if not due_times:
            return 1.0
        return min(max(min(due_times) - now, 0.01), 1.0)

    def _runnable(self, group: _Group, candidates: Set[str] | None) -> list[str]:
        """The group's targets the gate lets run now, in configured order."""
        # The group's keys are in configured order: walked, not sorted by an index of every
        # key's place (a dict and an int a target: 3.3 MB of a ring member at 50,000 targets).
        return [key for key in group.keys
                if (candidates is None or key in candidates) and self._may_run(key)]

    def _askable(self, group: _Group, candidates: Set[str] | None) -> Iterable[str]:
        """The group's targets worth asking the gate about, in no particular order."""
        if candidates is None:
            return group.keys
        return (key for key in candidates
                if (target := self._targets.get(key)) is not None
                and target.sync_period == group.period)

    def _launch(self, group: _Group, runnable: Sequence[str], now: float) -> None:
        spread = self._rng.uniform(-self._jitter, self._jitter) * group.period
        group.next_due = now + group.period + spread
        due = [self._targets[k] for k in runnable if k not in self._in_flight]
        if len(due) < len(runnable):
            log.warning("targets still in flight from the previous pass were skipped",
                        skipped=len(runnable) - len(due), period=group.period)
        self._start(due, group.period, now)

    def _launch_changed(self, now: float, candidates: Set[str] | None) -> None:
        """A pass for the added or changed targets not in flight that the gate lets run,
        one per period."""
        if not self._changed:
            return  # the usual wake: no scan of every configured target
        held_back = {k for k in self._changed if k not in self._in_flight and (
            (candidates is not None and k not in candidates) or not self._may_run(k))}
        self._changed -= held_back
        # Only candidates wait for a poke: a ring member's other targets become candidates
        # only by a claim, which makes its bucket's targets due (``run_now``); parked, the
        # fleet's other 40,000 keys held a 2 MB set at 50,000 targets over 5.
        self._parked |= held_back if candidates is None else held_back & candidates
        launchable = {k for k in self._changed if k not in self._in_flight}
        if not launchable:
            return  # all held back or in flight: no walk of every group's targets
        for group in self._groups.values():
            due = [k for k in group.keys if k in launchable]
            self._start([self._targets[k] for k in due], group.period, now)

    def _start(self, due: Sequence[TargetConfig], period: float, now: float) -> None:
        if not due:
            return
        self._in_flight.update(t.key for t in due)
        self._changed.difference_update(t.key for t in due)
        self._parked.difference_update(t.key for t in due)
        # Leave a tenth of the period so the pass's writes land before the next one is due.
        deadline = now + period * 0.9
        task = asyncio.get_running_loop().create_task(self._pass(due, deadline))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pass(self, targets: Sequence[TargetConfig], deadline: float) -> None:
        try:
            # Asked again as the pass starts: the gate may have closed since the launch (a
            # ring bucket lost meanwhile), and a reload may have removed a target (it must
            # not get a state again, nor a write) or changed it (its config now is used).
            allowed = [current for t in targets
                       if (current := self._targets.get(t.key)) is not None
                       and self._may_run(t.key)]
            if allowed:
                await self._run_pass(allowed, deadline)
        except Exception:  # the reconciler contains its faults; this is the last net
            log.exception("pass failed")
        finally:
            self._in_flight.difference_update(t.key for t in targets)
            self.passes += 1
            if self._changed:
                self._wake.set()  # a changed target waited for this pass to end
