"""Small builders for the algorithm tests, shaped after upstream's test fixtures.

Upstream's fixtures use ``time.Now()`` and Go's zero time; here ``NOW`` is a fixed instant
and ``ZERO`` stands for the zero time (long before ``NOW``). ``TESTING`` holds upstream's
``defaultTesting*`` settings: tolerance 0.1, CPU initialization 2 min, readiness delay 10 s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autoscaler.algorithm import (
    AlgorithmSettings,
    AutoscalerSpec,
    Behavior,
    ConditionStatus,
    Container,
    History,
    MetricSourceType,
    MetricSpec,
    MetricTarget,
    MetricTargetType,
    Milli,
    Pod,
    PodPhase,
    PodSample,
    PolicyType,
    Recommendation,
    ScaleEvent,
    ScalingPolicy,
    ScalingRules,
    SelectPolicy,
)
from autoscaler.algorithm.stage_values import Tolerances

NOW = 1_000_000.0
ZERO = 0.0
"""Go's zero ``time.Time``: every fixture pod without a start time gets it."""
HOT = NOW
"""``hotCPUCreationTime()``: the pod started just now (still initializing)."""
COOL = NOW - 180.0
"""``coolCPUCreationTime()``: the pod started 3 minutes ago (initialized)."""

TESTING = AlgorithmSettings(
    tolerance=0.1, cpu_initialization_period=120.0, initial_readiness_delay=10.0
)
DEFAULT_TOLERANCES = Tolerances(scale_down=0.1, scale_up=0.1)
MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1

TRUE, FALSE = ConditionStatus.TRUE, ConditionStatus.FALSE
RUNNING, PENDING, FAILED = PodPhase.RUNNING, PodPhase.PENDING, PodPhase.FAILED


def tolerances(down: float, up: float) -> Tolerances:
    """``Tolerances{scaleDown, scaleUp}`` in upstream's field order."""
    return Tolerances(scale_down=down, scale_up=up)


def cpu_requests(count: int, milli: int = 1000) -> tuple[int, ...]:
    """``cpuRequests(n, "1.0")``: the same per-container request for ``count`` pods."""
    return (milli,) * count


def pod_levels(*per_container: int) -> tuple[tuple[int, ...], ...]:
    """``makePodMetricLevels``: both containers of pod i report ``per_container[i]``."""
    return tuple((value, value) for value in per_container)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """Upstream's ``calcScenario``: the listed pods and what the metrics source returns."""

    current: int
    requests: tuple[int, ...] = ()
    """Per-container cpu request of pod i (both containers), in milli; absent past the end."""
    levels: tuple[tuple[int, ...], ...] = ()
    """Per-container usage of pod i; a short row means a container reported nothing."""
    names: tuple[str, ...] = ()
    """Override the pod name the metrics source reports for row i."""
    readiness: tuple[ConditionStatus, ...] = ()
    starts: tuple[float, ...] = ()
    phases: tuple[PodPhase, ...] = ()
    deleting: tuple[bool, ...] = ()
    container: str | None = None

    def pods(self) -> tuple[Pod, ...]:
        count = max(self.current, len(self.phases))
        return tuple(self._pod(i) for i in range(count))

    def _pod(self, i: int) -> Pod:
        requests = {"cpu": self.requests[i]} if i < len(self.requests) else {}
        return Pod(
            name=f"test-pod-{i}",
            phase=self.phases[i] if self.phases else RUNNING,
            ready=self.readiness[i] if i < len(self.readiness) else TRUE,
            ready_transition_time=ZERO,
            start_time=self.starts[i] if self.starts else ZERO,
            deleting=bool(self.deleting) and self.deleting[i],
            containers=tuple(
                Container(name=f"container{j}", requests=requests) for j in (1, 2)
            ),
        )

    def resource_samples(self) -> dict[str, PodSample]:
        """What the resource metrics client makes of ``levels`` (``getPodMetrics``)."""
        samples: dict[str, PodSample] = {}
        for i, row in enumerate(self.levels):
            name = self.names[i] if i < len(self.names) else f"test-pod-{i}"
            if self.container is not None:
                index = int(self.container.removeprefix("container")) - 1
                if index < len(row):
                    samples[name] = sample(row[index])
            elif len(row) == 2:  # a container without usage drops the whole pod
                samples[name] = sample(sum(row))
        return samples


def sample(value: int, *, timestamp: float = ZERO, window: float = 60.0) -> PodSample:
    return PodSample(value=Milli(value), timestamp=timestamp, window=window)


def pod_samples(*values: int) -> dict[str, PodSample]:
    """Custom-metric samples for ``test-pod-0``, ``test-pod-1``, ..."""
    return {f"test-pod-{i}": sample(value) for i, value in enumerate(values)}


def pod(
    name: str = "pod",
    *,
    phase: PodPhase = RUNNING,
    ready: ConditionStatus | None = TRUE,
    start: float | None = ZERO,
    transition: float | None = ZERO,
    deleting: bool = False,
    containers: Sequence[Container] = (),
    sidecars: Sequence[Container] = (),
    pod_requests: dict[str, int] | None = None,
    overhead: dict[str, int] | None = None,
    pod_applied: dict[str, int] | None = None,
) -> Pod:
    return Pod(
        name=name, phase=phase, ready=ready, start_time=start, ready_transition_time=transition,
        deleting=deleting, containers=tuple(containers), sidecars=tuple(sidecars),
        pod_requests=pod_requests, overhead=overhead or {}, pod_applied=pod_applied,
    )


def container(name: str, *, applied: dict[str, int] | None = None, **requests: int) -> Container:
    """A container requesting ``requests`` in its spec; ``applied``: what its status reports."""
    return Container(name=name, requests=requests, applied=applied)


def cpu_spec(target: int) -> MetricSpec:
    """A Resource cpu Utilization metric."""
    return MetricSpec(
        type=MetricSourceType.RESOURCE, name="cpu",
        target=MetricTarget(type=MetricTargetType.UTILIZATION, average_utilization=target),
    )


def pods_spec(average: int, name: str = "qps") -> MetricSpec:
    return MetricSpec(
        type=MetricSourceType.PODS, name=name,
        target=MetricTarget(type=MetricTargetType.AVERAGE_VALUE, average_value=Milli(average)),
    )


def object_spec(*, value: int | None = None, average: int | None = None) -> MetricSpec:
    return MetricSpec(
        type=MetricSourceType.OBJECT, name="qps", described_object_kind="Deployment",
        target=_value_target(value, average),
    )


def external_spec(*, value: int | None = None, average: int | None = None) -> MetricSpec:
    return MetricSpec(
        type=MetricSourceType.EXTERNAL, name="qps", target=_value_target(value, average)
    )


def _value_target(value: int | None, average: int | None) -> MetricTarget:
    if value is not None:
        return MetricTarget(type=MetricTargetType.VALUE, value=Milli(value))
    return MetricTarget(type=MetricTargetType.AVERAGE_VALUE, average_value=Milli(average or 0))


def spec(
    *metrics: MetricSpec, min_replicas: int = 1, max_replicas: int, behavior: Behavior | None = None
) -> AutoscalerSpec:
    return AutoscalerSpec(
        min_replicas=min_replicas, max_replicas=max_replicas, metrics=metrics, behavior=behavior
    )


def scaling_rules(
    pods: int, pods_period: int, percent: int, percent_period: int, window: int
) -> ScalingRules:
    """``generateScalingRules``: Max select policy, a Pods and/or a Percent policy."""
    policies: list[ScalingPolicy] = []
    if pods:
        policies.append(ScalingPolicy(type=PolicyType.PODS, value=pods, period_seconds=pods_period))
    if percent:
        policies.append(
            ScalingPolicy(type=PolicyType.PERCENT, value=percent, period_seconds=percent_period)
        )
    return ScalingRules(
        stabilization_window_seconds=window, select_policy=SelectPolicy.MAX,
        policies=tuple(policies),
    )


def events_uniform(changes: Sequence[int], period: int) -> tuple[ScaleEvent, ...]:
    """``generateEventsUniformDistribution``: events centred in equal slices of the last
    ``period`` seconds (Go truncates each offset to whole seconds)."""
    segment = period / len(changes)
    return tuple(
        ScaleEvent(change=change, timestamp=NOW - math.trunc(period - segment * (i + 1) + segment / 2))
        for i, change in enumerate(changes)
    )


def recommendations(*pairs: tuple[int, float]) -> tuple[Recommendation, ...]:
    """(replicas, seconds ago) pairs."""
    return tuple(Recommendation(replicas=r, timestamp=NOW - ago) for r, ago in pairs)


INITIALIZED = History(recommendations=recommendations((0, 86_400.0)))
"""Upstream's ``recommendations: []timestampedRecommendation{}``: known to the controller, so
not seeded, with nothing inside any window (our ``History`` seeds only an empty history)."""
