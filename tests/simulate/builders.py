"""Small builders for the simulate tests: specs, traces and runs in a line each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib import colors

from autoscaler.algorithm import (
    AutoscalerSpec,
    Behavior,
    MetricSourceType,
    MetricSpec,
    MetricTarget,
    MetricTargetType,
    Milli,
    PolicyType,
    ScalingPolicy,
)
from autoscaler.simulate.engine import Scenario, Timeline, simulate
from autoscaler.simulate.rows import Row
from autoscaler.simulate.trace import Trace, make_trace
from autoscaler.simulate.workload import WorkloadModel


def rps(average: float = 100) -> MetricSpec:
    """A Pods metric ``rps`` with an AverageValue target."""
    target = MetricTarget(type=MetricTargetType.AVERAGE_VALUE, average_value=Milli(round(average * 1000)))
    return MetricSpec(type=MetricSourceType.PODS, name="rps", target=target)


def cpu(utilization: int = 50) -> MetricSpec:
    target = MetricTarget(type=MetricTargetType.UTILIZATION, average_utilization=utilization)
    return MetricSpec(type=MetricSourceType.RESOURCE, name="cpu", target=target)


def external(value: float, *, average: bool = False) -> MetricSpec:
    milli = Milli(round(value * 1000))
    target = (
        MetricTarget(type=MetricTargetType.AVERAGE_VALUE, average_value=milli) if average
        else MetricTarget(type=MetricTargetType.VALUE, value=milli)
    )
    return MetricSpec(type=MetricSourceType.EXTERNAL, name="queue", target=target)


def pods_policy(value: int, period: int = 15) -> ScalingPolicy:
    return ScalingPolicy(type=PolicyType.PODS, value=value, period_seconds=period)


def percent_policy(value: int, period: int = 15) -> ScalingPolicy:
    return ScalingPolicy(type=PolicyType.PERCENT, value=value, period_seconds=period)


def spec(
    *metrics: MetricSpec, low: int = 1, high: int = 50, behavior: Behavior | None = None
) -> AutoscalerSpec:
    return AutoscalerSpec(
        min_replicas=low, max_replicas=high, metrics=metrics or (rps(),), behavior=behavior
    )


def trace(points: Sequence[tuple[float, float | None]], column: str = "demand") -> Trace:
    return make_trace([t for t, _ in points], {column: [v for _, v in points]}, source="test")


def run(the_spec: AutoscalerSpec, the_trace: Trace, **model: Any) -> Timeline:
    """Simulate with a 15 s sync; model fields default to instant pods and 15 s windows."""
    model.setdefault("metric_window", 15.0)
    return simulate(
        Scenario(label="t", spec=the_spec, model=WorkloadModel(**model)), the_trace
    )


def at(timeline: Timeline, time: float) -> Row:
    return next(row for row in timeline.rows if row.time == time)


def desired(timeline: Timeline) -> dict[float, int]:
    return {row.time: row.desired for row in timeline.rows}


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def pixels_of(image: np.ndarray, color: str) -> int:
    """How many pixels of a decoded image are (nearly) exactly ``color``."""
    rgb = np.array(colors.to_rgb(color))
    return int((np.abs(image[..., :3] - rgb).max(axis=-1) < 0.02).sum())
