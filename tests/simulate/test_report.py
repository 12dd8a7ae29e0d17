"""The summary's numbers on tiny runs computed by hand, and the timeline files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from autoscaler.algorithm import Behavior, ScalingRules
from autoscaler.simulate.report import (
    format_elapsed,
    render_table,
    summarize,
    write_summary,
    write_timeline_csv,
    write_timeline_json,
)
from tests.simulate.builders import external, rps, run, spec, trace

# Steps at 0, 15, 30, 45, 60. Demand 400 from t=30: one pod at 4x target, then 4 pods.
# desired: 1, 1, 4, 4, 4; ready (observed before each decision): 1, 1, 1, 4, 4.
TINY = trace([(0, 100), (30, 400), (60, 400)])


def test_tiny_run_summary_by_hand() -> None:
    """Replica-hours count spec.replicas per 15 s step; one step was 300% over target."""
    summary = summarize(run(spec(rps(100)), TINY))
    assert summary.steps == 5
    assert summary.hours == pytest.approx(75 / 3600)
    assert summary.replica_hours == pytest.approx((1 + 1 + 4 + 4 + 4) * 15 / 3600)
    assert summary.ready_pod_hours == pytest.approx((1 + 1 + 1 + 4 + 4) * 15 / 3600)
    assert summary.mean_replicas == pytest.approx(14 / 5)
    assert (summary.min_replicas, summary.max_replicas) == (1, 4)
    assert (summary.scale_events, summary.scale_ups, summary.scale_downs) == (1, 1, 0)
    assert summary.over_target_seconds == 15
    assert summary.over_target_percent_of_time == pytest.approx(20.0)
    assert summary.beyond_tolerance_seconds == 15
    assert summary.max_over_target_percent == pytest.approx(300.0)
    assert summary.mean_over_target_percent == pytest.approx(300.0)
    assert summary.no_ready_pod_seconds == 0


@pytest.mark.parametrize(
    ("demand", "over", "beyond"), [(105, 15 * 5, 0), (111, 15 * 5, 15 * 5)],
    ids=["within-tolerance", "beyond-tolerance"],
)
def test_over_target_and_beyond_tolerance(demand: float, over: float, beyond: float) -> None:
    """5% over target is over but within the 10% tolerance; 11% over is beyond it (one pod
    at most, so the load stays where it is for all five steps)."""
    timeline = run(spec(rps(100), high=1), trace([(0, demand), (60, demand)]))
    summary = summarize(timeline)
    assert (summary.over_target_seconds, summary.beyond_tolerance_seconds) == (over, beyond)


def test_direction_changes_count_flips() -> None:
    """Up, down, up: three scale events and two changes of direction."""
    behavior = Behavior(scale_down=ScalingRules(stabilization_window_seconds=0))
    timeline = run(spec(rps(100), behavior=behavior),
                   trace([(0, 100), (15, 400), (30, 100), (45, 400), (60, 400)]))
    assert [row.desired for row in timeline.rows] == [1, 4, 1, 4, 4]
    summary = summarize(timeline)
    assert (summary.scale_events, summary.direction_changes) == (3, 2)


def test_load_without_ready_pods_counts_as_over_target() -> None:
    """From zero replicas the new pods take 60 s to start; the load waits that long."""
    timeline = run(spec(external(10), low=0, high=4), trace([(0, 50), (90, 50)]),
                   replicas=0, startup=60)
    assert [row.ready for row in timeline.rows] == [0, 0, 0, 0, 4, 4, 4]
    summary = summarize(timeline)
    assert summary.no_ready_pod_seconds == 60
    assert summary.over_target_seconds == 7 * 15  # 50 against a value target of 10 throughout


def test_timeline_files_have_one_row_per_step(tmp_path: Path) -> None:
    """CSV and JSON carry every step with per-metric columns named after the metric."""
    timeline = run(spec(rps(100)), TINY)
    write_timeline_csv(timeline, tmp_path / "t.csv")
    write_timeline_json(timeline, tmp_path / "t.json")
    rows = list(csv.DictReader((tmp_path / "t.csv").open()))
    assert [int(r["desired"]) for r in rows] == [1, 1, 4, 4, 4]
    assert rows[2]["rps_ratio"] == "4.0"
    assert rows[2]["limited"] == ""
    document = json.loads((tmp_path / "t.json").read_text())
    assert document["metrics"] == [
        {"column": "rps", "type": "Pods", "name": "rps", "target": "AverageValue"}
    ]
    assert [r["ready"] for r in document["rows"]] == [1, 1, 1, 4, 4]
    assert document["sync_period"] == 15


def test_summary_file_and_table(tmp_path: Path) -> None:
    """The summary is saved as JSON and printed as a table with one column per run."""
    first = summarize(run(spec(rps(100)), TINY))
    second = summarize(run(spec(rps(50)), TINY))
    write_summary([first, second], tmp_path / "s.json")
    runs = json.loads((tmp_path / "s.json").read_text())["runs"]
    assert [r["max_replicas"] for r in runs] == [4, 8]
    table = render_table([first, second]).splitlines()
    assert table[0].split() == ["t", "t"]
    assert any(line.startswith("max replicas") and line.split()[-2:] == ["4", "8"]
               for line in table)


@pytest.mark.parametrize(
    ("seconds", "text"), [(15, "15s"), (75, "1m15s"), (3600, "1h00m00s"), (5415, "1h30m15s")],
    ids=["seconds", "minutes", "hour", "mixed"],
)
def test_durations_read_naturally(seconds: float, text: str) -> None:
    """Durations in the table are h/m/s, not raw seconds."""
    assert format_elapsed(seconds) == text
