"""How long `autoscaler simulate` takes for a week of 15-second steps for one target.

    .venv/bin/python bench/simulate_week.py

Builds a week-long demand trace (a point per minute: seven copies of a daily shape with a
spike each afternoon), runs the `web` example's spec (a Pods rps metric and cpu utilization,
no behavior) against the example's workload model, and prints the wall time of the
simulation loop and of the whole run with the summary. Deterministic input; the timing is
whatever this machine does.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autoscaler.algorithm import (
    AutoscalerSpec,
    MetricSourceType,
    MetricSpec,
    MetricTarget,
    MetricTargetType,
    Milli,
)
from autoscaler.simulate.engine import Scenario, simulate
from autoscaler.simulate.report import summarize
from autoscaler.simulate.trace import make_trace
from autoscaler.simulate.workload import WorkloadModel

WEEK = 7 * 24 * 3600


def demand(t: float) -> float:
    hour = (t % 86400) / 3600
    daily = 60 + 1140 * max(0.0, math.sin(math.pi * (hour - 6) / 16)) if 6 <= hour <= 22 else 60
    spike = 2000 if 14 <= hour < 14 + 1 / 6 else 0
    return daily + spike


def main() -> None:
    times = [float(t) for t in range(0, WEEK + 1, 60)]
    trace = make_trace(times, {"demand": [demand(t) for t in times]}, source="bench")
    spec = AutoscalerSpec(
        min_replicas=2, max_replicas=40,
        metrics=(
            MetricSpec(type=MetricSourceType.PODS, name="rps", target=MetricTarget(
                type=MetricTargetType.AVERAGE_VALUE, average_value=Milli(80_000))),
            MetricSpec(type=MetricSourceType.RESOURCE, name="cpu", target=MetricTarget(
                type=MetricTargetType.UTILIZATION, average_utilization=70)),
        ),
    )
    model = WorkloadModel(capacity=100, requests={"cpu": Milli(500)}, startup=20, readiness=10,
                          termination=5, saturation=150)
    scenario = Scenario(label="web", spec=spec, model=model, sync_period=15)
    started = time.perf_counter()
    timeline = simulate(scenario, trace, interpolation="linear")
    looped = time.perf_counter() - started
    summary = summarize(timeline)
    total = time.perf_counter() - started
    print(f"steps: {len(timeline.rows)} (a week at 15 s), replicas {summary.min_replicas}.."
          f"{summary.max_replicas}, {summary.scale_events} scale events")
    print(f"simulation loop: {looped:.2f} s ({len(timeline.rows) / looped:,.0f} steps/s); "
          f"with the summary: {total:.2f} s")


if __name__ == "__main__":
    main()
