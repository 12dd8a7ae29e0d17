"""Container requests from kube-state-metrics, for targets configured to take them from there.

``kube_pod_container_resource_requests`` (cores for cpu, bytes for memory) is read once per
(server, resource) for all such targets and folded into each target's ``Pod`` objects: a
container's request for that resource is replaced by the series' value; containers without a
series keep what the pod spec says, containers only kube-state-metrics knows are added. If the
requests query fails, the utilization metric that needed it is unavailable this pass.

kube-state-metrics exports the spec's requests only (kube-state-metrics#2980; the status
series of #3016 are not merged), so a request it gives replaces the applied one too: on this
path a pod resized in place counts by its spec whatever ``utilizationRequests`` says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from autoscaler.adapters.prometheus.batch import Answers, Planned, Slot
from autoscaler.adapters.prometheus.parse import PodSeries
from autoscaler.adapters.prometheus.split import Splitter, describe
from autoscaler.algorithm import Container, MetricUnavailable, Pod
from autoscaler.errors import AutoscalerError

PodRequests = dict[str, dict[str, dict[str, int]]]
"""pod -> container -> resource -> milli-units."""


def fold_requests(
    pods: Sequence[Pod], namespace: str, slots: Sequence[Planned], answers: Answers,
    splitter: Splitter,
) -> tuple[tuple[Pod, ...] | None, dict[int, MetricUnavailable], list[str]]:
    """Pods with kube-state-metrics requests, failures by metric index, and notes.

    Returns ``None`` for the pods when no slot asks for kube-state-metrics requests.
    ``splitter`` (shared by the targets of one pass) gives each requests answer indexed by
    pod, so a target reads its own pods' series, not the whole cluster's answer.
    """
    found: PodRequests = {}
    failed: dict[int, MetricUnavailable] = {}
    notes: list[str] = []
    asked = False
    for index, slot in enumerate(slots):
        if not isinstance(slot, Slot) or slot.requests is None or slot.resource is None:
            continue
        asked = True
        answer = answers.get(slot.requests)
        if answer is None or isinstance(answer, AutoscalerError):
            why = "not run before the deadline" if answer is None else describe(answer)
            failed[index] = MetricUnavailable(reason=f"requests query: {why}")
            continue
        indexed = splitter.indexed(slot.requests, answer)
        for pod in dict.fromkeys(p.name for p in pods):
            _collect(pod, indexed.series_of(pod), slot.resource, namespace, found=found,
                     notes=notes)
    if not asked:
        return None, {}, []
    return tuple(_with_requests(pod, found.get(pod.name, {})) for pod in pods), failed, notes


def _collect(
    pod: str, series: Sequence[PodSeries], resource: str, namespace: str, *,
    found: PodRequests, notes: list[str],
) -> None:
    for one in series:
        container = one.container
        if container is None or one.namespace != namespace:
            continue
        if one.value is None:
            notes.append(f"request of {pod}/{container} for {resource}: {one.problem}")
            continue
        found.setdefault(pod, {}).setdefault(container, {})[resource] = one.value


def _with_requests(pod: Pod, by_container: Mapping[str, Mapping[str, int]]) -> Pod:
    if not by_container:
        return pod
    known = {c.name for c in pod.containers}
    containers = [_folded(c, by_container.get(c.name, {})) for c in pod.containers]
    containers += [
        Container(name=name, requests=dict(requests))
        for name, requests in sorted(by_container.items()) if name not in known
    ]
    return replace(pod, containers=tuple(containers))


def _folded(container: Container, requests: Mapping[str, int]) -> Container:
    """``container`` with kube-state-metrics' ``requests``, which replace both the spec's and
    the applied ones for those resources."""
    if not requests:
        return container
    applied = container.applied
    if applied is not None:
        applied = {name: value for name, value in applied.items() if name not in requests}
    return replace(container, requests={**container.requests, **requests}, applied=applied)
