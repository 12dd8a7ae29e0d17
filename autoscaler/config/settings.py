"""``[daemon]``, ``[prometheus]`` and ``[kubernetes]``: from validated tables to settings.

Fields left out keep the dataclass defaults in ``model.py`` (upstream's controller flags);
rules that involve several fields (leader-election timings, one auth method per server)
are checked here, with the path the user has to change.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any

from autoscaler.algorithm import AlgorithmSettings, RequestsBasis
from autoscaler.config.issues import Problems
from autoscaler.config.schema import (
    DaemonModel,
    KubernetesModel,
    LeaderElectionModel,
    PrometheusModel,
    ServerModel,
    ShardingModel,
)
from autoscaler.config.validated import (
    DEFAULT_SERVER,
    DaemonSettings,
    KubernetesSettings,
    LeaderElectionSettings,
    PrometheusServer,
    ShardingSettings,
)

DEFAULT_PROMETHEUS_URL = "http://localhost:9090"
"""Where ``[prometheus]`` points when it names no ``url``: Prometheus's own default port."""


def given(**values: Any) -> dict[str, Any]:
    """Keyword arguments minus the ones left out (``None``), so dataclass defaults apply."""
    return {key: value for key, value in values.items() if value is not None}


def _path(text: str | None) -> Path | None:
    return None if text is None else Path(text)


def daemon_settings(model: DaemonModel | None, problems: Problems) -> DaemonSettings:
    m = model or DaemonModel()
    algorithm = AlgorithmSettings(**given(
        tolerance=m.tolerance, cpu_initialization_period=m.cpu_initialization_period,
        initial_readiness_delay=m.initial_readiness_delay,
        downscale_stabilization=m.downscale_stabilization,
        utilization_requests=None if m.utilization_requests is None
        else RequestsBasis(m.utilization_requests),
    ))
    return DaemonSettings(**given(
        sync_period=m.sync_period, algorithm=algorithm, concurrency=m.concurrency,
        listen_address=m.listen_address, dry_run=m.dry_run, log_format=m.log_format,
        log_level=m.log_level, state_file=_path(m.state_file),
        leader_election=_leader_election(m.leader_election, problems),
        sharding=_sharding(m.sharding, problems),
    ))


def _leader_election(
    model: LeaderElectionModel | None, problems: Problems
) -> LeaderElectionSettings:
    m = model or LeaderElectionModel()
    settings = LeaderElectionSettings(**given(
        enabled=m.enabled, lease_name=m.lease_name, lease_namespace=m.lease_namespace,
        lease_duration=m.lease_duration, renew_deadline=m.renew_deadline,
        retry_period=m.retry_period,
    ))
    loc = ("daemon", "leaderElection")
    # client-go's rules: a leader must renew before its lease runs out, retrying in time.
    if settings.lease_duration <= settings.renew_deadline:
        problems.add((*loc, "leaseDuration"), f"must be greater than renewDeadline "
                     f"({settings.renew_deadline:g}s), got {settings.lease_duration:g}s")
    if settings.renew_deadline <= settings.retry_period:
        problems.add((*loc, "renewDeadline"), f"must be greater than retryPeriod "
                     f"({settings.retry_period:g}s), got {settings.renew_deadline:g}s")
    return settings


def _sharding(model: ShardingModel | None, problems: Problems) -> ShardingSettings:
    m = model or ShardingModel()
    settings = ShardingSettings(**given(
        mode=m.mode, placement=m.placement, standby=m.standby,
        lease_duration=m.lease_duration,
        renew_deadline=m.renew_deadline, retry_period=m.retry_period))
    problem = settings.timing_problem()
    if problem is not None:
        problems.add(("daemon", "sharding", problem[0]), problem[1])
    return settings


def prometheus_servers(
    model: PrometheusModel | None, problems: Problems
) -> dict[str, PrometheusServer]:
    """Every server by name: ``[prometheus]`` as ``default``, then ``[prometheus.servers.*]``."""
    m = model or PrometheusModel()
    servers = {DEFAULT_SERVER: _server(DEFAULT_SERVER, m, ("prometheus",), problems)}
    for name, server in (m.servers or {}).items():
        loc = ("prometheus", "servers", name)
        if name == DEFAULT_SERVER:
            problems.add(loc, "the name 'default' is the [prometheus] table itself; "
                         "pick another name")
            continue
        if server.url is None:
            problems.add((*loc, "url"), "required")
            continue
        servers[name] = _server(name, server, loc, problems)
    return servers


def _server(
    name: str, m: ServerModel, loc: tuple[str, ...], problems: Problems
) -> PrometheusServer:
    if m.bearer_token_file is not None and m.basic_auth is not None:
        problems.add((*loc, "basicAuth"), "set either bearerTokenFile or basicAuth, not both")
    if m.insecure_skip_verify and m.ca_file is not None:
        problems.add((*loc, "insecureSkipVerify"), "set either caFile or "
                     "insecureSkipVerify, not both")
    auth = m.basic_auth
    return PrometheusServer(**given(
        name=name, url=(m.url or DEFAULT_PROMETHEUS_URL).rstrip("/"),
        bearer_token_file=_path(m.bearer_token_file),
        basic_auth_username=auth.username if auth else None,
        basic_auth_password_file=_path(auth.password_file) if auth else None,
        headers=MappingProxyType(dict(m.headers)) if m.headers else None,
        ca_file=_path(m.ca_file), insecure_skip_verify=m.insecure_skip_verify,
        timeout=m.timeout,
        query_params=MappingProxyType(dict(m.query_params)) if m.query_params else None,
        max_response_bytes=m.max_response_bytes, max_series=m.max_series,
        max_sample_age=m.max_sample_age, follow_redirects=m.follow_redirects,
    ))


def kubernetes_settings(model: KubernetesModel | None, problems: Problems) -> KubernetesSettings:
    m = model or KubernetesModel()
    if m.in_cluster and (m.kubeconfig is not None or m.context is not None):
        problems.add(("kubernetes", "inCluster"),
                     "inCluster = true uses the service account: drop kubeconfig and context")
    return KubernetesSettings(**given(
        in_cluster=m.in_cluster, kubeconfig=_path(m.kubeconfig), context=m.context,
        request_timeout=m.request_timeout, watch_scope=m.watch_scope,
    ))
