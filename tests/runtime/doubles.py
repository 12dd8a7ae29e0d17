"""In-memory doubles of the runtime's ports (``autoscaler/runtime/ports.py``), shared by the
runtime's tests.

They stand in for the adapters at the ports' own protocol (the adapters themselves are
tested against the simulated API server and a real Prometheus elsewhere): ``Workload`` is
one workload whose writes can fail as a real API server behind a flaky network can,
``Fleet`` many workloads read from memory whose writes and events go to one log.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from autoscaler.algorithm import ExternalMetricValues, MetricValues, Milli, Pod
from autoscaler.config import ScaleTargetRef, TargetConfig, parse_config
from autoscaler.errors import ConflictError, ThrottledError, TransientError
from autoscaler.runtime.ports import FetchedMetrics, MetricsWanted


@dataclass(frozen=True, slots=True)
class FixedScale:
    spec_replicas: int = 2
    status_replicas: int = 2
    selector: str = "app=x"
    resource_version: str = "1"
    annotations: Mapping[str, str] = field(default_factory=dict)
    replicas_managers: tuple[str, ...] | None = None


class Scales:
    """Reads of ``hang`` never finish; of ``slow``, take 1.5 s; of ``stubborn``, never finish
    and swallow their cancellation (an adapter that misbehaves), returning a scale."""

    def __init__(self, *hang: str, slow: tuple[str, ...] = (),
                 stubborn: tuple[str, ...] = ()) -> None:
        self.hang, self.slow, self.stubborn = hang, slow, stubborn

    def cached_scale(self, namespace: str, ref: ScaleTargetRef) -> FixedScale | None:
        return None  # every read goes to the (simulated) server

    async def get_scale(self, namespace: str, ref: ScaleTargetRef, *,
                        fresh: bool = False) -> FixedScale:
        if ref.name in self.hang:
            await asyncio.sleep(3600)
        if ref.name in self.slow:
            await asyncio.sleep(1.5)
        if ref.name in self.stubborn:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(3600)
        return FixedScale()

    async def update_scale(self, namespace: str, ref: ScaleTargetRef, replicas: int,
                           resource_version: str) -> FixedScale:
        return FixedScale(spec_replicas=replicas)


class NoPods:
    def pods_for(self, namespace: str, selector: str) -> Sequence[Pod]:
        return ()


class Quiet:
    """Events go nowhere; no other autoscaler owns anything."""

    async def record(self, namespace: str, ref: ScaleTargetRef, *, warning: bool, reason: str,
                     message: str) -> None:
        return None

    def cached_owners(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...] | None:
        return ()

    async def owners_of(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...]:
        return ()


@dataclass
class Events:
    """Every Event recorded, as (reason, message, warning)."""

    sent: list[tuple[str, str, bool]] = field(default_factory=list)

    async def record(self, namespace: str, ref: ScaleTargetRef, *, warning: bool, reason: str,
                     message: str) -> None:
        self.sent.append((reason, message, warning))

    def reasons(self) -> list[str]:
        return [reason for reason, _, _ in self.sent]


@dataclass
class Owners:
    """Other autoscalers on every target (``owners``), and the desired count each reports."""

    owners: tuple[str, ...] = ()
    reported: tuple[tuple[str, int], ...] = ()

    def cached_owners(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...] | None:
        return self.owners

    async def owners_of(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...]:
        return self.owners

    def reported_desired(self, namespace: str,
                         ref: ScaleTargetRef) -> tuple[tuple[str, int], ...] | None:
        return self.reported


def depth(units: int) -> ExternalMetricValues:
    """An External metric's one series at ``units``."""
    return ExternalMetricValues(values=(Milli(units * 1000),))


class QueueDepth:
    """Every target's External metric at ``units`` (20: exactly its target at 2 replicas,
    so no change is due)."""

    def __init__(self, units: int = 20) -> None:
        self.units = units

    async def fetch_metrics(self, wanted: Sequence[MetricsWanted], *,
                            deadline: float) -> FetchedMetrics:
        return FetchedMetrics(values={w.target.key: (depth(self.units),) for w in wanted},
                              pods={})


class Depths:
    """Each target's External metric (target: 10 per replica), or why it has none."""

    def __init__(self, values: Mapping[str, MetricValues]) -> None:
        self.values = values

    async def fetch_metrics(self, wanted: Sequence[MetricsWanted], *,
                            deadline: float) -> FetchedMetrics:
        return FetchedMetrics(values={
            w.target.key: (self.values[w.target.scale_target_ref.name],) for w in wanted},
            pods={})


def targets(*names: str, extra: str = "", namespace: str = "shop") -> list[TargetConfig]:
    """Deployments in ``shop`` scaled on an External metric ``depth`` (10 per replica)."""
    return list(parse_config("".join(f"""
[[autoscaler]]
namespace = "{namespace}"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "{name}" }}
maxReplicas = 10
metrics = [{{ type = "External", external = {{ metric = {{ name = "depth" }}, target = {{ type = "AverageValue", averageValue = "10" }}, query = "sum(depth)" }} }}]
{extra}
""" for name in names)).targets)


class Fleet:
    """Every target at 2 replicas, read from memory; writes and events go to one log."""

    def __init__(self, annotations: Mapping[str, Mapping[str, str]]) -> None:
        self.annotations = annotations
        self.log: list[tuple[str, str]] = []

    def cached_scale(self, namespace: str, ref: ScaleTargetRef) -> FixedScale:
        return FixedScale(annotations=self.annotations.get(ref.name, {}))

    async def get_scale(self, namespace: str, ref: ScaleTargetRef, *,
                        fresh: bool = False) -> FixedScale:
        raise AssertionError("every scale is cached")

    async def update_scale(self, namespace: str, ref: ScaleTargetRef, replicas: int,
                           resource_version: str) -> FixedScale:
        await asyncio.sleep(0)  # a real write suspends
        self.log.append((ref.name, f"write {replicas}"))
        return FixedScale(spec_replicas=replicas)

    async def record(self, namespace: str, ref: ScaleTargetRef, *, warning: bool, reason: str,
                     message: str) -> None:
        await asyncio.sleep(0)
        self.log.append((ref.name, reason))

    def cached_owners(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...]:
        return ()

    async def owners_of(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...]:
        raise AssertionError("every owner list is cached")


@dataclass
class Workload:
    """One workload; ``faults`` says how each coming write goes: ``ok``, ``lost`` (fails,
    not applied), ``applied`` (applied, then the answer is lost), ``conflict`` (someone else
    wrote first; ``conflict->N``: they scaled it to N), or a number (429 with that
    Retry-After)."""

    replicas: int = 2
    version: int = 1
    faults: list[str | float] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    during_put: Callable[[], object] | None = None
    """Runs while a write is in flight (a test's clock moving, say)."""

    def scale(self) -> FixedScale:
        return FixedScale(spec_replicas=self.replicas, resource_version=str(self.version))

    def cached_scale(self, namespace: str, ref: ScaleTargetRef) -> FixedScale:
        return self.scale()

    async def get_scale(self, namespace: str, ref: ScaleTargetRef, *,
                        fresh: bool = False) -> FixedScale:
        self.log.append(f"get fresh={fresh}")
        return self.scale()

    async def update_scale(self, namespace: str, ref: ScaleTargetRef, replicas: int,
                           resource_version: str) -> FixedScale:
        await asyncio.sleep(0)
        if self.during_put is not None:
            self.during_put()
        fault = self.faults.pop(0) if self.faults else "ok"
        self.log.append(f"put {replicas} ({fault})")
        if isinstance(fault, float):
            raise ThrottledError("HTTP 429", retry_after=fault)
        if fault.startswith("conflict") or resource_version != str(self.version):
            self.version += 1  # someone else wrote
            _, _, theirs = fault.partition("->")
            self.replicas = int(theirs) if theirs else self.replicas
            raise ConflictError("HTTP 409")
        if fault == "lost":
            raise TransientError("timed out")
        self.replicas, self.version = replicas, self.version + 1
        if fault == "applied":
            raise TransientError("timed out")
        return self.scale()


class Clock:
    """Wall-clock time that moves only when a test moves it."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now
