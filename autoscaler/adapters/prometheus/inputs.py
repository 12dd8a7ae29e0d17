"""The data the Prometheus adapter takes: one request per target, and the config it reads.

``ServerSettings`` and ``QuerySettings`` are the parts of ``autoscaler.config``'s
``PrometheusServer`` and ``MetricQuery`` this adapter reads, as read-only protocols, so the
adapter depends on field names only and tests can pass the real config objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, Protocol

from autoscaler.algorithm import MetricSpec, Pod
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
