"""A demand trace from a Prometheus range query (``--prometheus URL --query Q``).

Each query must return at most one series (wrap it in ``sum(...)``). Prometheus answers at
most 11,000 points per series, so long ranges are fetched in chunks. A step where the
query had no value, or a NaN, infinite or negative one, is a gap in the trace.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from autoscaler.simulate.simulation_error import FlagError, SimulationError
from autoscaler.simulate.trace import Trace, Value, make_trace

MAX_POINTS = 10_000
"""Points per request, under Prometheus' limit of 11,000 per series."""


def query_trace(
    *,
    url: str,
    queries: Mapping[str, str],
    start: float,
    end: float,
    step: float,
    timeout: float = 30.0,
    max_points: int = MAX_POINTS,
) -> Trace:
    """One trace column per query (``demand`` or a metric's name), on ``start + k * step``."""
    start, step = float(math.floor(start)), float(step)
    if step < 1 or step != int(step):
        raise FlagError(f"the query step must be a whole number of seconds, got {step}")
    if end <= start:
        raise FlagError(f"the range is empty: --end ({end}) is not after --start ({start})")
    count = int((end - start) // step) + 1
    grid = [start + k * step for k in range(count)]
    client = PrometheusConnect(url=url, retry=Retry(total=1, backoff_factor=0.2))
    columns = {
        name: _fetch(client, url=url, query=query, grid=grid, step=step, timeout=timeout,
                     chunk=max_points)
        for name, query in queries.items()
    }
    return make_trace(grid, columns, source=f"Prometheus {url}")


def _fetch(
    client: PrometheusConnect,
    *,
    url: str,
    query: str,
    grid: list[float],
    step: float,
    timeout: float,
    chunk: int,
) -> list[Value]:
    found: dict[float, Value] = {}
    for first in range(0, len(grid), chunk):
        last = min(first + chunk, len(grid)) - 1
        result = _range(client, url=url, query=query, start=grid[first], end=grid[last],
                        step=step, timeout=timeout)
        if len(result) > 1:
            raise SimulationError(
                f"query {query!r} returned {len(result)} series; the demand must be one "
                "series: aggregate it, e.g. sum(...)"
            )
        for stamp, text in result[0]["values"] if result else []:
            found[float(stamp)] = _number(text)
    if not found:
        raise SimulationError(f"query {query!r} returned no data between the start and the end")
    return [found.get(t) for t in grid]


def _range(
    client: PrometheusConnect,
    *,
    url: str,
    query: str,
    start: float,
    end: float,
    step: float,
    timeout: float,
) -> list[dict[str, Any]]:
    try:
        result = client.custom_query_range(
            query,
            start_time=datetime.fromtimestamp(start, tz=UTC),
            end_time=datetime.fromtimestamp(end, tz=UTC),
            step=f"{int(step)}s",
            timeout=timeout,
        )
    except PrometheusApiClientException as error:
        raise SimulationError(f"Prometheus at {url} rejected query {query!r}: {error}") from None
    except requests.RequestException as error:
        raise SimulationError(f"cannot reach Prometheus at {url}: {error}") from None
    if not isinstance(result, list):
        raise SimulationError(f"query {query!r} did not return a range vector (got {result!r})")
    return result


def _number(text: object) -> Value:
    try:
        value = float(str(text))
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None
