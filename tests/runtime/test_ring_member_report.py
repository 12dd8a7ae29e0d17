"""A ring member's gauges of unowned buckets: when a bucket counts as overdue (the
``AutoscalerTargetsUnowned`` alert), for a bucket held before and for one never held."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime import ring
from autoscaler.runtime.ring import BucketLease
from autoscaler.runtime.ring_member import RingMember, RingParts
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

    def get(self, bucket: int) -> Observed | None:
        return self.view.get(bucket)


@dataclass
class Membership:
    incarnation: str = "a"

    def valid(self) -> bool:
        return True


def unused(*_: Any, **__: Any) -> Any:
    raise AssertionError("not used by the report")


def member(now: list[float], leases: Leases) -> RingMember:
    configured = targets("web")
    return RingMember(
        parts=RingParts(membership=Membership(), leases=leases, store=unused, keeper=unused),  # type: ignore[arg-type]
        timings=ring.Timings(), placement="namespace", targets=lambda: configured,
        ready=lambda: True, run_now=unused, gained=unused, idle=unused, warm=unused,
        cached=unused, monotonic=lambda: now[0], telemetry=DaemonMetrics(), ring_name="r")


def overdue(subject: RingMember) -> float:
    value = subject.telemetry.registry.get_sample_value(
        "autoscaler_ring_overdue_buckets", {"ring": "r"})
    assert value is not None
    return value


def test_a_bucket_held_before_is_overdue_a_lease_duration_and_two_passes_after() -> None:
    now, leases = [100.0], Leases()
    subject = member(now, leases)
    (bucket,) = {subject.bucket_of(t) for t in targets("web")}
    leases.view[bucket] = Observed(BucketLease(holder=""))  # released: held before
    bound = ring.Timings().lease_duration + 2 * 15.0  # the targets' sync period
    subject._report((bucket,))
    now[0] = 100.0 + bound
    subject._report((bucket,))
    assert overdue(subject) == 0
    now[0] += 0.1
    subject._report((bucket,))
    assert overdue(subject) == 1


def test_a_never_held_bucket_may_wait_for_its_owner_to_sync_before_it_is_overdue() -> None:
    now = [100.0]
    subject = member(now, Leases())
    (bucket,) = {subject.bucket_of(t) for t in targets("web")}
    bound = ring.Timings().lease_duration + 2 * 15.0 + FORMATION_WAIT
    subject._report((bucket,))
    now[0] = 100.0 + bound
    subject._report((bucket,))
    assert overdue(subject) == 0
    now[0] += 0.1
    subject._report((bucket,))
    assert overdue(subject) == 1
