"""Traces: CSV and JSON parsing, gaps, errors that name the place, and values on a grid."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.simulate.simulation_error import SimulationError
from autoscaler.simulate.trace import load_trace, make_trace


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_csv_with_seconds_starts_at_zero(tmp_path: Path) -> None:
    """Times are shifted so the trace starts at 0; every column is kept."""
    path = write(tmp_path, "t.csv", "time,demand,rps\n100,1,2\n160,3,4\n")
    trace = load_trace(path)
    assert trace.times == (0.0, 60.0)
    assert trace.columns == {"demand": (1.0, 3.0), "rps": (2.0, 4.0)}
    assert trace.origin is None


def test_csv_with_iso_times_keeps_the_origin(tmp_path: Path) -> None:
    """ISO 8601 times (naive means UTC) become offsets; the absolute start is remembered."""
    path = write(tmp_path, "t.csv", "time,demand\n2026-01-01T00:00:00,1\n2026-01-01T00:01:00Z,2\n")
    trace = load_trace(path)
    assert trace.times == (0.0, 60.0)
    assert trace.origin == 1767225600.0


@pytest.mark.parametrize("cell", ["", "NaN", "nan"], ids=["empty", "NaN", "nan"])
def test_empty_and_nan_cells_are_gaps(tmp_path: Path, cell: str) -> None:
    """A missing value is a gap (None), not zero."""
    trace = load_trace(write(tmp_path, "t.csv", f"time,demand\n0,1\n15,{cell}\n"))
    assert trace.columns["demand"] == (1.0, None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty trace"),
        ("when,demand\n0,1\n", "first column must be 'time'"),
        ("time,demand\n0,1\n0,2\n", "must increase strictly"),
        ("time,demand\n0,1\n15,-3\n", "negative value -3"),
        ("time,demand\n0,1\n15,lots\n", "t.csv:3 column 'demand': expected a number"),
        ("time,demand\n0,1\nyesterday,2\n", "t.csv:3: time 'yesterday'"),
        ("time,demand\n0,1,2\n", "t.csv:2: expected 2 cells"),
        ("time,demand\n0,inf\n", "infinite"),
        ("time\n0\n", "no value column"),
        ("time,demand\n", "no points"),
    ],
    ids=["empty", "no-time", "not-increasing", "negative", "not-a-number", "bad-time",
         "ragged", "infinite", "no-columns", "no-rows"],
)
def test_bad_csv_is_rejected_with_its_place(tmp_path: Path, text: str, message: str) -> None:
    """Each problem is reported with the file (and line) it is on."""
    with pytest.raises(SimulationError, match=message):
        load_trace(write(tmp_path, "t.csv", text))


def test_json_points(tmp_path: Path) -> None:
    """JSON is a list of points (or {"points": [...]}), null is a gap."""
    text = '{"points": [{"time": 0, "demand": 5}, {"time": 30, "demand": null}]}'
    trace = load_trace(write(tmp_path, "t.json", text))
    assert trace.times == (0.0, 30.0)
    assert trace.columns == {"demand": (5.0, None)}


@pytest.mark.parametrize(
    ("text", "message"),
    [("{", "invalid JSON"), ('{"a": 1}', "expected a list of points"),
     ('[{"demand": 1}]', "has no 'time'")],
    ids=["syntax", "shape", "no-time"],
)
def test_bad_json_is_rejected(tmp_path: Path, text: str, message: str) -> None:
    """A JSON trace of the wrong shape gets a specific error."""
    with pytest.raises(SimulationError, match=message):
        load_trace(write(tmp_path, "t.json", text))


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    """A trace that cannot be read names the path."""
    with pytest.raises(SimulationError, match=r"cannot read trace .*nope\.csv"):
        load_trace(tmp_path / "nope.csv")


@pytest.mark.parametrize(
    ("interpolation", "expected"),
    [("step", [10.0, 10.0, 20.0, 20.0, None]), ("linear", [10.0, 15.0, 20.0, None, None])],
    ids=["step", "linear"],
)
def test_values_on_a_grid(interpolation: str, expected: list[float | None]) -> None:
    """Step holds each value until the next point; linear interpolates, gaps stay gaps."""
    trace = make_trace([0, 60, 120], {"demand": [10, 20, None]}, source="x")
    grid = [0, 30, 60, 90, 120]
    assert trace.on_grid("demand", grid, interpolation) == expected  # type: ignore[arg-type]
