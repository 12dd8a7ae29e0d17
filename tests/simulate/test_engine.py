"""The engine: the daemon's pass in virtual time, checked against hand-computed runs."""

from __future__ import annotations

import gc
import hashlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.algorithm import Behavior, ScalingRules, SelectPolicy
from autoscaler.config import load_config
from autoscaler.simulate.engine import NEVER, YOUNG, Scenario, simulate
from autoscaler.simulate.options import build_settings, load_workload_file
from autoscaler.simulate.simulation_error import SimulationError
from autoscaler.simulate.trace import load_trace, make_trace
from autoscaler.simulate.workload import WorkloadModel
from tests.simulate.builders import (
    at,
    cpu,
    desired,
    percent_policy,
    pods_policy,
    rps,
    run,
    spec,
    trace,
)

# 100 rps per pod is on target; at t=60 demand jumps to 2000 (20 pods' worth).
STEP_UP = trace([(0, 100), (60, 2000), (300, 2000)])
# As STEP_UP, then back to 100 at t=600.
STEP_UP_DOWN = trace([(0, 100), (60, 2000), (600, 100), (1500, 100)])
UP_POLICIES = Behavior(scale_up=ScalingRules(
    select_policy=SelectPolicy.MAX, policies=(pods_policy(4), percent_policy(100)),
))


@pytest.mark.parametrize(
    ("behavior", "expected"),
    [
        # No behavior: at most max(2 x current, 4) per sync: 1 -> 4 -> 8 -> 16 -> 20.
        (None, {45: 1, 60: 4, 75: 8, 90: 16, 105: 20, 120: 20}),
        # 4 pods or 100% per 15 s, the larger: 1 -> 5 -> 10 -> 20.
        (UP_POLICIES, {45: 1, 60: 5, 75: 10, 90: 20, 105: 20}),
        # A Min policy takes the smaller: 1 -> 2 -> 4 -> 8 -> 12 -> 16 -> 20.
        (Behavior(scale_up=ScalingRules(
            select_policy=SelectPolicy.MIN, policies=(pods_policy(4), percent_policy(100)),
        )), {60: 2, 75: 4, 90: 8, 105: 12, 120: 16, 135: 20}),
    ],
    ids=["no-behavior-2x-or-4", "behavior-4-pods-or-100pct", "behavior-min-policy"],
)
def test_step_load_scale_up_rate(behavior: Behavior | None, expected: dict[float, int]) -> None:
    """A step load scales up no faster than the rate the behavior allows, sync by sync."""
    timeline = run(spec(behavior=behavior), STEP_UP)
    assert {t: desired(timeline)[t] for t in expected} == expected


@pytest.mark.parametrize(
    ("behavior", "first_down", "count"),
    [
        # The last high recommendation is at t=585. Upstream's two paths differ at the edge:
        # without behavior a recommendation counts while not older than now - window
        # (gone at 585 + 300 + 15), with behavior only while strictly newer (gone at 885).
        (None, 900.0, 1),
        (Behavior(), 885.0, 1),
        (Behavior(scale_down=ScalingRules(stabilization_window_seconds=60)), 645.0, 1),
    ],
    ids=["no-behavior-300s", "behavior-defaults-300s", "window-60s"],
)
def test_scale_down_waits_for_the_window(
    behavior: Behavior | None, first_down: float, count: int
) -> None:
    """After the drop at t=600, replicas hold at 20 until the window has seen only low
    recommendations, then go straight to the proposal."""
    timeline = run(spec(behavior=behavior), STEP_UP_DOWN)
    downs = [row for row in timeline.rows if row.desired < row.current]
    assert downs[0].time == first_down
    assert (downs[0].current, downs[0].desired) == (20, count)
    assert all(row.desired == 20 for row in timeline.rows if 120 <= row.time < first_down)


def test_scale_down_policy_limits_the_rate() -> None:
    """Without a window, a 5-pods-per-60-s policy steps down 20 -> 15 -> 10 -> 5 -> 1."""
    behavior = Behavior(scale_down=ScalingRules(
        stabilization_window_seconds=0, policies=(pods_policy(5, period=60),),
    ))
    timeline = run(spec(behavior=behavior), STEP_UP_DOWN)
    changes = [(row.time, row.desired) for row in timeline.rows if row.rescale and row.time >= 600]
    assert changes == [(600, 15), (660, 10), (720, 5), (780, 1)]


def test_first_pass_cannot_scale_down() -> None:
    """The history is seeded with the starting count, so a low start holds for the window."""
    timeline = run(spec(), trace([(0, 100), (600, 100)]), replicas=10)
    assert desired(timeline)[0] == 10
    assert desired(timeline)[300] == 10  # the seed at t=0 is still inside [now - 300, now]
    assert desired(timeline)[315] == 1


def test_unready_pods_take_no_traffic() -> None:
    """New pods are Pending for 30 s and unready for 15 s more; until then the one Ready pod
    carries the whole load, and Running-but-unready pods report 0 to a Pods metric."""
    timeline = run(spec(), trace([(0, 100), (60, 400), (200, 400)]), startup=30, readiness=15)
    assert [at(timeline, t).ready for t in (60, 75, 90, 105)] == [1, 1, 1, 4]
    assert [at(timeline, t).pending for t in (75, 90)] == [3, 0]
    assert at(timeline, 90).starting == 3
    assert [at(timeline, t).metrics[0].load.ratio for t in (75, 90, 105)] == [4.0, 4.0, 1.0]
    # t=75: Pending pods are unready, counted as 0 on a scale-up: the average over 4 is on
    # target, so the count holds. t=90: the starting pods' 0 samples are averaged in.
    assert [at(timeline, t).metrics[0].seen for t in (75, 90, 105)] == [400.0, 100.0, 100.0]
    assert [at(timeline, t).desired for t in (60, 75, 90, 105)] == [4, 4, 4, 4]


def test_cpu_samples_of_newly_ready_pods_are_not_trusted() -> None:
    """Within the cpu initialization period a pod's sample counts only once a full metric
    window has passed since it became Ready: at t=75 the core sees the old pods' 112%, not
    the 75% all four pods really run at."""
    timeline = run(
        spec(cpu(50), low=2, high=4), trace([(0, 100), (60, 300), (120, 300)]),
        capacity=100, readiness=15, metric_window=30,
    )
    assert at(timeline, 60).desired == 4
    row = at(timeline, 75)
    assert row.ready == 4
    assert row.metrics[0].load.ratio == 1.5
    assert row.metrics[0].seen == 112


def test_gap_in_the_trace_never_scales_down() -> None:
    """A missing value makes the metric invalid: no scale-down, the error is recorded."""
    timeline = run(
        spec(behavior=Behavior(scale_down=ScalingRules(stabilization_window_seconds=0))),
        trace([(0, 400), (60, None), (120, None)]),
        replicas=8,
    )
    gap = [row for row in timeline.rows if row.time >= 60]
    assert all(row.desired == row.current for row in gap)
    assert all(row.error and "no value for rps" in row.error for row in gap)


def test_per_metric_column_drives_its_metric() -> None:
    """A column named after a metric gives its total directly; no demand column needed."""
    timeline = run(spec(rps(100)), trace([(0, 300), (60, 300)], column="rps"), replicas=3)
    assert all(row.desired == 3 and row.demand is None for row in timeline.rows)
    assert at(timeline, 30).metrics[0].seen == 100.0


def test_trace_without_a_usable_column_is_rejected() -> None:
    """A trace with neither ``demand`` nor the metric's column cannot drive the metric."""
    with pytest.raises(SimulationError, match="neither a 'demand' column nor one named"):
        run(spec(rps()), trace([(0, 1), (15, 1)], column="qps"))


def test_sync_period_sets_the_step() -> None:
    """Steps fall on multiples of the sync period, covering the whole trace."""
    scenario = Scenario(label="t", spec=spec(), model=WorkloadModel(), sync_period=30)
    timeline = simulate(scenario, trace([(0, 100), (100, 100)]))
    assert [row.time for row in timeline.rows] == [0, 30, 60, 90]


def test_progress_is_reported_in_about_a_hundred_calls() -> None:
    """Long runs report progress every ~1% of the steps, ending with (all, all)."""
    calls: list[tuple[int, int]] = []
    scenario = Scenario(label="t", spec=spec(), model=WorkloadModel())
    timeline = simulate(scenario, trace([(0, 100), (15 * 999, 100)]),
                        progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (len(timeline.rows), len(timeline.rows)) == (1000, 1000)
    assert 90 <= len(calls) <= 102
    assert [done for done, _ in calls] == sorted({done for done, _ in calls})


@given(
    demand=st.lists(st.one_of(st.none(), st.floats(0, 5000)), min_size=2, max_size=30),
    start=st.integers(1, 10),
    startup=st.sampled_from([0.0, 20.0, 45.0]),
)
@settings(max_examples=60, deadline=None)
def test_invariants_on_random_traces(
    demand: list[float | None], start: int, startup: float
) -> None:
    """Whatever the demand: counts stay in bounds, never grow faster than max(2x, 4) without
    behavior, and a step with a gap in the data never scales down."""
    points = [(60.0 * i, value) for i, value in enumerate(demand)]
    timeline = run(spec(rps(100), low=1, high=25), trace(points), replicas=start,
                   startup=startup)
    for row in timeline.rows:
        assert 1 <= row.desired <= 25
        assert row.desired <= max(2 * row.current, 4)
        if row.metrics[0].load.total is None:
            assert row.desired >= row.current


EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples" / "simulate"
THREE_DAYS = 3 * 86_400.0
# sha256 of repr(timeline.rows) of the first three days of week.csv (the last one with the
# forecast in use), reactive and predictive, taken before the simulator was made faster:
# speed-ups must not change a single row.
WEEK_DIGESTS = {
    "reactive": "d59aa9f43b7ed2f9e3fc9a90009b365293cfab4221dc07692ddf715dd5c21610",
    "predictive": "8a203859c91e25f3759f50a2e35875fa40b6379a144e82d735e2e75ba715ca14",
}


def week_scenario(*, predictive: bool) -> Scenario:
    config = load_config(EXAMPLES / "web-predictive.toml", check_files=False)
    target = config.targets[0]
    model = build_settings(load_workload_file(EXAMPLES / "workload.toml"),
                           source="workload.toml").model
    return Scenario(label="predictive" if predictive else "reactive", spec=target.spec,
                    model=model, settings=config.daemon.algorithm,
                    sync_period=config.daemon.sync_period,
                    windows=tuple(q.window for q in target.metric_queries),
                    predictions=target.predictions if predictive else ())


@pytest.mark.timeout(300)
@pytest.mark.parametrize("predictive", [False, True], ids=["reactive", "predictive"])
def test_the_week_backtest_is_unchanged_row_for_row(predictive: bool) -> None:
    """Three days of the shipped week, reactive and predictive, give exactly the rows they
    gave before the simulator was optimised (a speed-up that changes a result is a bug)."""
    week = load_trace(EXAMPLES / "week.csv")
    cut = sum(1 for t in week.times if t <= THREE_DAYS)
    days = make_trace(week.times[:cut], {k: v[:cut] for k, v in week.columns.items()},
                      source="week.csv")
    scenario = week_scenario(predictive=predictive)
    timeline = simulate(scenario, days, interpolation="linear")
    digest = hashlib.sha256(repr(timeline.rows).encode()).hexdigest()
    assert digest == WEEK_DIGESTS[scenario.label]


def test_no_full_collection_walks_the_growing_timeline() -> None:
    """During a run the oldest generation's threshold is out of reach (a full collection
    would walk the whole timeline so far, again and again) and young collections are
    rarer; after it, the thresholds are restored."""
    before = gc.get_threshold()
    during: list[tuple[int, int, int]] = []
    timeline = simulate(Scenario(label="t", spec=spec(), model=WorkloadModel()),
                        trace([(0, 100), (15 * 999, 100)]),
                        progress=lambda done, total: during.append(gc.get_threshold()))
    assert len(timeline.rows) == 1000
    assert set(during) == {(max(before[0], YOUNG), before[1], NEVER)}
    assert gc.get_threshold() == before
