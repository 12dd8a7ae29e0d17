"""From demand to what the daemon's queries would return, one metric at a time.

Every metric gets a *total* per step, in the metric's own base units: the trace column named
after the metric if there is one, otherwise the ``demand`` column converted:

- Resource and ContainerResource: a Ready pod at 100 % of its request serves ``capacity``
  demand units, so total usage = demand / capacity x request (e.g. cores). Each Ready pod
  uses total / ready, capped at ``saturation`` percent of its request when that is set;
  utilization = usage / request x 100.
- Pods: the per-pod value is total / ready (requests/s per pod for an ``rps`` metric).
- Object and External: the value is the total itself.

Only Ready pods get traffic: Running pods that are not Ready report 0, Pending and deleting
pods report nothing. A pod's sample averages what it reported over the metric window (the
workload's ``metricWindow``, else the metric's ``window`` in the daemon's config), counting
only the steps of the pod's life, and is stamped with the step's time and that window, so
the core's readiness rules for cpu samples apply as they do in the daemon.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

from autoscaler.algorithm import (
    ExternalMetricValues,
    MetricSourceType,
    MetricSpec,
    MetricTargetType,
    MetricUnavailable,
    MetricValues,
    Milli,
    ObjectMetricValue,
    PodMetricValues,
    PodSample,
)
from autoscaler.record import seal_values
from autoscaler.simulate.rows import MetricLoad
from autoscaler.simulate.simulation_error import SimulationError
from autoscaler.simulate.workload import SimPod, WorkloadModel

DEFAULT_WINDOW = 60.0
"""The daemon's default query window (``MetricQuery.window``)."""
RESOURCE_SOURCES = frozenset({MetricSourceType.RESOURCE, MetricSourceType.CONTAINER_RESOURCE})
PER_POD_SOURCES = RESOURCE_SOURCES | {MetricSourceType.PODS}


NO_LOAD = MetricLoad(total=None, per_pod=None, ratio=None)


def _milli(value: float) -> Milli:
    return Milli(round(value * 1000))


class MetricFeed:
    """One metric of one simulated target: totals in, samples and true load out."""

    def __init__(
        self,
        spec: MetricSpec,
        model: WorkloadModel,
        *,
        own_column: bool,
        window: float = DEFAULT_WINDOW,
    ) -> None:
        self.spec = spec
        self._model = model
        self._window_seconds = model.metric_window or window
        self._own_column = own_column
        self._per_pod = spec.type in PER_POD_SOURCES
        self._request = self._resource_request() if spec.type in RESOURCE_SOURCES else None
        self._window: deque[tuple[float, float]] = deque()
        self._reporting: Sequence[SimPod] = ()
        self._names: tuple[str, ...] = ()
        self._last_ready = -math.inf
        """The latest ``ready_at`` of ``_reporting``'s pods: from the window's start on,
        every pod is Ready through the whole window and reports the same sample."""

    def _resource_request(self) -> float:
        request = self._model.requests.get(self.spec.name)
        if request is None or request <= 0:
            raise SimulationError(
                f"metric {self.spec.name}: the simulated pods need a {self.spec.name} request "
                f"(e.g. --request {self.spec.name}=500m)"
            )
        if not self._own_column and not self._model.capacity:
            raise SimulationError(
                f"metric {self.spec.name}: give the per-pod capacity (--capacity: demand units "
                f"one pod serves at 100% of its request) or a {self.spec.name!r} trace column"
            )
        return request / 1000

    @property
    def window(self) -> float:
        """Seconds each sample averages over."""
        return self._window_seconds

    def total(self, demand: float | None) -> float | None:
        """The metric's total from the ``demand`` column (its own column needs no conversion)."""
        if demand is None or self._own_column or self._request is None:
            return demand
        capacity = self._model.capacity
        assert capacity is not None  # checked in __init__
        return demand / capacity * self._request

    def observe(
        self, *, now: float, total: float | None, ready: int, pods: Sequence[SimPod]
    ) -> tuple[MetricValues, MetricLoad]:
        """What the daemon would fetch at ``now`` and the metric's true load; ``pods`` are
        the pods that report (Running, not deleting: ``Workload.reporting``)."""
        if total is None:
            reason = f"the trace has no value for {self.spec.name} at {now:g}s"
            return MetricUnavailable(reason=reason), NO_LOAD
        per_pod = total / ready if ready else (0.0 if total == 0 else None)
        load = MetricLoad(total=total, per_pod=per_pod, ratio=self._ratio(total, per_pod))
        if not self._per_pod:
            if self.spec.type is MetricSourceType.OBJECT:
                return ObjectMetricValue(value=_milli(total)), load
            return ExternalMetricValues(values=(_milli(total),)), load
        return PodMetricValues(samples=self._samples(now, self._used(per_pod), pods)), load

    def _used(self, per_pod: float | None) -> float:
        used = per_pod or 0.0
        if self._request is not None and self._model.saturation is not None:
            used = min(used, self._request * self._model.saturation / 100)
        return used

    def _ratio(self, total: float, per_pod: float | None) -> float | None:
        target = self.spec.target
        if target.type is MetricTargetType.VALUE:
            return total * 1000 / target.value if target.value else None
        if per_pod is None:
            return None
        if target.type is MetricTargetType.UTILIZATION:
            if self._request is None or not target.average_utilization:
                return None
            return per_pod / self._request * 100 / target.average_utilization
        return per_pod * 1000 / target.average_value if target.average_value else None

    def _samples(self, now: float, used: float, pods: Sequence[SimPod]) -> dict[str, PodSample]:
        window = self._window
        window.append((now, used))
        while window[0][0] <= now - self._window_seconds:
            window.popleft()
        first = window[0][0]
        steady = PodSample(
            value=_milli(sum([v for _, v in window]) / len(window)),
            timestamp=now, window=self._window_seconds,
        )
        if pods is not self._reporting:
            # The workload hands the same tuple until a pod changes; a list may change
            # under us, so it is looked at every time.
            self._reporting = pods if isinstance(pods, tuple) else ()
            self._names = tuple(pod.name for pod in pods)
            self._last_ready = max((pod.ready_at for pod in pods), default=-math.inf)
        if self._last_ready <= first:
            return dict.fromkeys(self._names, steady)  # every pod Ready through the window
        samples: dict[str, PodSample] = {}
        for pod in pods:
            if pod.ready_at <= first:
                samples[pod.name] = steady  # Ready through the whole window
                continue
            # Only the steps of the pod's life count, and it took traffic only once Ready.
            lived = [(t, v) for t, v in window if t >= pod.running_at]
            mean = sum(v for t, v in lived if t >= pod.ready_at) / len(lived)
            samples[pod.name] = PodSample(
                value=_milli(mean), timestamp=now, window=self._window_seconds
            )
        return samples


seal_values(globals())
