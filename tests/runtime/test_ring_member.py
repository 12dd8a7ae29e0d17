"""A ring member, tick by tick with its ports faked: its gauges of unowned buckets (when a
bucket counts as overdue, the ``AutoscalerTargetsUnowned`` alert) and the caches it keeps
warm for its standby (what ``/status`` says is pending)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from autoscaler.config import TargetConfig
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime import ring
from autoscaler.runtime.ring import BucketLease
from autoscaler.runtime.ring_member import WARM_SETTLE, RingMember, RingParts
from autoscaler.runtime.ring_plan import FORMATION_WAIT
from tests.runtime.doubles import targets


@dataclass
class Observed:
    lease: BucketLease
    epoch: int = 1


@dataclass
class Leases:
    identity: str = "a"
    view: dict[int, Observed] = field(default_factory=dict)
    synced: asyncio.Event = field(default_factory=asyncio.Event)

    def get(self, bucket: int) -> Observed | None:
        return self.view.get(bucket)


@dataclass
class Membership:
    incarnation: str = "a"
    live: tuple[str, ...] = ("a",)
    view_synced_at: float | None = 0.0

    def valid(self) -> bool:
        return True

    def members(self) -> dict[str, bool]:
        return dict.fromkeys(self.live, True)


def unused(*_: Any, **__: Any) -> Any:
    raise AssertionError("not used here")


def member(now: list[float], leases: Leases, *, membership: Membership | None = None,
           configured: list[TargetConfig] | None = None,
           warm: Callable[[frozenset[str]], Awaitable[None]] = unused) -> RingMember:
    configured = targets("web") if configured is None else configured
    return RingMember(
        parts=RingParts(membership=membership or Membership(), leases=leases,  # type: ignore[arg-type]
                        store=unused, keeper=unused),
        timings=ring.Timings(), placement="namespace", targets=lambda: configured,
        ready=lambda: True, run_now=unused, gained=unused, idle=unused, warm=warm,
        cached=unused, monotonic=lambda: now[0], telemetry=DaemonMetrics(), ring_name="r")


def overdue(subject: RingMember) -> float:
    value = subject.telemetry.registry.get_sample_value(
        "autoscaler_ring_overdue_buckets", {"ring": "r"})
    assert value is not None
    return value


@pytest.mark.parametrize(("held_before", "wait"), [(True, 0.0), (False, FORMATION_WAIT)],
                         ids=["held-before", "never-held"])
def test_an_unowned_bucket_is_overdue_a_lease_duration_and_two_passes_after(
        held_before: bool, wait: float) -> None:
    """A bucket never held may also wait FORMATION_WAIT for its owner to sync."""
    now, leases = [100.0], Leases()
    subject = member(now, leases)
    (bucket,) = {subject.bucket_of(t) for t in targets("web")}
    if held_before:
        leases.view[bucket] = Observed(BucketLease(holder=""))  # released
    bound = ring.Timings().lease_duration + 2 * 15.0 + wait  # 15 s: the targets' period
    subject._report((bucket,))
    now[0] = 100.0 + bound
    subject._report((bucket,))
    assert overdue(subject) == 0
    now[0] += 0.1
    subject._report((bucket,))
    assert overdue(subject) == 1


async def test_a_standby_that_goes_back_to_what_is_cached_wants_nothing_more() -> None:
    """A member leaves and comes back before the standby's settle time: the wish returns to
    what is cached, so nothing is pending (``/status`` said "N more once the ring settles"
    for ever), and the next change waits its own settle time, not the first one's."""
    now, leases = [100.0], Leases()
    leases.synced.set()
    membership = Membership(live=("a", "b", "c"))
    warmed: list[frozenset[str]] = []

    async def warm(namespaces: frozenset[str]) -> None:
        warmed.append(frozenset(namespaces))

    spread = [t for n in range(30) for t in targets("web", namespace=f"ns-{n:02d}")]
    subject = member(now, leases, membership=membership, configured=spread, warm=warm)
    await subject._keep_warm()
    assert len(warmed) == 1
    three = warmed[0]
    membership.live = ("a", "b")  # c is gone: a's standby grows (it inherits more)
    now[0] = 101.0
    await subject._keep_warm()
    assert len(warmed) == 1  # only the standby changed: after the settle time
    assert subject._standby_pending() > 0
    membership.live = ("a", "b", "c")  # c is back before that
    now[0] = 102.0
    await subject._keep_warm()
    assert subject._standby_pending() == 0
    membership.live = ("a", "b")  # gone again: a new change, a new wait
    now[0] = 130.0
    await subject._keep_warm()
    assert warmed == [three]
    now[0] = 130.0 + 2 * WARM_SETTLE  # doubled at most, by the member's name
    await subject._keep_warm()
    assert len(warmed) == 2
    assert warmed[1] > three
    assert subject._standby_pending() == 0
