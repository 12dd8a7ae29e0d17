"""simulate honours schedules, evaluated in the trace's own time."""

from __future__ import annotations

from datetime import time

from autoscaler.schedules import DailyWindow, Schedule
from autoscaler.simulate.engine import Scenario, simulate
from autoscaler.simulate.workload import WorkloadModel
from tests.simulate.builders import spec, trace

HOUR = 3600.0
BUSINESS = Schedule(name="business", window=DailyWindow(start=time(8), end=time(20)),
                    min_replicas=6)


def run_day(*schedules: Schedule):  # type: ignore[no-untyped-def]
    """A flat 50 req/s (1 pod's worth at 100 per pod) over a day from Monday 00:00 UTC."""
    day = trace([(0.0, 50.0), (24 * HOUR, 50.0)])
    scenario = Scenario(label="t", spec=spec(low=1, high=20),
                        model=WorkloadModel(capacity=100, metric_window=15.0),
                        schedules=schedules)
    return {row.time: row.desired for row in simulate(scenario, day).rows}


def test_floor_holds_during_the_window_only() -> None:
    """Below the window's floor before 08:00, at it from 08:00 (in steps), back after 20:00."""
    replicas = run_day(BUSINESS)
    assert replicas[8 * HOUR - 15] == 1
    assert replicas[8 * HOUR] == 4          # max(2 x 1, 4): the default scale-up limit
    assert replicas[8 * HOUR + 15] == 6     # then the floor, exactly
    assert replicas[19 * HOUR] == 6
    # After 20:00 the spec's minReplicas applies again. The recommendations recorded all day
    # were the load's own (1), so no window holds the count up: it drops at once, exactly as
    # upstream does when a user lowers an HPA's minReplicas (without behavior policies).
    assert replicas[20 * HOUR - 15] == 6
    assert replicas[20 * HOUR] == 1


def test_without_schedules_the_load_alone_decides() -> None:
    """The same day with no schedule stays at 1 replica throughout."""
    assert set(run_day().values()) == {1}
