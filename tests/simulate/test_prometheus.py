"""Demand from a real Prometheus: a backfilled series read back through range queries."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.simulate.prometheus import query_trace
from autoscaler.simulate.simulation_error import SimulationError
from tests.sim.prometheus import PrometheusProcess, free_port
from tests.simulate.promdata import END, POINTS, START, STEP, demand_at


def fetch(prom: PrometheusProcess, query: str, **kwargs: object) -> list[float | None]:
    trace = query_trace(url=prom.url, queries={"demand": query}, start=START, end=END,
                        step=STEP, **kwargs)  # type: ignore[arg-type]
    return list(trace.columns["demand"])


def test_range_query_reads_the_backfilled_series(prometheus: PrometheusProcess) -> None:
    """Every step's value comes back, on a grid from 0 with the absolute start kept."""
    trace = query_trace(url=prometheus.url, queries={"demand": 'web_demand{app="web"}'},
                        start=START, end=END, step=STEP)
    assert trace.times[:3] == (0.0, 15.0, 30.0)
    assert trace.origin == START
    assert list(trace.columns["demand"]) == [demand_at(k) for k in range(POINTS)]


def test_long_ranges_are_fetched_in_chunks(prometheus: PrometheusProcess) -> None:
    """Chunked requests (here 100 points each) give the same series as one request."""
    query = 'web_demand{app="web"}'
    assert fetch(prometheus, query, max_points=100) == fetch(prometheus, query)


def test_steps_without_data_are_gaps(prometheus: PrometheusProcess) -> None:
    """A query with no value at some steps leaves gaps (None), not zeros."""
    values = fetch(prometheus, 'web_demand{app="web"} > 300')
    assert values[:201] == [None] * 201
    assert values[201:] == [demand_at(k) for k in range(201, POINTS)]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("web_demand", "returned 2 series; .* sum"),
        ("web_demand{app=", "rejected query"),
        ('web_demand{app="nope"}', "returned no data"),
    ],
    ids=["two-series", "bad-promql", "no-data"],
)
def test_unusable_queries_are_explained(
    prometheus: PrometheusProcess, query: str, message: str
) -> None:
    """Several series, bad PromQL or nothing at all: an error that says which and why."""
    with pytest.raises(SimulationError, match=message):
        fetch(prometheus, query)


def test_unreachable_prometheus_is_a_clear_error(tmp_path: Path) -> None:
    """Nothing listening: the error names the URL instead of a traceback."""
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(SimulationError, match=f"cannot reach Prometheus at {url}"):
        query_trace(url=url, queries={"demand": "up"}, start=START, end=END, step=STEP,
                    timeout=2)
