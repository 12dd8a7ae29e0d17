"""Split a pass's shared answers back into each target's ``MetricValues``.

Per-pod answers arrive indexed by their ``pod`` label (``PodAnswer``), so a target's share
costs time in proportion to its own pods, not to the size of the answer: thousands of targets
reading one cluster-wide cAdvisor query stay cheap.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from autoscaler.adapters.prometheus.batch import Answer, Answers, QueryKey, Shape, Slot
from autoscaler.adapters.prometheus.inputs import TargetRequest
from autoscaler.adapters.prometheus.parse import PodAnswer, all_values, pod_samples, single_value
from autoscaler.algorithm import (
    ExternalMetricValues,
    MetricUnavailable,
    MetricValues,
    Milli,
    ObjectMetricValue,
    PodMetricValues,
)
from autoscaler.errors import (
    AccessDeniedError,
    AutoscalerError,
    BadDataError,
    BadQueryError,
    TransientError,
)

_KINDS: Mapping[type[AutoscalerError], str] = {
    TransientError: "Prometheus unavailable",
    BadQueryError: "query rejected",
    AccessDeniedError: "access denied",
    BadDataError: "bad data",
}


def describe(error: AutoscalerError) -> str:
    """A reason for status and events: what kind of failure, then the detail."""
    kind = next((text for base, text in _KINDS.items() if isinstance(error, base)),
                "query failed")
    return f"{kind}: {error}"


class Splitter:
    """Reads each (target, slot) out of one pass's answers."""

    def __init__(self, answers: Answers) -> None:
        self.answers = answers
        self._indexes: dict[QueryKey, PodAnswer] = {}

    def extract(self, slot: Slot, target: TargetRequest, pods: AbstractSet[str]) -> tuple[
            MetricValues, list[str]]:
        """This target's value for ``slot`` (``pods``: its pod names), plus
        non-fatal notes (pods left out and why)."""
        answer = self.answers.get(slot.query)
        if answer is None:
            return MetricUnavailable(reason="the query was not run before the deadline",
                                     query=slot.shown), []
        if isinstance(answer, AutoscalerError):  # kept as a value: never raised again
            return MetricUnavailable(reason=describe(answer), query=slot.shown), []
        try:
            return self._read(slot, target, pods, answer)
        except AutoscalerError as error:
            return MetricUnavailable(reason=describe(error), query=slot.shown), []

    def _read(self, slot: Slot, target: TargetRequest, pods: AbstractSet[str],
              answer: Answer) -> tuple[MetricValues, list[str]]:
        if slot.shape is Shape.OBJECT or slot.shape is Shape.EXTERNAL:
            if isinstance(answer, PodAnswer):  # the plan indexes only per-pod queries
                raise BadDataError("internal: a single-value query was indexed per pod")
            promql = slot.shown
            if not answer and slot.empty_is_zero:
                # whenEmpty = "zero": only an answer with no series; an error, NaN or a
                # stale sample is still invalid.
                return (ObjectMetricValue(value=Milli(0), query=promql)
                        if slot.shape is Shape.OBJECT
                        else ExternalMetricValues(values=(Milli(0),), query=promql)), []
            if slot.shape is Shape.OBJECT:
                return ObjectMetricValue(value=single_value(answer), query=promql), []
            return ExternalMetricValues(values=all_values(answer), query=promql), []
        found, notes = pod_samples(self.indexed(slot.query, answer), namespace=target.namespace,
                                   pods=pods, window=slot.window, container=slot.container)
        return PodMetricValues(samples=found, query=slot.shown), notes

    def indexed(self, key: QueryKey, answer: Answer) -> PodAnswer:
        """``answer`` per pod: as fetched, or indexed once here when it was also read whole."""
        if isinstance(answer, PodAnswer):
            return answer
        index = self._indexes.get(key)
        if index is None:
            index = self._indexes[key] = PodAnswer.of(answer)
        return index
