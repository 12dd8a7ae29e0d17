"""The narrow interfaces the runtime needs; adapters implement them, wiring.py builds them.

Keeping them here (not importing adapter classes) lets the reconciler be read, typed and
tested against any implementation that speaks these few methods.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from autoscaler.algorithm import MetricValues, Pod
from autoscaler.record import record

if TYPE_CHECKING:
    from autoscaler.config import ScaleTargetRef, TargetConfig
    from autoscaler.runtime.ring import BucketLease, HolderView
    from autoscaler.snapshot import Snapshot


FIELD_MANAGER = "autoscaler"
"""The field manager this daemon's scale writes name: the API server records it in the
target's ``metadata.managedFields`` as whoever last set the replicas (``zero_owner``)."""


class Scale(Protocol):
    @property
    def spec_replicas(self) -> int: ...
    @property
    def status_replicas(self) -> int: ...
    @property
    def selector(self) -> str: ...
    @property
    def resource_version(self) -> str: ...
    @property
    def annotations(self) -> Mapping[str, str]:
        """The target object's annotations (pause); empty when unknown."""
        ...
    @property
    def replicas_managers(self) -> tuple[str, ...] | None:
        """The field managers that own the object's ``spec.replicas`` (whoever last set the
        count), newest first; ``None`` when the object says nothing of it."""
        ...


class ScalePort(Protocol):
    def cached_scale(self, namespace: str, ref: ScaleTargetRef) -> Scale | None:
        """The scale from memory (a watch cache), or ``None``: ``get_scale`` must ask."""
        ...

    async def get_scale(self, namespace: str, ref: ScaleTargetRef, *,
                        fresh: bool = False) -> Scale:
        """The target's Scale; from memory if it can unless ``fresh`` (then from the server)."""
        ...

    async def update_scale(
        self, namespace: str, ref: ScaleTargetRef, replicas: int, resource_version: str
    ) -> Scale: ...


class PodPort(Protocol):
    def pods_for(self, namespace: str, selector: str) -> Sequence[Pod]: ...


@record
class MetricsWanted:
    target: TargetConfig
    pods: Sequence[Pod]
    scale_selector: str


_NO_WARNINGS: Mapping[str, tuple[str, ...]] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchedMetrics:
    """What one fetch produced, per target key."""

    values: Mapping[str, tuple[MetricValues, ...]]
    """Aligned with the target's metrics; a metric that could not be read is a
    ``MetricUnavailable`` whose ``reason`` says why."""
    pods: Mapping[str, Sequence[Pod]]
    """Pods whose requests the source filled in (kube-state-metrics): the core is given
    these instead of the watch cache's."""
    queries_issued: int = 0
    warnings: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _NO_WARNINGS)
    """Problems that did not invalidate a metric (a pod dropped for a NaN sample)."""


class MetricsPort(Protocol):
    async def fetch_metrics(
        self, wanted: Sequence[MetricsWanted], *, deadline: float
    ) -> FetchedMetrics:
        """Never raises for bad data: a metric it cannot produce is ``MetricUnavailable``."""
        ...


class HistoryPort(Protocol):
    async def metric_history(
        self, target: TargetConfig, index: int, *, start: float, end: float, step: float,
    ) -> Sequence[tuple[float, float]]:
        """Metric ``index`` of ``target``'s past totals (what the forecaster records each
        pass), one (Unix time, value) every ``step`` seconds from ``start`` to ``end``.
        Raises one of ``autoscaler.errors``' errors when it cannot."""
        ...


class EventPort(Protocol):
    async def record(
        self, namespace: str, ref: ScaleTargetRef, *, warning: bool, reason: str, message: str
    ) -> None: ...


class OwnersPort(Protocol):
    def cached_owners(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...] | None:
        """``owners_of`` from memory, or ``None`` when only ``owners_of`` can tell."""
        ...

    async def owners_of(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...]:
        """Other autoscalers (HPAs, KEDA ScaledObjects) that target the same object."""
        ...

    def reported_desired(self, namespace: str, ref: ScaleTargetRef) -> tuple[
            tuple[str, int], ...] | None:
        """Each HPA on the object with the ``status.desiredReplicas`` it reports (KEDA's
        ScaledObjects through the HPA KEDA makes for them), from memory; ``None`` when
        memory cannot tell (shadow mode compares with them)."""
        ...


class StateStore(Protocol):
    @property
    def description(self) -> str:
        """Where the state lives, for messages: ``state file /var/...``, ``ConfigMap ns/n``."""
        ...

    async def load(self) -> Snapshot | None:
        """The saved snapshot, or ``None`` when there is provably none.

        Raises ``StateUnavailableError`` (retry) or ``StateSetAsideError`` (start fresh, loudly).
        """
        ...

    async def save(self, data: bytes) -> None:
        """Replace the stored state with ``data`` (``autoscaler.snapshot.encode``'s bytes)."""
        ...


class LeasePort(Protocol):
    """A campaign for a Lease (``adapters/kube/leader.py``): leadership comes in terms, and
    a term that lapsed or ended never resumes."""

    changed: asyncio.Event
    """Set whenever leadership is gained or lost, or a new term starts."""
    term: int

    @property
    def is_leader(self) -> bool: ...

    def leads(self, term: int) -> bool:
        """Whether this instance leads now, in ``term`` (not in a later one)."""
        ...

    async def run(self) -> None:
        """Campaign and renew until cancelled or released; never raises."""
        ...

    async def release(self) -> None:
        """Stop campaigning and give the Lease up if it is held."""
        ...


class RingMembershipPort(Protocol):
    """This replica's member Lease in a ring of dynamic sharding
    (``adapters/kube/membership.py``): read from any thread, without awaiting."""

    incarnation: str
    """Our name in the ring (bucket Leases name it as holder); new at each rejoin."""
    evicted: bool
    """A peer evicted us, or our Lease was deleted: every claim is void (rejoin)."""
    ready: bool
    """Written into our Lease at the next renewal: peers hand buckets only to ready members."""

    @property
    def view_synced_at(self) -> float | None:
        """When our view of the other members was first listed; None before."""
        ...

    def valid(self) -> bool:
        """Our last successful renewal was sent less than the renew deadline ago, by our own
        monotonic clock, and we were not evicted."""
        ...

    def members(self) -> dict[str, bool]:
        """Live members (incarnation -> ready), us included while valid."""
        ...

    def holder_view(self, incarnation: str) -> HolderView:
        """What rule C needs of a bucket holder: evicted, or since when its member Lease has
        been absent (or emptied without an eviction) in our view."""
        ...

    def single_leader(self) -> str | None:
        """Who holds the single-leader Lease of the ring's name while it is held and renewed
        (a leader-mode replica still acting): the ring claims nothing meanwhile. None when
        no single leader acts."""
        ...

    def rejoin(self, incarnation: str) -> None:
        """Start over as a new incarnation after ``incarnation`` was evicted (once, however
        often it is asked for that one)."""
        ...


class ObservedBucketLease(Protocol):
    @property
    def lease(self) -> BucketLease: ...

    @property
    def epoch(self) -> int: ...


class BucketLeasesPort(Protocol):
    """The ring's bucket Leases (``adapters/kube/buckets.py``): claimed and released by CAS."""

    identity: str

    @property
    def view(self) -> Mapping[int, ObservedBucketLease]:
        """The bucket Leases as last seen (kept current by a watch), by bucket."""
        ...

    def get(self, bucket: int) -> ObservedBucketLease | None:
        """``view.get(bucket)`` without copying the view."""
        ...

    @property
    def synced(self) -> asyncio.Event:
        """Set once the view holds the first LIST."""
        ...

    @property
    def problem(self) -> str | None:
        """Why this member must not act on the ring (a bucket Lease of other ring
        settings), or None."""
        ...

    async def claim(self, bucket: int, observed: Any, *, after: int = 0) -> int | None:
        """The new epoch, or None if someone else wrote the Lease since ``observed``: one
        of this port's own ``view`` values (or None: absent), the one the decision to claim
        was made on, never a newer one."""
        ...

    async def release(self, bucket: int, epoch: int, handed_to: str) -> bool: ...


class BucketStatePort(StateStore, Protocol):
    """A bucket's history (``adapters/kube/bucket_store.py``), stamped by its claimant."""

    async def stamp(self, owner: str, epoch: int, *,
                    still_claimed: Callable[[], bool]) -> Snapshot | None: ...
