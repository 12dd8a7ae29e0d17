"""Which pods count, and what they request: upstream's ``groupPods`` and ``calculateRequests``.

Every pod lands in exactly one class, tested in upstream's order: ignored (being deleted or
Failed), unready (Pending, or for the ``cpu`` resource not yet trustworthy), missing (no
sample), ready.

``PodView`` is pods that remember both: a predictive pass decides twice on the same pods,
and a caller that sees the same pods pass after pass (the simulator) can keep one view for
all of them. The replica calculator uses a view's memory when it is handed one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from mypy_extensions import mypyc_attr

from autoscaler.algorithm.model import (
    DEFAULT_REQUESTS_BASIS,
    AlgorithmSettings,
    ConditionStatus,
    Container,
    Pod,
    PodPhase,
    PodSample,
    RequestsBasis,
    Seconds,
)
from autoscaler.algorithm.stage_values import PodGroups

CPU = "cpu"


class MetricError(Exception):
    """A metric cannot be computed this pass; the message is upstream's wording where it has one."""


def group_pods(
    pods: Sequence[Pod],
    samples: Mapping[str, PodSample],
    *,
    resource: str | None,
    now: Seconds,
    settings: AlgorithmSettings,
) -> PodGroups:
    """Classify pods as upstream's ``groupPods`` does."""
    ready_count = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    cpu = resource == CPU
    failed, pending = PodPhase.FAILED, PodPhase.PENDING  # (locals: this runs per pod per metric)
    for pod in pods:
        phase = pod.phase
        if pod.deleting or phase is failed:
            ignored.add(pod.name)
        elif phase is pending:
            # Pending pods are counted as unready whatever their samples say.
            unready.add(pod.name)
        elif (sample := samples.get(pod.name)) is None:
            missing.add(pod.name)
        elif cpu and _cpu_sample_untrusted(pod, sample, now, settings):
            unready.add(pod.name)
        else:
            ready_count += 1
    return PodGroups(
        ready_count=ready_count,
        unready=_frozen(unready),
        missing=_frozen(missing),
        ignored=_frozen(ignored),
    )


_NONE: frozenset[str] = frozenset()


def _frozen(names: set[str]) -> frozenset[str]:
    """One shared empty set for the usual case: a decision keeps its groups for /status, and
    an empty frozenset of its own costs 216 bytes (three per metric per target)."""
    return frozenset(names) if names else _NONE


def _cpu_sample_untrusted(
    pod: Pod, sample: PodSample, now: Seconds, settings: AlgorithmSettings
) -> bool:
    """Upstream's readiness rule, applied to the cpu resource only; all comparisons strict."""
    if pod.ready is None or pod.start_time is None:
        return True
    transition = pod.ready_transition_time if pod.ready_transition_time is not None else 0.0
    not_ready = pod.ready is ConditionStatus.FALSE
    if pod.start_time + settings.cpu_initialization_period > now:
        # Still initializing: ignore the sample if the pod is unready, or if one full metric
        # window has not been collected since its last readiness transition.
        return not_ready or sample.timestamp < transition + sample.window
    # Initialized: ignore the sample only if the pod is unready and has never been ready.
    return not_ready and pod.start_time + settings.initial_readiness_delay > transition


_GroupsKey = tuple[tuple[str, ...], AlgorithmSettings]
"""The names of the pods with a sample, and the settings: what a grouping depends on."""


# A subclass of tuple cannot be a mypyc native class: it stays a Python class (setup.py).
@mypyc_attr(native_class=False)
class PodView(tuple[Pod, ...]):
    """Pods (a tuple of them) that remember what the metrics compute from the pods alone:
    each resource's requests, and the grouping for a set of sample names. Pods are values,
    so the answers cannot go stale; they are exactly what ``pod_requests`` and
    ``group_pods`` return."""

    def __init__(self, pods: Iterable[Pod] = ()) -> None:
        self._requests: dict[tuple[str, str | None, RequestsBasis], dict[str, int]] = {}
        self._groups: dict[bool, tuple[_GroupsKey, PodGroups]] = {}
        self._settled: tuple[AlgorithmSettings, float] | None = None

    def requests(self, *, resource: str, container: str | None,
                 basis: RequestsBasis = DEFAULT_REQUESTS_BASIS) -> Mapping[str, int]:
        """``pod_requests`` of these pods (a failure is not remembered: it raises again)."""
        key = (resource, container, basis)
        found = self._requests.get(key)
        if found is None:
            found = self._requests[key] = pod_requests(self, resource=resource,
                                                       container=container, basis=basis)
        return found

    def groups(self, samples: Mapping[str, PodSample], *, resource: str | None, now: Seconds,
               settings: AlgorithmSettings) -> PodGroups:
        """``group_pods`` of these pods. Only which pods have a sample matters, except for
        the ``cpu`` readiness rule while some pod is initializing (its answer then depends
        on ``now`` and the samples' times): that grouping is not remembered."""
        cpu = resource == CPU
        key = (tuple(samples), settings)
        kept = self._groups.get(cpu)
        if kept is not None and kept[0] == key and (not cpu or now >= self._settled_at(settings)):
            return kept[1]
        groups = group_pods(self, samples, resource=resource, now=now, settings=settings)
        if not cpu or now >= self._settled_at(settings):
            self._groups[cpu] = (key, groups)
        return groups

    def _settled_at(self, settings: AlgorithmSettings) -> Seconds:
        """From when on no pod is initializing: the cpu rule then reads neither ``now``
        nor a sample's time (``_cpu_sample_untrusted``'s initialized branch)."""
        if self._settled is None or self._settled[0] != settings:
            period = settings.cpu_initialization_period
            self._settled = (settings, max(
                (pod.start_time + period for pod in self
                 if pod.start_time is not None and pod.ready is not None),
                default=-math.inf))
        return self._settled[1]


def pod_view(pods: Sequence[Pod]) -> PodView:
    """``pods`` as a ``PodView`` (itself when it is one)."""
    return pods if isinstance(pods, PodView) else PodView(pods)


def count_running_ready(pods: Sequence[Pod]) -> int:
    """Upstream's ``getReadyPodsCount``: Running with Ready=True (deletion is not checked)."""
    if not pods:
        raise MetricError("no pods returned by selector while calculating replica count")
    return sum(
        1 for pod in pods if pod.phase is PodPhase.RUNNING and pod.ready is ConditionStatus.TRUE
    )


def pod_requests(
    pods: Sequence[Pod], *, resource: str, container: str | None,
    basis: RequestsBasis = DEFAULT_REQUESTS_BASIS,
) -> dict[str, int]:
    """Upstream's ``calculateRequests``: each listed pod's request for ``resource`` (milli).

    ``basis`` says whose: ``SPEC`` reads the pod specs, as upstream does today; ``APPLIED``
    reads what the kubelet reports it has applied, resource by resource, and the spec's
    where the status has none (a pod not started yet, a kubelet that does not report them).
    The two differ only while a pod is resized in place (kubernetes#142155).
    """
    applied = basis is RequestsBasis.APPLIED
    return {pod.name: _pod_request(pod, resource, container, applied) for pod in pods}


def _container_request(entry: Container, resource: str, applied: bool) -> int | None:
    """The container's request for ``resource``: the applied one if asked and reported (as
    upstream's ``containerActuatedRequests``, component-helpers), else the spec's."""
    if applied and entry.applied is not None and resource in entry.applied:
        return entry.applied[resource]
    return entry.requests.get(resource)


def _pod_request(pod: Pod, resource: str, container: str | None, applied: bool) -> int:
    # A named container takes precedence over pod-level requests (KEP-2837).
    if container is None and pod.pod_requests and _pod_level_requests_set(pod):
        return _pod_level_request(pod, resource, applied)
    counted: tuple[Container, ...] = pod.containers + pod.sidecars if pod.sidecars \
        else pod.containers
    total = 0
    for entry in counted:
        if container is None or entry.name == container:
            request = _container_request(entry, resource, applied)
            if request is None:
                raise MetricError(
                    f"missing request for {resource} in container {entry.name} of Pod {pod.name}"
                )
            total += request
            if entry.name == container:
                return total
    if container is not None:
        raise MetricError(f"container {container} not found in Pod {pod.name}")
    return total


def _supported_at_pod_level(resource: str) -> bool:
    """``IsSupportedPodLevelResource``: cpu, memory and huge pages."""
    return resource in {"cpu", "memory"} or resource.startswith("hugepages-")


def _pod_level_requests_set(pod: Pod) -> bool:
    """``IsPodLevelRequestsSet``: some pod-level request names a supported resource."""
    return bool(pod.pod_requests) and any(
        _supported_at_pod_level(name) for name in pod.pod_requests or {}
    )


def _pod_level_request(pod: Pod, resource: str, applied: bool) -> int:
    """``calculatePodLevelRequests`` over ``PodRequests``: the pod-level value of a supported
    resource, else the aggregate of the containers' requests (missing ones add nothing).

    The RuntimeClass overhead is left out (``ExcludeOverhead: true``, kubernetes#142154):
    usage is measured in the containers' cgroups, which the overhead is not part of. The
    kubelet's pod-level status includes it, so it is taken off the applied value, as
    component-helpers' ``PodRequests`` does with status resources (floored at 0).
    Plain init containers are not in the model, so the aggregate is the sum over containers
    and sidecars (what ``AggregateContainerRequests`` gives without them).
    """
    pod_level = pod.pod_requests or {}
    counted = pod.containers + pod.sidecars
    if resource in pod_level and _supported_at_pod_level(resource):
        status = pod.pod_applied
        if applied and status is not None and resource in status:
            return max(0, status[resource] - pod.overhead.get(resource, 0))
        return pod_level[resource]
    found = [request for c in counted
             if (request := _container_request(c, resource, applied)) is not None]
    if not found:
        raise MetricError(f"missing pod-level request for {resource} in Pod {pod.name}")
    return sum(found)
