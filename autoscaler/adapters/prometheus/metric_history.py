"""A metric's past totals from a range query: what the forecaster is backfilled with.

The predictor records each pass the metric's *total* (the pods' samples summed, an Object's
value, an External query's series summed), so history is asked for as one series: ``sum``
of the metric's own query with ``${pod_selector}``/``${pod_regex}`` widened from the pods
of now to every pod the workload ever had, by the names its controller gives them
(``queries.workload_pod_regex``), or the metric's ``historyQuery`` as written. The answer
goes through the same bounded transport as the instant queries (``maxResponseBytes``,
``maxSeries``, ``timeout``, redirects); NaN and infinite points are left out, and an answer
of more than one series is refused (summing what the user did not mean to sum would be a
guess).
"""

from __future__ import annotations

import math
from typing import Any

from autoscaler.adapters.prometheus import queries
from autoscaler.algorithm import MetricSourceType, MetricSpec
from autoscaler.errors import BadDataError, BadQueryError
from autoscaler.record import record

Point = tuple[float, float]


@record
class HistoryRequest:
    """One metric of one target, and the range to read it over."""

    server: str
    namespace: str
    name: str
    kind: str
    metric: MetricSpec
    query: str | None
    """The metric's query template (``None``: a built-in resource query)."""
    history_query: str | None
    window: float


def history_promql(request: HistoryRequest) -> str:
    """The PromQL of ``request``'s range query; ``BadQueryError`` if it cannot be built."""
    spec = request.metric
    try:
        return queries.history_query(
            template=request.query, given=request.history_query,
            resource=spec.name if spec.type in _RESOURCE else None,
            per_container=spec.type is MetricSourceType.CONTAINER_RESOURCE,
            namespace=request.namespace, name=request.name, kind=request.kind,
            container=spec.container or "", window=request.window)
    except (KeyError, ValueError) as error:
        raise BadQueryError(f"cannot build the history query: {error!r}") from None


_RESOURCE = (MetricSourceType.RESOURCE, MetricSourceType.CONTAINER_RESOURCE)


def parse_matrix(result: Any) -> list[Point]:
    """The points of a range answer of at most one series, finite values only."""
    if not isinstance(result, list):
        raise BadDataError("the history query's answer is not a range vector")
    if len(result) > 1:
        raise BadDataError(f"the history query returned {len(result)} series; it must return "
                           "one, the metric's total (wrap it in sum(...))")
    if not result:
        return []
    values = result[0].get("values") if isinstance(result[0], dict) else None
    if not isinstance(values, list):
        raise BadDataError("the history query's answer is not a range vector")
    points: list[Point] = []
    for point in values:
        try:
            at, value = float(point[0]), float(point[1])
        except (TypeError, ValueError, IndexError, KeyError):
            raise BadDataError(f"the history query's answer has a malformed point: "
                               f"{str(point)[:80]}") from None
        if math.isfinite(at) and math.isfinite(value):
            points.append((at, value))
    return points
