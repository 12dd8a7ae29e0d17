"""Split a pass's shared answers back into each target's ``MetricValues``.

Per-pod answers are indexed once by their ``pod`` label, so a target's share costs time in
proportion to its own pods, not to the size of the answer: thousands of targets reading one
cluster-wide cAdvisor query stay cheap.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from autoscaler.adapters.prometheus.batch import Answers, QueryKey, Shape, Slot
from autoscaler.adapters.prometheus.model import TargetRequest
from autoscaler.adapters.prometheus.parse import Sample, all_values, pod_samples, single_value
from autoscaler.algorithm import (
    ExternalMetricValues,
    MetricUnavailable,
    MetricValues,
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
    return f"{_KINDS.get(type(error), 'query failed')}: {error}"


class PodIndex:
    """One per-pod answer, grouped by its ``pod`` label."""

    def __init__(self, samples: Sequence[Sample]) -> None:
        self._by_pod: dict[str, list[Sample]] = defaultdict(list)
        self._unlabelled = 0
        for sample in samples:
            pod = sample.pod
            if pod is None:
                self._unlabelled += 1
            else:
                self._by_pod[pod].append(sample)

    def select(self, pods: frozenset[str]) -> list[Sample]:
        """The series of ``pods``; a series without a pod label spoils every target's share."""
        if self._unlabelled:
            raise BadDataError(f"{self._unlabelled} series have no 'pod' label; "
                               "aggregate with sum by (pod)")
        by_pod = self._by_pod
        return [s for pod in pods if pod in by_pod for s in by_pod[pod]]


class Splitter:
    """Reads each (target, slot) out of one pass's answers, indexing per-pod answers once."""

    def __init__(self, answers: Answers) -> None:
        self.answers = answers
        self._indexes: dict[QueryKey, PodIndex] = {}

    def extract(self, slot: Slot, target: TargetRequest) -> tuple[MetricValues, list[str]]:
        """This target's value for ``slot``, plus non-fatal notes (pods left out and why)."""
        answer = self.answers.get(slot.query)
        if answer is None:
            return MetricUnavailable(reason="the query was not run before the deadline"), []
        try:
            if isinstance(answer, AutoscalerError):
                raise answer
            return self._read(slot, target, answer)
        except AutoscalerError as error:
            return MetricUnavailable(reason=describe(error)), []

    def _read(self, slot: Slot, target: TargetRequest, samples: Sequence[Sample]) -> tuple[
            MetricValues, list[str]]:
        if slot.shape is Shape.OBJECT:
            return ObjectMetricValue(value=single_value(samples)), []
        if slot.shape is Shape.EXTERNAL:
            return ExternalMetricValues(values=all_values(samples)), []
        pods = frozenset(pod.name for pod in target.pods)
        index = self._indexes.get(slot.query)
        if index is None:
            index = self._indexes[slot.query] = PodIndex(samples)
        mine = index.select(pods)
        if slot.shape is Shape.CONTAINER and slot.container is not None:
            _check_container_present(mine, target.namespace, slot.container)
        found, notes = pod_samples(mine, namespace=target.namespace, pods=pods,
                                   window=slot.window, container=slot.container)
        return PodMetricValues(samples=found), notes


def _check_container_present(samples: Sequence[Sample], namespace: str, container: str) -> None:
    # Upstream: a pod with metrics but none for the named container fails the whole metric
    # ("container %s not present in metrics for pod %s/%s").
    seen: dict[str, bool] = {}
    for sample in samples:
        pod = sample.pod or ""
        if sample.namespace == namespace:
            seen[pod] = seen.get(pod, False) or sample.container == container
    missing = sorted(pod for pod, has in seen.items() if not has)
    if missing:
        raise BadDataError(
            f"container {container} not present in metrics for pod {namespace}/{missing[0]}")
