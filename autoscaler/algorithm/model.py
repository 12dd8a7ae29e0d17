"""Value objects of the pure HPA core: specs, pods, samples, history and the decision.

Everything here is immutable (the type checker rejects any assignment): a ``@record``, a
native value type for what is built every pass (``autoscaler.record`` says why), or an enum,
so a decision is a function of its inputs and can be compared, stored and replayed.
Quantities are integer *milli-units* (``Quantity.MilliValue()`` upstream) and times are float
seconds on any monotonic-enough clock the caller chooses (Unix time in the daemon, virtual
time in the simulator).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Final, NewType

from autoscaler.record import record, refuse_assignment, seal_values

Milli = NewType("Milli", int)
"""A quantity in thousandths of its unit: 500m CPU is 500, 1 GiB is 1024**3 * 1000."""

Seconds = float
"""A point in time or a duration in seconds; the core never reads a clock itself."""

EMPTY_MAPPING: Mapping[str, int] = MappingProxyType({})


class MetricSourceType(StrEnum):
    RESOURCE = "Resource"
    CONTAINER_RESOURCE = "ContainerResource"
    PODS = "Pods"
    OBJECT = "Object"
    EXTERNAL = "External"


class MetricTargetType(StrEnum):
    UTILIZATION = "Utilization"
    VALUE = "Value"
    AVERAGE_VALUE = "AverageValue"


class PolicyType(StrEnum):
    PODS = "Pods"
    PERCENT = "Percent"


class SelectPolicy(StrEnum):
    MAX = "Max"
    MIN = "Min"
    DISABLED = "Disabled"


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


class RequestsBasis(StrEnum):
    """Which requests a Utilization target divides usage by, while a pod is resized in place
    (InPlacePodVerticalScaling: the spec changes at once, the kubelet applies it later)."""

    APPLIED = "applied"
    """What the kubelet reports it has applied (``status.containerStatuses[*].resources``,
    else ``allocatedResources``; ``status.resources`` at pod level), the spec's where the
    status has none: what the containers run with, which usage is measured against."""
    SPEC = "spec"
    """The spec's, as upstream's ReplicaCalculator reads them to this day
    (kubernetes#142155; the fix, kubernetes#142157, is not merged)."""


DEFAULT_REQUESTS_BASIS = RequestsBasis.APPLIED
"""Ours: upstream divides by the spec's requests, so a resize in flight makes it scale in
early (a vertical scale-up) or out for nothing (a vertical scale-down)."""


# --- the spec (autoscaling/v2 HorizontalPodAutoscalerSpec, minus scaleTargetRef) -------------


@record
class MetricTarget:
    """``MetricTarget``: exactly the field that matches ``type`` is set."""

    type: MetricTargetType
    value: Milli | None = None
    average_value: Milli | None = None
    average_utilization: int | None = None  # percent of the request


@record
class MetricSpec:
    """One entry of ``spec.metrics``.

    ``name`` is the resource name (``cpu``, ``memory``) for Resource and ContainerResource
    metrics and the metric's name otherwise; ``container`` is set only for ContainerResource.
    """

    type: MetricSourceType
    name: str
    target: MetricTarget
    container: str | None = None
    described_object_kind: str | None = None
    """The kind of an Object metric's ``describedObject``; it only names the metric in messages."""


@record
class ScalingPolicy:
    type: PolicyType
    value: int
    period_seconds: int


@record
class ScalingRules:
    """``HPAScalingRules`` as the user wrote it: ``None`` means "not given", defaults fill it."""

    stabilization_window_seconds: int | None = None
    select_policy: SelectPolicy | None = None
    policies: tuple[ScalingPolicy, ...] | None = None
    tolerance: float | None = None


@record
class Behavior:
    scale_up: ScalingRules | None = None
    scale_down: ScalingRules | None = None


@record
class AutoscalerSpec:
    """The part of an HPA spec the algorithm reads."""

    min_replicas: int = 1
    max_replicas: int
    metrics: tuple[MetricSpec, ...]
    behavior: Behavior | None = None
    utilization_requests: RequestsBasis | None = None
    """Ours: which requests Utilization divides by for this target (``None``: the settings')."""


DEFAULT_SYNC_PERIOD: Seconds = 15.0
"""Seconds between a target's passes unless ``syncPeriod`` says otherwise (upstream's
``--horizontal-pod-autoscaler-sync-period`` default)."""


@record
class AlgorithmSettings:
    """Controller-wide settings (kube-controller-manager flags), upstream defaults; one of
    ours, ``utilization_requests``, whose upstream behaviour is ``RequestsBasis.SPEC``."""

    tolerance: float = 0.1
    cpu_initialization_period: Seconds = 300.0
    initial_readiness_delay: Seconds = 30.0
    downscale_stabilization: Seconds = 300.0
    utilization_requests: RequestsBasis = DEFAULT_REQUESTS_BASIS


# --- observed state -------------------------------------------------------------------------


@dataclass(init=False, slots=True, unsafe_hash=True)
class Container:
    name: Final[str]
    requests: Final[Mapping[str, int]]
    """Resource name -> request in milli-units, as the spec asks."""
    applied: Final[Mapping[str, int] | None]
    """The requests the kubelet reports it has applied (its status' ``resources.requests``,
    else ``allocatedResources``); ``None`` when the status reports neither. They differ
    from ``requests`` while the container is resized in place."""

    def __init__(
        self, *, name: str, requests: Mapping[str, int] = EMPTY_MAPPING,
        applied: Mapping[str, int] | None = None,
    ) -> None:
        self.name = name
        self.requests = requests
        self.applied = applied


@dataclass(init=False, slots=True, unsafe_hash=True)
class Pod:
    """What the core needs of a pod; the Kubernetes adapter builds these from the watch cache."""

    name: Final[str]
    phase: Final[PodPhase]
    ready: Final[ConditionStatus | None]
    """Status of the pod's Ready condition; ``None`` when the pod has no Ready condition."""
    ready_transition_time: Final[Seconds | None]
    start_time: Final[Seconds | None]
    deleting: Final[bool]
    """The pod has a deletion timestamp."""
    containers: Final[tuple[Container, ...]]
    sidecars: Final[tuple[Container, ...]]
    """Init containers with ``restartPolicy: Always``: their requests count (upstream)."""
    pod_requests: Final[Mapping[str, int] | None]
    """Pod-level requests (``spec.resources.requests``, PodLevelResources), if set."""
    overhead: Final[Mapping[str, int]]
    """``spec.overhead`` (RuntimeClass), milli-units. No request counts it: upstream has left it
    out of pod-level requests since kubernetes#142154, as usage never includes it."""
    pod_applied: Final[Mapping[str, int] | None]
    """Pod-level requests the kubelet reports it has applied (``status.resources.requests``,
    else ``status.allocatedResources``), overhead included as the kubelet reports them;
    ``None`` when the status has neither."""

    def __init__(
        self,
        *,
        name: str,
        phase: PodPhase = PodPhase.RUNNING,
        ready: ConditionStatus | None = ConditionStatus.TRUE,
        ready_transition_time: Seconds | None = None,
        start_time: Seconds | None = None,
        deleting: bool = False,
        containers: tuple[Container, ...] = (),
        sidecars: tuple[Container, ...] = (),
        pod_requests: Mapping[str, int] | None = None,
        overhead: Mapping[str, int] = EMPTY_MAPPING,
        pod_applied: Mapping[str, int] | None = None,
    ) -> None:
        self.name = name
        self.phase = phase
        self.ready = ready
        self.ready_transition_time = ready_transition_time
        self.start_time = start_time
        self.deleting = deleting
        self.containers = containers
        self.sidecars = sidecars
        self.pod_requests = pod_requests
        self.overhead = overhead
        self.pod_applied = pod_applied


@dataclass(init=False, slots=True, unsafe_hash=True)
class PodSample:
    """One pod's metric value, when it was measured and the window it averages over."""

    value: Final[Milli]
    timestamp: Final[Seconds]
    window: Final[Seconds]

    def __init__(self, *, value: Milli, timestamp: Seconds, window: Seconds = 60.0) -> None:
        self.value = value
        self.timestamp = timestamp
        self.window = window


@dataclass(init=False, slots=True, unsafe_hash=True)
class ScaleState:
    """The target's ``/scale``: ``spec.replicas`` and ``status.replicas``."""

    spec_replicas: Final[int]
    status_replicas: Final[int]

    def __init__(self, *, spec_replicas: int, status_replicas: int) -> None:
        self.spec_replicas = spec_replicas
        self.status_replicas = status_replicas


@dataclass(init=False, slots=True, unsafe_hash=True)
class PodMetricValues:
    """Samples for Resource, ContainerResource and Pods metrics, keyed by pod name."""

    samples: Final[Mapping[str, PodSample]]
    query: str | None = field(compare=False)
    """The PromQL that was run for these values, as sent (for status; not compared)."""

    def __init__(self, *, samples: Mapping[str, PodSample], query: str | None = None) -> None:
        self.samples = samples
        self.query = query

    def __setattr__(self, name: str, value: object) -> None:
        refuse_assignment(self, name)  # compiled: some fields are not Final

    def __delattr__(self, name: str) -> None:
        refuse_assignment(self, name)


@dataclass(init=False, slots=True, unsafe_hash=True)
class ObjectMetricValue:
    """The single value of an Object metric."""

    value: Final[Milli]
    query: str | None = field(compare=False)
    """The PromQL that was run for these values, as sent (for status; not compared)."""

    def __init__(self, *, value: Milli, query: str | None = None) -> None:
        self.value = value
        self.query = query

    def __setattr__(self, name: str, value: object) -> None:
        refuse_assignment(self, name)  # compiled: some fields are not Final

    def __delattr__(self, name: str) -> None:
        refuse_assignment(self, name)


@dataclass(init=False, slots=True, unsafe_hash=True)
class ExternalMetricValues:
    """Every series an External metric query matched; upstream sums them."""

    values: Final[tuple[Milli, ...]]
    query: str | None = field(compare=False)
    """The PromQL that was run for these values, as sent (for status; not compared)."""

    def __init__(self, *, values: tuple[Milli, ...], query: str | None = None) -> None:
        self.values = values
        self.query = query

    def __setattr__(self, name: str, value: object) -> None:
        refuse_assignment(self, name)  # compiled: some fields are not Final

    def __delattr__(self, name: str) -> None:
        refuse_assignment(self, name)


@dataclass(init=False, slots=True, unsafe_hash=True)
class MetricUnavailable:
    """The metrics source could not produce this metric this pass; ``reason`` says why."""

    reason: Final[str]
    query: str | None = field(compare=False)
    """The PromQL that was run for these values, as sent (for status; not compared)."""

    def __init__(self, *, reason: str, query: str | None = None) -> None:
        self.reason = reason
        self.query = query

    def __setattr__(self, name: str, value: object) -> None:
        refuse_assignment(self, name)  # compiled: some fields are not Final

    def __delattr__(self, name: str) -> None:
        refuse_assignment(self, name)


MetricValues = PodMetricValues | ObjectMetricValue | ExternalMetricValues | MetricUnavailable


@dataclass(init=False, slots=True, unsafe_hash=True)
class PodValues:
    """A per-pod metric's values as a decision keeps them for status: each pod's value, not
    its sample. A target's last decision lives until its next pass; its samples (an object,
    its time and window a pod) held 560 bytes a target of two per-pod metrics over 5 pods."""

    values: Final[Mapping[str, Milli]]
    query: str | None = field(compare=False)
    """The PromQL that was run for these values, as sent (for status; not compared)."""

    def __init__(self, *, values: Mapping[str, Milli], query: str | None = None) -> None:
        self.values = values
        self.query = query

    def __setattr__(self, name: str, value: object) -> None:
        refuse_assignment(self, name)  # compiled: some fields are not Final

    def __delattr__(self, name: str) -> None:
        refuse_assignment(self, name)


KeptValues = PodValues | ObjectMetricValue | ExternalMetricValues | MetricUnavailable
"""What a decision keeps of the values a metric was computed from (``kept_values``)."""


def kept_values(values: MetricValues) -> KeptValues:
    if isinstance(values, PodMetricValues):
        return PodValues(values={pod: sample.value for pod, sample in values.samples.items()},
                         query=values.query)
    return values


# --- history (what stabilization windows and policies remember) ----------------------------


@dataclass(init=False, slots=True, unsafe_hash=True)
class Recommendation:
    replicas: Final[int]
    timestamp: Final[Seconds]

    def __init__(self, *, replicas: int, timestamp: Seconds) -> None:
        self.replicas = replicas
        self.timestamp = timestamp


@dataclass(init=False, slots=True, unsafe_hash=True)
class ScaleEvent:
    """A scale write's magnitude; ``outdated`` slots are reused instead of deleted (upstream)."""

    change: Final[int]
    timestamp: Final[Seconds]
    outdated: Final[bool]

    def __init__(self, *, change: int, timestamp: Seconds, outdated: bool = False) -> None:
        self.change = change
        self.timestamp = timestamp
        self.outdated = outdated


@dataclass(init=False, slots=True, unsafe_hash=True)
class History:
    """Per-target memory. Upstream keeps it in controller memory; the daemon persists it."""

    recommendations: Final[tuple[Recommendation, ...]]
    scale_up_events: Final[tuple[ScaleEvent, ...]]
    scale_down_events: Final[tuple[ScaleEvent, ...]]

    def __init__(
        self,
        *,
        recommendations: tuple[Recommendation, ...] = (),
        scale_up_events: tuple[ScaleEvent, ...] = (),
        scale_down_events: tuple[ScaleEvent, ...] = (),
    ) -> None:
        self.recommendations = recommendations
        self.scale_up_events = scale_up_events
        self.scale_down_events = scale_down_events

    @property
    def seeded(self) -> bool:
        return bool(self.recommendations)


EMPTY_HISTORY = History()
"""A target's history before its first pass (immutable: one instance serves every default)."""


seal_values(globals())
