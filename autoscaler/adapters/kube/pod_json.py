"""A core/v1 Pod as JSON to the core's ``Pod`` value, converted once per watch event.

Takes the raw JSON dict (not the generated ``V1Pod`` model: building thousands of models per
relist costs CPU for fields we never read). Garbage in a field the core needs cannot come
from a real API server; if it does, the field is treated as absent and logged, never fatal.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any

import structlog

from autoscaler.algorithm import ConditionStatus, Container, Pod, PodPhase
from autoscaler.algorithm.quantity import QuantityError, parse_milli

log = structlog.get_logger("autoscaler.kube.pods")

_PHASES = {phase.value: phase for phase in PodPhase}
_STATUSES = {status.value: status for status in ConditionStatus}

_Items = tuple[tuple[str, int], ...]
"""A ``ResourceList`` as sorted (name, milli-units) pairs: hashable, so pods can share it."""


def parse_time(text: Any) -> float | None:
    """RFC 3339 (``2026-01-02T03:04:05Z``, fractions allowed) to Unix seconds."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return _seconds_of(text)
    except ValueError:
        log.warning("unparsable timestamp in a pod", value=text)
        return None


@functools.lru_cache(maxsize=1 << 12)
def _seconds_of(text: str) -> float:
    """One float per distinct instant: times are whole seconds, and the pods of a rollout
    start and turn ready in the same ones (52,500 pods held 105,000 floats, 2.5 MB)."""
    return datetime.fromisoformat(text).timestamp()


def requests_of(resources: Any) -> Mapping[str, int]:
    """``resources.requests`` in milli-units; an unparsable quantity is left out."""
    return _shared_requests(_requests_items(resources))


def _requests_items(resources: Any) -> _Items:
    """``resources.requests`` as sorted milli-unit pairs."""
    return _quantity_items((resources or {}).get("requests"))


def _quantity_items(resource_list: Any) -> _Items:
    """A ``ResourceList`` (name -> quantity) as sorted milli-unit pairs."""
    parsed: list[tuple[str, int]] = []
    if not isinstance(resource_list, Mapping):
        return ()
    for name, quantity in resource_list.items():
        try:
            parsed.append((str(name), _milli_of(quantity) if isinstance(quantity, str)
                           else parse_milli(quantity)))
        except QuantityError:
            log.warning("unparsable resource request", resource=name, value=quantity)
    return tuple(sorted(parsed))


@functools.lru_cache(maxsize=1 << 12)
def _milli_of(quantity: str) -> int:
    """``parse_milli``, once per distinct text: a fleet's pods repeat a few request values,
    and parsing each (exact fractions) took a tenth of a ring member's first LIST."""
    return parse_milli(quantity)


@functools.lru_cache(maxsize=1 << 14)
def _shared_requests(items: _Items) -> Mapping[str, int]:
    return MappingProxyType(dict(items))


def _containers(
    entries: Any, applied: Mapping[str, _Items | None], *, sidecars_only: bool = False,
) -> tuple[Container, ...]:
    return _shared_containers(tuple(
        (name := str(entry.get("name", "")), _requests_items(entry.get("resources")),
         applied.get(name))
        for entry in entries or ()
        # A restartable init container (restartPolicy Always) is a sidecar: its requests count.
        if not sidecars_only or entry.get("restartPolicy") == "Always"
    ))


@functools.lru_cache(maxsize=1 << 14)
def _shared_containers(
    key: tuple[tuple[str, _Items, _Items | None], ...],
) -> tuple[Container, ...]:
    """The pods of one template have equal containers: one immutable tuple serves them all
    (at 50,000 pods, ~20 MB of identical Container objects and request maps)."""
    return tuple(
        Container(name=name, requests=_shared_requests(items),
                  applied=None if applied is None else _shared_requests(applied))
        for name, items, applied in key)


def _applied_items(status: Mapping[str, Any]) -> _Items | None:
    """What the kubelet reports it has applied: ``resources.requests``, else
    ``allocatedResources`` (component-helpers' ``containerActuatedRequests`` order)."""
    resources = status.get("resources")
    requests = resources.get("requests") if isinstance(resources, Mapping) else None
    if requests is None:
        requests = status.get("allocatedResources")
    return None if requests is None else _quantity_items(requests)


def _applied_by_name(status: Mapping[str, Any]) -> dict[str, _Items | None]:
    """Each container's applied requests, by name, from ``containerStatuses`` and
    ``initContainerStatuses`` (as ``findContainerStatus`` looks in both)."""
    found: dict[str, _Items | None] = {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for entry in status.get(key) or ():
            if isinstance(entry, Mapping) and (applied := _applied_items(entry)) is not None:
                found.setdefault(str(entry.get("name", "")), applied)
    return found


def _ready(status: Mapping[str, Any]) -> tuple[ConditionStatus | None, float | None]:
    for condition in status.get("conditions") or ():
        if condition.get("type") == "Ready":
            value = _STATUSES.get(condition.get("status"), ConditionStatus.UNKNOWN)
            return value, parse_time(condition.get("lastTransitionTime"))
    return None, None


def pod_from_json(raw: Mapping[str, Any]) -> Pod:
    """The core's view of one pod."""
    metadata, spec, status = (raw.get(k) or {} for k in ("metadata", "spec", "status"))
    ready, transition = _ready(status)
    applied = _applied_by_name(status)
    pod_applied = _applied_items(status)
    return Pod(
        name=str(metadata.get("name", "")),
        # A pod the kubelet has not reported on yet has no phase: it is pending.
        phase=_PHASES.get(status.get("phase") or "Pending", PodPhase.UNKNOWN),
        ready=ready,
        ready_transition_time=transition,
        start_time=parse_time(status.get("startTime")),
        deleting=metadata.get("deletionTimestamp") is not None,
        containers=_containers(spec.get("containers"), applied),
        sidecars=_containers(spec.get("initContainers"), applied, sidecars_only=True),
        pod_requests=requests_of(spec.get("resources")) or None,
        overhead=_shared_requests(_quantity_items(spec.get("overhead"))),
        pod_applied=None if pod_applied is None else _shared_requests(pod_applied),
    )


def labels_of(raw: Mapping[str, Any]) -> Mapping[str, str]:
    labels = (raw.get("metadata") or {}).get("labels") or {}
    return _shared_labels(tuple(sorted((str(k), str(v)) for k, v in labels.items())))


@functools.lru_cache(maxsize=1 << 16)
def _shared_labels(items: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
    """One read-only map per distinct label set: the pods of a ReplicaSet share theirs (at
    50,000 pods this keeps ~40,000 fewer dicts)."""
    return MappingProxyType(dict(items))
