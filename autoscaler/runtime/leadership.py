"""Whether this instance may act now, and following the Lease's terms to decide it.

Without leader election (or in a dry run, which writes nothing and so must not take the
Lease, or the store, from the live daemon) this instance acts once its history is read.
With it, ``follow`` watches the elector (``adapters/kube/leader.py``, as a ``LeasePort``):
on a new term the earlier term's passes end first (they write nothing meanwhile: the fences
name the term), then the history is read again before any pass; on losing the Lease the
history keeper is invalidated, so nothing is written until the next restore.

The fences, ``may_write(key)`` and ``holds_lease``, are checked right before every ``/scale``
PUT and every store write, and hold only in the term whose history was read. ``may_write``
takes the target's key so that a mode which splits targets between instances can answer per
target; leadership answers for all of them alike (``leads``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from autoscaler.config import Config
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.history import HistoryKeeper
from autoscaler.runtime.ports import LeasePort
from autoscaler.runtime.supervisor import Supervisor


def campaigns(config: Config) -> bool:
    """Whether a daemon with ``config`` campaigns for a Lease: not in a dry run, which writes
    nothing and so must not take the Lease (or the store) from the live daemon."""
    return config.daemon.leader_election.enabled and not config.daemon.dry_run


class Leadership:
    def __init__(self, *, elected: bool, dry_run: bool, telemetry: DaemonMetrics,
                 supervisor: Supervisor) -> None:
        self.elected = elected
        """Whether this instance campaigns for a Lease (never in a dry run)."""
        self.dry_run = dry_run
        self.telemetry, self.supervisor = telemetry, supervisor
        self.elector: LeasePort | None = None
        """The campaign, once ``follow`` started it (none without leader election)."""
        self.term = 0
        """The leadership term whose history was (or is being) read: writes are fenced on it."""
        self.history_read = asyncio.Event()
        """Set once the saved history is read and the forecast history waited for: passes
        may run."""
        if elected:  # a standby exports no target's series (a pass ending late included)
            telemetry.exports = lambda _key: self.leads()

    def leads(self) -> bool:
        """Whether this instance acts for every target now: no elector, or it leads in the
        term whose history it read."""
        return self.elector is None or self.elector.leads(self.term)

    def may_write(self, key: str) -> bool:
        """The write gate of target ``key``: a leader writes every target."""
        del key  # one Lease covers every target
        return self.leads()

    def holds_lease(self) -> bool:
        """With leader election: the fence of every history write (no elector yet: no).
        Only in the term whose history this instance read: a term that lapsed or ended
        never resumes, and a new one writes nothing until its history is read again."""
        return self.elector is not None and self.elector.leads(self.term)

    async def follow(
        self,
        *,
        lease: str,
        elector: Callable[[], LeasePort],
        keeper: HistoryKeeper,
        end_passes: Callable[[], Awaitable[None]],
        restore: Callable[[], Awaitable[None]],
    ) -> None:
        """Act as the Lease says, for as long as the daemon runs (without leader election:
        read the history once and return). ``end_passes``: let the passes in flight end;
        ``restore``: read the history, then let passes run."""
        if not self.elected:
            # A dry run acts for no lease (it writes nothing): not counted as a leader.
            self.telemetry.set_leader(lease, not self.dry_run)
            await restore()
            return
        campaign = self.elector = elector()
        self.telemetry.set_leader(lease, False)
        self.supervisor.start("lease", campaign.run())
        restoring: asyncio.Task[Any] | None = None
        wanted = 0
        while True:
            await campaign.changed.wait()
            campaign.changed.clear()
            leading, term = campaign.is_leader, campaign.term
            self.telemetry.set_leader(lease, leading)
            if leading and term == wanted:
                continue  # the term whose history is read, or being read
            # Lost, or a new term (one that lapsed never resumes): what this instance holds
            # is not the store's any more; a new term reads it again, as a fresh leader.
            if restoring is not None:
                restoring.cancel()
            keeper.invalidate()
            self.history_read.clear()
            if not leading:
                wanted = 0
                self.telemetry.forget_targets()  # the new leader's view is the one to read
                continue
            wanted = term
            restoring = self.supervisor.start(
                "history restore", self._take_over(term, end_passes, restore), finishes=True)

    async def _take_over(self, term: int, end_passes: Callable[[], Awaitable[None]],
                         restore: Callable[[], Awaitable[None]]) -> None:
        """Lead in ``term``: passes of an earlier term still running end first (they write
        nothing meanwhile: the fences name the term), then the history is read."""
        await end_passes()
        self.term = term
        await restore()
