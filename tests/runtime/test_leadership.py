"""Leadership: writes only in the term whose history was read; a new term lets the earlier
term's passes end, then reads the history again before any pass; a lost Lease stops writes
at once. The elector is a ``LeasePort`` double (``tests/adapters/kube/test_leader.py`` tests
the real one against the simulated API server)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest

from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.history import HistoryKeeper
from autoscaler.runtime.leadership import Leadership
from autoscaler.runtime.supervisor import Supervisor
from autoscaler.snapshot import Snapshot

BOUND = 5.0
"""Seconds any step here may take: each happens at once, or the test fails."""
TARGET = "default/Deployment/web"
"""Any target: leadership gates every target alike."""


class Lease:
    """A ``LeasePort`` double: the test says when this instance leads; each change is
    announced on ``changed``, and a lapsed term never resumes, as the real elector's."""

    def __init__(self) -> None:
        self.changed = asyncio.Event()
        self.term = 0
        self.leading = False

    @property
    def is_leader(self) -> bool:
        return self.leading

    def leads(self, term: int) -> bool:
        return self.term == term and self.leading

    async def run(self) -> None:
        await asyncio.Event().wait()  # campaigns until the daemon stops

    async def release(self) -> None:
        self.leading = False

    def lead(self) -> None:
        self.term, self.leading = self.term + 1, True
        self.changed.set()

    def lose(self) -> None:
        self.leading = False
        self.changed.set()


class NoStore:
    description = "no store"

    async def load(self) -> Snapshot | None:
        return None

    async def save(self, data: bytes) -> None:
        return None


async def until(check: Callable[[], bool]) -> None:
    deadline = asyncio.get_running_loop().time() + BOUND
    while asyncio.get_running_loop().time() < deadline:
        if check():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"not within {BOUND}s")


class Follower:
    """``Leadership.follow`` running over a ``Lease``, recording what it asks for and in
    which term it asks: passes ended (``end``) and the history read (``restore``)."""

    def __init__(self, *, elected: bool = True, dry_run: bool = False) -> None:
        self.lease = Lease()
        self.telemetry = DaemonMetrics()
        self.supervisor = Supervisor()
        self.leadership = Leadership(elected=elected, dry_run=dry_run, telemetry=self.telemetry,
                                     supervisor=self.supervisor)
        self.keeper = HistoryKeeper(NoStore(), {})
        self.calls: list[tuple[str, bool]] = []
        """(what, whether a write was allowed while it ran)."""

    async def end_passes(self) -> None:
        self.calls.append(("end", self.leadership.may_write(TARGET)))

    async def restore(self) -> None:
        self.calls.append(("restore", self.leadership.may_write(TARGET)))
        self.keeper.restored.set()
        self.leadership.history_read.set()

    def follow(self) -> Coroutine[Any, Any, None]:
        return self.leadership.follow(lease="autoscaler", elector=lambda: self.lease,
                                      keeper=self.keeper, end_passes=self.end_passes,
                                      restore=self.restore)

    def leader_gauge(self) -> float | None:
        return self.telemetry.registry.get_sample_value(
            "autoscaler_leader", {"lease": "autoscaler"})


@contextlib.asynccontextmanager
async def leader() -> AsyncIterator[Follower]:
    """A follower that won its first term and read the history."""
    follower = Follower()
    task = asyncio.create_task(follower.follow())
    try:
        await until(lambda: follower.leadership.elector is not None)
        follower.lease.lead()
        await until(follower.leadership.history_read.is_set)
        yield follower
    finally:
        task.cancel()
        await follower.supervisor.cancel_all(timeout=BOUND)


async def test_a_new_term_ends_the_earlier_passes_then_reads_the_history_before_any_write(
) -> None:
    """Nothing is written before the Lease is won, nor while the earlier term's passes end;
    the history is read at once in the new term, and writes are allowed from then on."""
    follower = Follower()
    task = asyncio.create_task(follower.follow())
    try:
        await until(lambda: follower.leadership.elector is not None)
        assert not follower.leadership.may_write(TARGET)
        assert not follower.leadership.holds_lease()
        follower.lease.lead()
        await until(follower.leadership.history_read.is_set)
        assert follower.calls == [("end", False), ("restore", True)]
        assert follower.leadership.may_write(TARGET)
        assert follower.leadership.holds_lease()
        assert follower.leader_gauge() == 1
    finally:
        task.cancel()
        await follower.supervisor.cancel_all(timeout=BOUND)


async def test_a_lost_lease_stops_writes_at_once_and_a_new_term_reads_the_history_again(
) -> None:
    """Losing the Lease forbids writes, invalidates the keeper and holds passes; a later
    term is not the lost one resumed: the history is read again before passes run."""
    async with leader() as follower:
        follower.lease.lose()
        await until(lambda: not follower.leadership.history_read.is_set())
        assert not follower.leadership.may_write(TARGET)
        assert not follower.keeper.restored.is_set()
        assert follower.leader_gauge() == 0
        follower.lease.lead()
        await until(follower.leadership.history_read.is_set)
        assert follower.leadership.term == 2
        assert follower.calls[2:] == [("end", False), ("restore", True)]


async def test_a_pass_that_ends_after_the_lease_was_lost_leaves_no_series_behind() -> None:
    """A leader's pass still waiting (on Prometheus, say) when the Lease is lost ends
    afterwards: the target's series it records are not exported by this standby (the new
    leader exports them). Before, they came back on the old leader's /metrics."""
    async with leader() as follower:
        follower.telemetry.target(TARGET).last_reconcile = 1.0  # a pass as leader
        assert TARGET in follower.telemetry.per_target
        follower.lease.lose()
        await until(lambda: TARGET not in follower.telemetry.per_target)
        follower.telemetry.target(TARGET).last_reconcile = 2.0  # the late pass ends
        assert TARGET not in follower.telemetry.per_target
        assert b"web" not in follower.telemetry.render()


@pytest.mark.parametrize(("dry_run", "gauge"), [(False, 1), (True, 0)],
                         ids=["unelected", "dry-run"])
async def test_without_an_election_the_history_is_read_once_and_writes_are_allowed(
    dry_run: bool, gauge: float,
) -> None:
    """No Lease to follow: the history is read and ``follow`` returns; a dry run is not
    counted as a leader (it acts for no lease)."""
    follower = Follower(elected=False, dry_run=dry_run)
    await asyncio.wait_for(follower.follow(), BOUND)
    assert follower.calls == [("restore", True)]
    assert follower.leadership.elector is None
    assert follower.leadership.may_write(TARGET)
    assert not follower.leadership.holds_lease()
    assert follower.leader_gauge() == gauge
