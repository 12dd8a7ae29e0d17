"""Plan a pass's queries (each distinct one once) and split the answers back per target.

Planning turns every (target, metric) into a ``Slot``: which shared query answers it and how to
read the answer. Identical (server, PromQL) pairs collapse into one ``QueryKey``, so N targets
sharing a query cost one query. Built-in resource queries are grouped per (server, resource,
per-container or not, window) across all targets, with the namespaces of all of them in one
regex: one query per group, whatever the number of targets.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from autoscaler.adapters.prometheus import queries
from autoscaler.adapters.prometheus.inputs import QuerySettings, TargetRequest
from autoscaler.adapters.prometheus.parse import PodAnswer, Sample
from autoscaler.adapters.prometheus.share import narrowed
from autoscaler.algorithm import MetricSourceType, MetricSpec, MetricTargetType, MetricUnavailable
from autoscaler.errors import AutoscalerError
from autoscaler.record import record


class Shape(StrEnum):
    POD_VECTOR = "pod-vector"
    """A user query yielding one series per pod (Pods, or a Resource override)."""
    RESOURCE = "resource"
    """The built-in query grouped by (namespace, pod)."""
    CONTAINER = "container"
    """The built-in query grouped by (namespace, pod, container)."""
    OBJECT = "object"
    EXTERNAL = "external"


_PER_POD_SHAPES = frozenset({Shape.POD_VECTOR, Shape.RESOURCE, Shape.CONTAINER})


class QueryKey(NamedTuple):
    """A query as a pass runs it. A tuple, so hashing and comparing it stay in C: every slot
    of every target looks its query up several times a pass."""

    server: str
    promql: str


@record
class Slot:
    """How one target's metric is answered."""

    shape: Shape
    query: QueryKey
    window: float
    container: str | None = None
    resource: str | None = None
    requests: QueryKey | None = None
    """The kube-state-metrics requests query, when the target's requests come from there."""
    empty_is_zero: bool = False
    """An Object or External answer with no series reads as 0 (``whenEmpty = "zero"``)."""
    rendered: str | None = None
    """The query as the target's template renders it, when ``query`` runs a cut of it
    (``_cut_to_share``): what ``status`` and ``explain`` show."""

    @property
    def shown(self) -> str:
        """The PromQL to show with the values read."""
        return self.rendered or self.query.promql


Planned = Slot | MetricUnavailable
Answer = Sequence[Sample] | PodAnswer
"""Samples, or for a query only ever read per pod, the answer indexed by pod."""
Answers = Mapping[QueryKey, Answer | AutoscalerError]

_SHAPES = {
    MetricSourceType.PODS: Shape.POD_VECTOR,
    MetricSourceType.OBJECT: Shape.OBJECT,
    MetricSourceType.EXTERNAL: Shape.EXTERNAL,
}
_RESOURCE_TYPES = (MetricSourceType.RESOURCE, MetricSourceType.CONTAINER_RESOURCE)


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    slots: Mapping[str, tuple[Planned, ...]]
    pods: Mapping[str, int] = field(default_factory=dict)
    """Pods per target key."""

    @property
    def queries(self) -> tuple[QueryKey, ...]:
        """Each distinct (server, PromQL) once, in a stable order."""
        return tuple(sorted(self.sharers()))

    def expected_series(self) -> Counter[QueryKey]:
        """Roughly how many series each query answers: a pod each for per-pod slots, one for
        the others (what a large answer costs to decode is budgeted on it)."""
        counts: Counter[QueryKey] = Counter()
        for key, row in self.slots.items():
            pods = self.pods.get(key, 1)
            for slot in row:
                if isinstance(slot, Slot):
                    per_pod = slot.shape in _PER_POD_SHAPES
                    counts[slot.query] += pods if per_pod else 1
                    if slot.requests:
                        counts[slot.requests] += pods
        return counts

    def per_pod(self) -> frozenset[QueryKey]:
        """The queries only ever read per pod (usage and requests queries): these are indexed
        by pod as they are parsed; a query also read whole (Object, External) is not."""
        per_pod: set[QueryKey] = set()
        whole: set[QueryKey] = set()
        for row in self.slots.values():
            for slot in row:
                if isinstance(slot, Slot):
                    (per_pod if slot.shape in _PER_POD_SHAPES else whole).add(slot.query)
                    if slot.requests:
                        per_pod.add(slot.requests)
        return frozenset(per_pod - whole)

    def sharers(self) -> Counter[QueryKey]:
        """How many (target, metric) slots each query answers."""
        counts: Counter[QueryKey] = Counter()
        for row in self.slots.values():
            for slot in row:
                if isinstance(slot, Slot):
                    counts[slot.query] += 1
                    if slot.requests:
                        counts[slot.requests] += 1
        return counts


def plan(requests: Sequence[TargetRequest], known: Callable[[str], bool], *,
         share: bool = False) -> Plan:
    """Every target's slots; each distinct (server, query) appears once in ``Plan.queries``.

    ``share``: ``requests`` are a share of the configured targets (a ring member's, a static
    shard's), so a per-pod query that answers for the whole fleet is cut to their
    namespaces (``_cut_to_share``)."""
    usage_ns: dict[tuple[str, str, bool, float], set[str]] = defaultdict(set)
    requests_ns: dict[tuple[str, str], set[str]] = defaultdict(set)
    for target in requests:  # first pass: which namespaces each shared query must cover
        for spec, query in zip(target.metrics, target.queries, strict=False):
            if spec.type in _RESOURCE_TYPES and known(target.server):
                if query.query is None:
                    usage_ns[_usage_group(target.server, spec, query)].add(target.namespace)
                if _needs_requests(spec, query):
                    requests_ns[(target.server, spec.name)].add(target.namespace)
    shared = _SharedQueries(usage_ns, requests_ns)
    slots = {t.key: _target_slots(t, known, shared) for t in requests}
    return Plan(slots=_cut_to_share(requests, slots) if share else slots,
                pods={t.key: max(1, len(t.pods)) for t in requests})


def _cut_to_share(requests: Sequence[TargetRequest],
                  slots: dict[str, tuple[Planned, ...]]) -> dict[str, tuple[Planned, ...]]:
    """Each per-pod query from a template that names no namespace or pod (the whole fleet's
    answer: every replica would fetch and parse all of it every pass, a failover's first
    pass included), cut to the namespaces of the targets reading it. Not a query also read
    whole (Object, External), nor one a scoped template renders too."""
    namespaces: dict[QueryKey, set[str]] = defaultdict(set)
    kept: set[QueryKey] = set()
    for target in requests:
        for slot, query in zip(slots[target.key], target.queries, strict=False):
            if not isinstance(slot, Slot):
                continue
            if (slot.shape is Shape.POD_VECTOR and query.query is not None
                    and queries.fleet_wide(query.query)):
                namespaces[slot.query].add(target.namespace)
            else:
                kept.add(slot.query)
    cut = {key: QueryKey(key.server, narrowed(key.promql, names))
           for key, names in namespaces.items() if key not in kept}
    if not cut:
        return slots
    return {key: tuple(
        dataclasses.replace(slot, query=cut[slot.query], rendered=slot.query.promql)
        if isinstance(slot, Slot) and slot.shape is Shape.POD_VECTOR and slot.query in cut
        else slot for slot in row) for key, row in slots.items()}


def _usage_group(server: str, spec: MetricSpec, query: QuerySettings) -> tuple[
        str, str, bool, float]:
    return (server, spec.name, spec.type is MetricSourceType.CONTAINER_RESOURCE, query.window)


def _needs_requests(spec: MetricSpec, query: QuerySettings) -> bool:
    # Requests only matter for utilization targets; the pods' own specs are the default source.
    return (query.requests_source == "kube-state-metrics"
            and spec.target.type is MetricTargetType.UTILIZATION)


class _SharedQueries:
    """The shared built-in queries of a pass, each rendered once."""

    def __init__(self, usage_ns: Mapping[tuple[str, str, bool, float], set[str]],
                 requests_ns: Mapping[tuple[str, str], set[str]]) -> None:
        self.usage_ns, self.requests_ns = usage_ns, requests_ns
        self._usage: dict[tuple[str, str, bool, float], QueryKey] = {}
        self._requests: dict[tuple[str, str], QueryKey] = {}

    def usage(self, server: str, spec: MetricSpec, query: QuerySettings) -> QueryKey:
        group = _usage_group(server, spec, query)
        if group not in self._usage:
            promql = queries.usage_query(spec.name, namespaces=self.usage_ns[group],
                                         per_container=group[2], window=query.window)
            self._usage[group] = QueryKey(server, promql)
        return self._usage[group]

    def requests(self, server: str, resource: str) -> QueryKey:
        if (server, resource) not in self._requests:
            namespaces = self.requests_ns[(server, resource)]
            promql = queries.requests_query(resource, namespaces=namespaces)
            self._requests[(server, resource)] = QueryKey(server, promql)
        return self._requests[(server, resource)]


def _target_slots(
    target: TargetRequest, known: Callable[[str], bool], shared: _SharedQueries
) -> tuple[Planned, ...]:
    if not known(target.server):
        reason = f"unknown Prometheus server {target.server!r}"
        return tuple(MetricUnavailable(reason=reason) for _ in target.metrics)
    if len(target.queries) != len(target.metrics):
        reason = f"{len(target.queries)} query settings for {len(target.metrics)} metrics"
        return tuple(MetricUnavailable(reason=reason) for _ in target.metrics)
    return tuple(_slot(target, spec, query, shared)
                 for spec, query in zip(target.metrics, target.queries, strict=True))


def _slot(
    target: TargetRequest, spec: MetricSpec, query: QuerySettings, shared: _SharedQueries
) -> Planned:
    if spec.type in _RESOURCE_TYPES:
        return _resource_slot(target, spec, query, shared)
    if query.query is None:
        return MetricUnavailable(reason=f"{spec.type} metric {spec.name!r} has no query")
    rendered = _render(target, query.query, container="")
    if isinstance(rendered, MetricUnavailable):
        return rendered
    return Slot(shape=_SHAPES[spec.type], query=QueryKey(target.server, rendered),
                window=query.window, empty_is_zero=query.when_empty == "zero")


def _resource_slot(
    target: TargetRequest, spec: MetricSpec, query: QuerySettings, shared: _SharedQueries
) -> Planned:
    per_container = spec.type is MetricSourceType.CONTAINER_RESOURCE
    requests = shared.requests(target.server, spec.name) if _needs_requests(spec, query) else None
    if query.query is not None:  # the user's query replaces the built-in usage query
        rendered = _render(target, query.query, container=spec.container or "")
        if isinstance(rendered, MetricUnavailable):
            return rendered
        return Slot(shape=Shape.POD_VECTOR, query=QueryKey(target.server, rendered),
                    window=query.window, resource=spec.name, requests=requests)
    if spec.name not in queries.BUILT_IN_RESOURCES:
        return MetricUnavailable(
            reason=f"no built-in query for resource {spec.name!r}; set a query for it")
    return Slot(
        shape=Shape.CONTAINER if per_container else Shape.RESOURCE,
        query=shared.usage(target.server, spec, query), window=query.window,
        container=spec.container if per_container else None, resource=spec.name,
        requests=requests,
    )


def _render(target: TargetRequest, template: str, *, container: str) -> str | MetricUnavailable:
    try:
        return queries.render(
            template, namespace=target.namespace, name=target.name, kind=target.kind,
            pods=(pod.name for pod in target.pods), container=container,
        )
    except (KeyError, ValueError) as error:
        return MetricUnavailable(reason=f"cannot render the query template: {error!r}")
