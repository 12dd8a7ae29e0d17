"""What a simulation records: a timeline row per step, each metric's row in it, the load as it
really was and the pod counts (the engine, the load and the workload make them; the report,
the files and the plot read them).

Native value types, as the core's per-pass values (``autoscaler/record.py``): the
simulator builds one or more of each every step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from autoscaler.record import seal_values


@dataclass(init=False, slots=True, unsafe_hash=True)
class Counts:
    pending: Final[int]
    starting: Final[int]
    ready: Final[int]
    deleting: Final[int]

    def __init__(self, *, pending: int, starting: int, ready: int, deleting: int) -> None:
        self.pending = pending
        self.starting = starting
        self.ready = ready
        self.deleting = deleting

    @property
    def active(self) -> int:
        """Pods not being deleted: what ``status.replicas`` counts."""
        return self.pending + self.starting + self.ready


@dataclass(init=False, slots=True, unsafe_hash=True)
class MetricLoad:
    """One metric at one step, as it really is (not as the core saw it)."""

    total: Final[float | None]
    per_pod: Final[float | None]
    """Per Ready pod, before saturation; ``None`` when there is load but no Ready pod."""
    ratio: Final[float | None]
    """Per-pod load over the target (utilization over target utilization, ...): 1 is on target."""

    def __init__(self, *, total: float | None, per_pod: float | None, ratio: float | None) -> None:
        self.total = total
        self.per_pod = per_pod
        self.ratio = ratio


@dataclass(init=False, slots=True, unsafe_hash=True)
class MetricRow:
    """One metric in one step, in the order of ``spec.metrics``."""

    load: Final[MetricLoad]
    seen: Final[float | None]
    """The current value the core computed (utilization %, average or value), as it reports it."""
    proposal: Final[int | None]
    forecast: Final[float | None]
    """The metric's forecast total, for ``forecast_at`` (``None``: no prediction)."""
    forecast_at: Final[float | None]
    forecast_used: Final[bool]

    def __init__(
        self,
        *,
        load: MetricLoad,
        seen: float | None,
        proposal: int | None,
        forecast: float | None = None,
        forecast_at: float | None = None,
        forecast_used: bool = False,
    ) -> None:
        self.load = load
        self.seen = seen
        self.proposal = proposal
        self.forecast = forecast
        self.forecast_at = forecast_at
        self.forecast_used = forecast_used


@dataclass(init=False, slots=True, unsafe_hash=True)
class Row:
    """One sync: the state observed at ``time`` and the decision taken on it."""

    time: Final[float]
    demand: Final[float | None]
    current: Final[int]
    desired: Final[int]
    pending: Final[int]
    starting: Final[int]
    ready: Final[int]
    deleting: Final[int]
    metrics: Final[tuple[MetricRow, ...]]
    proposal: Final[int | None]
    steps: Final[tuple[str, ...]]
    limited: Final[str]
    """The ScalingLimited reason when the count was limited, else empty."""
    error: Final[str | None]
    reactive: Final[int | None]
    """With prediction: the desired count from the live metrics alone."""
    predictive: Final[int | None]
    """With prediction: the desired count with the forecasts (acted on unless forecastOnly)."""

    def __init__(
        self,
        *,
        time: float,
        demand: float | None,
        current: int,
        desired: int,
        pending: int,
        starting: int,
        ready: int,
        deleting: int,
        metrics: tuple[MetricRow, ...],
        proposal: int | None,
        steps: tuple[str, ...],
        limited: str,
        error: str | None,
        reactive: int | None = None,
        predictive: int | None = None,
    ) -> None:
        self.time = time
        self.demand = demand
        self.current = current
        self.desired = desired
        self.pending = pending
        self.starting = starting
        self.ready = ready
        self.deleting = deleting
        self.metrics = metrics
        self.proposal = proposal
        self.steps = steps
        self.limited = limited
        self.error = error
        self.reactive = reactive
        self.predictive = predictive

    @property
    def rescale(self) -> bool:
        return self.desired != self.current


seal_values(globals())
