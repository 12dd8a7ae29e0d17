"""The validated configuration: plain frozen dataclasses the rest of the daemon reads.

Nothing here knows about TOML or pydantic. A ``Config`` exists only when the whole file
was valid, so holders of one never see a half-checked value. Durations are float seconds;
quantities inside ``spec`` are milli-units, as the algorithm core expects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from autoscaler.algorithm import AlgorithmSettings, AutoscalerSpec
from autoscaler.algorithm.activation import ScaleToZero
from autoscaler.algorithm.forecast import PredictionSettings
from autoscaler.algorithm.model import DEFAULT_SYNC_PERIOD
from autoscaler.schedules import Schedule

RequestsSource = Literal["pods", "kube-state-metrics"]
FollowRedirects = Literal["same-origin", "never", "any"]
LogFormat = Literal["json", "console"]

_EMPTY: Mapping[str, str] = MappingProxyType({})

DEFAULT_SERVER = "default"
"""The name of the ``[prometheus]`` server; ``[prometheus.servers.<name>]`` adds others."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderElectionSettings:
    """``daemon.leaderElection``; its timings' defaults are client-go's and the Lease
    elector's (``adapters/kube/leader.py``)."""

    enabled: bool = False
    lease_name: str = "autoscaler"
    lease_namespace: str | None = None
    """``None``: the pod's own namespace when in a cluster, else ``default``."""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


ShardingMode = Literal["leader", "dynamic"]
RingPlacement = Literal["namespace", "target"]
RingStandby = Literal["warm", "none"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardingSettings:
    """``daemon.sharding``: ``leader`` (one replica acts, the others stand by; static shards
    by ``--shard``) or ``dynamic`` (the targets spread over the live replicas by bucket
    Leases; ``daemon.leaderElection``'s leaseName and leaseNamespace name the ring). The
    timings are the ring's, much shorter than a single leader's: a member writes one Lease
    per ``retry_period`` whatever it holds (docs/design/active-active.md §5)."""

    mode: ShardingMode = "leader"
    placement: RingPlacement = "namespace"
    standby: RingStandby = "warm"
    """``warm``: a member also caches the pods of what it would inherit if any one other
    member left (about 2/N of the fleet), so a failover needs no LIST; ``none``: its share
    only (1/N), and a bucket it gains by a failover or a leave waits for a LIST before its
    first pass (cluster-wide watches relist everything the member watches, the gained
    namespaces added)."""
    lease_duration: float = 3.0
    renew_deadline: float = 2.0
    retry_period: float = 1.0

    def timing_problem(self) -> tuple[str, str] | None:
        """(field, why) when these timings cannot fence: a member must stop trusting itself
        before a peer may evict it, and a renewal must time out within that margin."""
        if self.renew_deadline >= self.lease_duration:
            return ("renewDeadline", f"must be shorter than leaseDuration "
                    f"({self.lease_duration:g}s), got {self.renew_deadline:g}s")
        margin = self.lease_duration - self.renew_deadline
        if self.retry_period > margin:
            return ("retryPeriod", f"must be at most leaseDuration - renewDeadline "
                    f"({margin:g}s), got {self.retry_period:g}s")
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonSettings:
    sync_period: float = DEFAULT_SYNC_PERIOD
    algorithm: AlgorithmSettings = field(default_factory=AlgorithmSettings)
    concurrency: int = 10
    listen_address: str = "127.0.0.1:8080"
    leader_election: LeaderElectionSettings = field(default_factory=LeaderElectionSettings)
    sharding: ShardingSettings = field(default_factory=ShardingSettings)
    dry_run: bool = False
    log_format: LogFormat = "json"
    log_level: str = "info"
    state_file: Path | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PrometheusServer:
    """One Prometheus-compatible query endpoint (Prometheus, Thanos Query, Mimir, ...)."""

    name: str
    url: str
    bearer_token_file: Path | None = None
    basic_auth_username: str | None = None
    basic_auth_password_file: Path | None = None
    headers: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    ca_file: Path | None = None
    insecure_skip_verify: bool = False
    timeout: float = 10.0
    query_params: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    """Extra URL parameters on every query (``dedup=true`` for Thanos, ...)."""
    max_response_bytes: int = 16 * 2**20
    """The most bytes one answer may take, on the wire and decompressed. A 10,000-target
    answer (50,000 series) is ~6 MB (``bench/prometheus_answers.py``); decoded, an answer
    takes ~8 times its size, so 16 MiB keeps one within the daemon's 512Mi limit."""
    max_series: int = 100_000
    """The most series one answer may hold, counted before it is decoded (~1 KB each)."""
    max_sample_age: float = 300.0
    """Older samples are missing, not values: Prometheus' own lookback delta (5m)."""
    follow_redirects: FollowRedirects = "same-origin"
    """Which redirects to follow; credentials and headers never go to another origin."""

    def __repr__(self) -> str:
        # A URL may carry user:password@ and a header may carry a token: never print them.
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        netloc = f"***@{host}" if parts.username or parts.password else parts.netloc
        if parts.port and netloc.startswith("***@"):
            netloc += f":{parts.port}"
        url = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        return (f"PrometheusServer(name={self.name!r}, url={url!r}, "
                f"headers={sorted(self.headers)!r} (values hidden), timeout={self.timeout})")


@dataclass(frozen=True, slots=True, kw_only=True)
class KubernetesSettings:
    in_cluster: bool | None = None
    """``None``: in-cluster when the service-account token is mounted, else the kubeconfig."""
    kubeconfig: Path | None = None
    context: str | None = None
    request_timeout: float = 10.0
    watch_scope: Literal["cluster", "namespaces"] = "cluster"
    """``cluster``: one watch per kind (pods, Deployments, ...) for the whole cluster, keeping
    only the namespaces with targets; ``namespaces``: one watch per kind per such namespace,
    for an account whose RBAC reaches only those namespaces (many namespaces mean many
    long-lived connections)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleTargetRef:
    api_version: str
    kind: str
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricQuery:
    """How one metric of ``spec.metrics`` is read from Prometheus."""

    query: str | None
    """The user's PromQL template; ``None`` for a Resource metric's built-in query."""
    requests_source: RequestsSource = "pods"
    window: float = 60.0
    """Seconds the query's values average over (the readiness rule for cpu samples uses it)."""
    when_empty: Literal["invalid", "zero"] = "invalid"
    """An Object or External answer with no series: invalid (hold), or read as 0."""
    history_query: str | None = None
    """``prediction.historyQuery``: the PromQL template whose range query gives the metric's
    past totals (``None``: derived from ``query``; see
    ``adapters/prometheus/metric_history.py``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fallback:
    """After ``failure_threshold`` passes with every metric invalid, go to ``replicas``."""

    failure_threshold: int
    replicas: int
    allow_scale_down: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetConfig:
    key: str
    """``namespace/Kind/name``: unique across the config."""
    namespace: str
    scale_target_ref: ScaleTargetRef
    spec: AutoscalerSpec
    metric_queries: tuple[MetricQuery, ...]
    """Aligned one to one with ``spec.metrics``."""
    prometheus: str = DEFAULT_SERVER
    sync_period: float = DEFAULT_SYNC_PERIOD
    paused: bool = False
    paused_replicas: int | None = None
    fallback: Fallback | None = None
    schedules: tuple[Schedule, ...] = ()
    """Time windows whose bounds replace minReplicas/maxReplicas while active."""
    scale_to_zero: ScaleToZero | None = None
    """Set when minReplicas is 0: activation thresholds and cooldowns."""
    shadow: bool = False
    """Decide and compare with the HPA or ScaledObject that owns the target; never write."""
    predictions: tuple[PredictionSettings | None, ...] = ()
    """Each metric's ``prediction``, aligned with ``spec.metrics``; empty when none has one."""
    generation: str = ""
    """A digest of the target's table merged over ``[defaults]`` (``config/generation.py``):
    upstream's ``metadata.generation``, which ``/status`` shows beside the generation the
    last pass acted on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    source: Path | None
    daemon: DaemonSettings
    prometheus: PrometheusServer
    """The ``[prometheus]`` table: the server named ``default``."""
    prometheus_servers: Mapping[str, PrometheusServer]
    """Every server by name, ``default`` included."""
    kubernetes: KubernetesSettings
    targets: tuple[TargetConfig, ...]

    def server_for(self, target: TargetConfig) -> PrometheusServer:
        return self.prometheus_servers[target.prometheus]


def target_key(namespace: str, kind: str, name: str) -> str:
    return f"{namespace}/{kind}/{name}"
