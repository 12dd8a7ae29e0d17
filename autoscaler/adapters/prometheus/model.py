"""The data the Prometheus adapter takes and returns: requests, results, and config shapes.

``ServerSettings`` and ``QuerySettings`` are the parts of ``autoscaler.config``'s
``PrometheusServer`` and ``MetricQuery`` this adapter reads, as read-only protocols, so the
adapter depends on field names only and tests can pass the real config objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal, Protocol

from autoscaler.algorithm import MetricSpec, MetricValues, Pod
from autoscaler.record import record

RequestsSource = Literal["pods", "kube-state-metrics"]
FollowRedirects = Literal["same-origin", "never", "any"]


class ServerSettings(Protocol):
    """One Prometheus (or Thanos/Mimir query endpoint) and how to talk to it."""

    @property
    def name(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def bearer_token_file(self) -> Path | None: ...
    @property
    def basic_auth_username(self) -> str | None: ...
    @property
    def basic_auth_password_file(self) -> Path | None: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def ca_file(self) -> Path | None: ...
    @property
    def insecure_skip_verify(self) -> bool: ...
    @property
    def timeout(self) -> float: ...
    @property
    def query_params(self) -> Mapping[str, str]: ...
    @property
    def max_response_bytes(self) -> int: ...
    @property
    def max_series(self) -> int: ...
    @property
    def max_sample_age(self) -> float: ...
    @property
    def follow_redirects(self) -> FollowRedirects: ...


class QuerySettings(Protocol):
    """How one metric is queried; aligned with the target's ``spec.metrics``."""

    @property
    def query(self) -> str | None: ...
    @property
    def requests_source(self) -> RequestsSource: ...
    @property
    def window(self) -> float: ...
    @property
    def when_empty(self) -> Literal["invalid", "zero"]:
        """An Object or External answer with no series: invalid, or read as 0."""
        ...


@record
class TargetRequest:
    """One target's metrics for this pass; ``metrics`` and ``queries`` are aligned."""

    key: str
    namespace: str
    name: str
    kind: str
    server: str
    pods: Sequence[Pod]
    metrics: tuple[MetricSpec, ...]
    queries: tuple[QuerySettings, ...]


_NO_PODS: Mapping[str, tuple[Pod, ...]] = MappingProxyType({})
_NO_WARNINGS: Mapping[str, tuple[str, ...]] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResult:
    """What one ``fetch`` produced.

    ``values[key]`` is aligned with that target's metrics; a metric that could not be read is
    a ``MetricUnavailable`` whose ``reason`` says why. ``pods[key]`` is set only for targets
    with a ``kube-state-metrics`` requests source: the target's pods with container requests
    filled from ``kube_pod_container_resource_requests`` (pass those to the core instead of
    the watch cache's pods). ``warnings[key]`` lists problems that did not invalidate a
    metric (a pod dropped for a NaN sample).
    """

    values: Mapping[str, tuple[MetricValues, ...]]
    queries_issued: int
    pods: Mapping[str, tuple[Pod, ...]] = field(default_factory=lambda: _NO_PODS)
    warnings: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _NO_WARNINGS)
