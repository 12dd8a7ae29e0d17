"""Workload settings: the [simulate] file, durations and instants, and their errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from autoscaler.simulate.options import (
    build_settings,
    load_workload_file,
    parse_duration,
    parse_instant,
)
from autoscaler.simulate.simulation_error import SimulationError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), (1.5, 1.5), ("30s", 30.0), ("5m", 300.0), ("1h30m", 5400.0),
     ("7d", 604800.0), ("250ms", 0.25)],
    ids=["number-text", "float", "seconds", "minutes", "compound", "days", "millis"],
)
def test_durations(text: str | float, seconds: float) -> None:
    """Plain numbers are seconds; Prometheus-style units are accepted."""
    assert parse_duration(text, what="x") == seconds


@pytest.mark.parametrize("text", ["soon", "-5s", "5 minutes", "inf"], ids=str)
def test_bad_durations(text: str) -> None:
    """Anything else is an error naming the setting."""
    with pytest.raises(SimulationError, match="startup"):
        parse_duration(text, what="startup")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("now", 1000.0), ("now-10m", 400.0), ("1700000000", 1700000000.0),
     ("1970-01-01T00:16:40Z", 1000.0)],
    ids=["now", "relative", "unix", "iso"],
)
def test_instants(text: str, expected: float) -> None:
    """Range bounds: now, now minus a duration, Unix seconds or ISO 8601."""
    assert parse_instant(text, what="--start", now=1000.0) == expected


def test_workload_file_round_trip(tmp_path: Path) -> None:
    """Every key of the [simulate] table reaches the model."""
    path = tmp_path / "w.toml"
    path.write_text(
        '[simulate]\ncapacity = 80\nstartup = "20s"\nreadiness = "10s"\n'
        'termination = "5s"\nreplicas = 3\nmetricWindow = "30s"\nsaturation = 150\n'
        'requests = { cpu = "250m" }\ninterpolation = "linear"\n'
    )
    settings = build_settings(load_workload_file(path), source=str(path))
    model = settings.model
    assert (model.capacity, model.startup, model.readiness, model.termination) == (80, 20, 10, 5)
    assert (model.replicas, model.metric_window, model.saturation) == (3, 30, 150)
    assert model.requests == {"cpu": 250}
    assert settings.interpolation == "linear"


def test_requests_merge_over_the_default_cpu() -> None:
    """Naming only a memory request keeps the default 1 cpu."""
    settings = build_settings({"requests": {"memory": "1Gi"}}, source="flags")
    assert settings.model.requests == {"cpu": 1000, "memory": 1024**3 * 1000}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[simulate]\ncapasity = 1\n", "unknown key.*capasity.*known keys: capacity"),
        ("[workload]\ncapacity = 1\n", r"expected one \[simulate\] table"),
        ("[simulate\n", "invalid TOML"),
    ],
    ids=["misspelt-key", "wrong-table", "syntax"],
)
def test_bad_workload_files(tmp_path: Path, text: str, message: str) -> None:
    """The file's problems are reported with its path."""
    path = tmp_path / "w.toml"
    path.write_text(text)
    with pytest.raises(SimulationError, match=message):
        load_workload_file(path)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"capacity": 0}, "capacity: expected a positive number"),
        ({"capacity": "lots"}, "capacity: expected a positive number"),
        ({"replicas": -1}, "replicas must be a whole number"),
        ({"replicas": 2.5}, "replicas must be a whole number"),
        ({"requests": {"cpu": "half"}}, "requests.cpu"),
        ({"requests": {"cpu": "0"}}, "requests.cpu must be positive"),
        ({"requests": "500m"}, "requests must be a table"),
        ({"metricWindow": "0s"}, "metricWindow must be positive"),
        ({"interpolation": "cubic"}, "interpolation must be 'step' or 'linear'"),
        ({"saturation": -5}, "saturation: expected a positive number"),
    ],
    ids=["zero-capacity", "text-capacity", "negative-replicas", "fractional-replicas",
         "bad-request", "zero-request", "request-not-table", "zero-window", "interpolation",
         "negative-saturation"],
)
def test_bad_values(values: dict[str, Any], message: str) -> None:
    """Each bad value gets a message naming the key."""
    with pytest.raises(SimulationError, match=message):
        build_settings(values, source="w.toml")
