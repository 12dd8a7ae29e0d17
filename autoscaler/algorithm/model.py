"""Value objects of the pure HPA core: specs, pods, samples, history and the decision.

Everything here is an immutable ``@record`` (``autoscaler.record``: the type checker rejects
any assignment) or an enum, so a decision is a function of its inputs and can be compared,
stored and replayed. Quantities are integer *milli-units*
(``Quantity.MilliValue()`` upstream) and times are float seconds on any monotonic-enough
clock the caller chooses (Unix time in the daemon, virtual time in the simulator).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from enum import StrEnum
from types import MappingProxyType
from typing import NewType

from autoscaler.record import record

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


@record
class AlgorithmSettings:
    """Controller-wide settings (kube-controller-manager flags), upstream defaults."""

    tolerance: float = 0.1
    cpu_initialization_period: Seconds = 300.0
    initial_readiness_delay: Seconds = 30.0
    downscale_stabilization: Seconds = 300.0


# --- observed state -------------------------------------------------------------------------


@record
class Container:
    name: str
    requests: Mapping[str, int] = field(default_factory=lambda: EMPTY_MAPPING)
    """Resource name -> request in milli-units."""


@record
class Pod:
    """What the core needs of a pod; the Kubernetes adapter builds these from the watch cache."""

    name: str
    phase: PodPhase = PodPhase.RUNNING
    ready: ConditionStatus | None = ConditionStatus.TRUE
    """Status of the pod's Ready condition; ``None`` when the pod has no Ready condition."""
    ready_transition_time: Seconds | None = None
    start_time: Seconds | None = None
    deleting: bool = False
    """The pod has a deletion timestamp."""
    containers: tuple[Container, ...] = ()
    sidecars: tuple[Container, ...] = ()
    """Init containers with ``restartPolicy: Always``: their requests count (upstream)."""
    pod_requests: Mapping[str, int] | None = None
    """Pod-level requests (``spec.resources.requests``, PodLevelResources), if set."""
    overhead: Mapping[str, int] = field(default_factory=lambda: EMPTY_MAPPING)
    """``spec.overhead`` (RuntimeClass), milli-units; upstream adds it to pod-level requests."""


@record
class PodSample:
    """One pod's metric value, when it was measured and the window it averages over."""

    value: Milli
    timestamp: Seconds
    window: Seconds = 60.0


@record
class ScaleState:
    """The target's ``/scale``: ``spec.replicas`` and ``status.replicas``."""

    spec_replicas: int
    status_replicas: int


@record
class PodMetricValues:
    """Samples for Resource, ContainerResource and Pods metrics, keyed by pod name."""

    samples: Mapping[str, PodSample]
    query: str | None = field(default=None, compare=False)
    """The PromQL that was run for these values, as sent (for status; not compared)."""


@record
class ObjectMetricValue:
    """The single value of an Object metric."""

    value: Milli
    query: str | None = field(default=None, compare=False)
    """The PromQL that was run for these values, as sent (for status; not compared)."""


@record
class ExternalMetricValues:
    """Every series an External metric query matched; upstream sums them."""

    values: tuple[Milli, ...]
    query: str | None = field(default=None, compare=False)
    """The PromQL that was run for these values, as sent (for status; not compared)."""


@record
class MetricUnavailable:
    """The metrics source could not produce this metric this pass; ``reason`` says why."""

    reason: str
    query: str | None = field(default=None, compare=False)
    """The PromQL that was run for these values, as sent (for status; not compared)."""


MetricValues = PodMetricValues | ObjectMetricValue | ExternalMetricValues | MetricUnavailable


# --- history (what stabilization windows and policies remember) ----------------------------


@record
class Recommendation:
    replicas: int
    timestamp: Seconds


@record
class ScaleEvent:
    """A scale write's magnitude; ``outdated`` slots are reused instead of deleted (upstream)."""

    change: int
    timestamp: Seconds
    outdated: bool = False


@record
class History:
    """Per-target memory. Upstream keeps it in controller memory; the daemon persists it."""

    recommendations: tuple[Recommendation, ...] = ()
    scale_up_events: tuple[ScaleEvent, ...] = ()
    scale_down_events: tuple[ScaleEvent, ...] = ()

    @property
    def seeded(self) -> bool:
        return bool(self.recommendations)
