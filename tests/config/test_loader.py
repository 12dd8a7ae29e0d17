"""Loading a valid config: every key lands in the right field, defaults fill the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.algorithm import (
    AlgorithmSettings,
    MetricSourceType,
    MetricTargetType,
    PolicyType,
    RequestsBasis,
    SelectPolicy,
)
from autoscaler.config import (
    Config,
    ConfigError,
    ConfigIssue,
    DaemonSettings,
    Fallback,
    KubernetesSettings,
    MetricQuery,
    ScaleTargetRef,
    load_config,
    parse_config,
)
from autoscaler.errors import InvalidConfigError
from tests.config.helpers import TARGET

FULL = """\
[daemon]
syncPeriod = "30s"
tolerance = "50m"
cpuInitializationPeriod = "2m"
initialReadinessDelay = 10
downscaleStabilization = "1m"
utilizationRequests = "spec"
concurrency = 4
listenAddress = "[::1]:9000"
dryRun = true
logFormat = "console"
logLevel = "debug"
stateFile = "/var/lib/a/state.json"
leaderElection = { enabled = true, leaseName = "as", leaseNamespace = "ops", leaseDuration = "20s", renewDeadline = "15s", retryPeriod = "3s" }

[kubernetes]
kubeconfig = "/k/config"
context = "prod"
requestTimeout = "3s"

[prometheus]
url = "https://prom:9090/"
bearerTokenFile = "/t"
caFile = "/ca.pem"
headers = { X-Org = "a" }
timeout = "4s"

[prometheus.servers.mimir]
url = "http://mimir/prometheus"
basicAuth = { username = "u", passwordFile = "/p" }
insecureSkipVerify = true
queryParams = { dedup = "true" }

[defaults]
minReplicas = 2
behavior.scaleDown = { stabilizationWindowSeconds = 60, selectPolicy = "Min" }

[[autoscaler]]
namespace = "shop"
scaleTargetRef = { apiVersion = "apps/v1", kind = "StatefulSet", name = "db" }
maxReplicas = 9
prometheus = "mimir"
syncPeriod = "1m"
utilizationRequests = "applied"
pausedReplicas = 3
fallback = { failureThreshold = 2, replicas = 5, allowScaleDown = true }
behavior.scaleDown.policies = [{ type = "Pods", value = 1, periodSeconds = 30 }]
behavior.scaleUp.tolerance = 0.2

[[autoscaler.metrics]]
type = "ContainerResource"
containerResource = { name = "memory", container = "app", requestsFrom = "kube-state-metrics", window = "2m", target = { type = "AverageValue", averageValue = "1.5Gi" } }

[[autoscaler.metrics]]
type = "Object"
object.describedObject = { apiVersion = "networking.k8s.io/v1", kind = "Ingress", name = "main" }
object.metric.name = "rps"
object.target = { type = "Value", value = "10k" }
object.query = 'sum(rate(x{namespace="${namespace}"}[1m]))'

[[autoscaler]]
namespace = "shop"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "web" }
maxReplicas = 4
minReplicas = 1
"""


@pytest.fixture(scope="module")
def config() -> Config:
    return parse_config(FULL)


def test_daemon_settings(config: Config) -> None:
    """Every [daemon] key, durations in seconds, tolerance from a quantity."""
    assert config.daemon == DaemonSettings(
        sync_period=30.0, concurrency=4, listen_address="[::1]:9000", dry_run=True,
        log_format="console", log_level="debug", state_file=Path("/var/lib/a/state.json"),
        algorithm=AlgorithmSettings(tolerance=0.05, cpu_initialization_period=120.0,
                                    initial_readiness_delay=10.0, downscale_stabilization=60.0,
                                    utilization_requests=RequestsBasis.SPEC),
        leader_election=config.daemon.leader_election,
    )
    election = config.daemon.leader_election
    assert (election.enabled, election.lease_name, election.lease_namespace) == (True, "as", "ops")
    assert (election.lease_duration, election.renew_deadline, election.retry_period) == (
        20.0, 15.0, 3.0)


def test_kubernetes_settings(config: Config) -> None:
    """Kubeconfig path, context and timeout; in-cluster left to auto-detection."""
    assert config.kubernetes == KubernetesSettings(
        in_cluster=None, kubeconfig=Path("/k/config"), context="prod", request_timeout=3.0)


def test_prometheus_servers(config: Config) -> None:
    """[prometheus] is "default"; extra servers keep their own auth, TLS and params."""
    assert set(config.prometheus_servers) == {"default", "mimir"}
    default = config.prometheus
    assert config.prometheus_servers["default"] is default
    assert (default.url, default.bearer_token_file, default.ca_file, dict(default.headers),
            default.timeout) == ("https://prom:9090", Path("/t"), Path("/ca.pem"), {"X-Org": "a"},
                                 4.0)
    mimir = config.prometheus_servers["mimir"]
    assert (mimir.basic_auth_username, mimir.basic_auth_password_file) == ("u", Path("/p"))
    assert mimir.insecure_skip_verify
    assert dict(mimir.query_params) == {"dedup": "true"}
    assert mimir.timeout == 10.0
    assert mimir.bearer_token_file is None


def test_target_fields(config: Config) -> None:
    """Key, reference, server, period, pause and fallback of a target."""
    db = config.targets[0]
    assert db.key == "shop/StatefulSet/db"
    assert db.scale_target_ref == ScaleTargetRef(api_version="apps/v1", kind="StatefulSet",
                                                 name="db")
    assert (db.prometheus, db.sync_period, db.paused, db.paused_replicas) == ("mimir", 60.0,
                                                                               False, 3)
    assert db.fallback == Fallback(failure_threshold=2, replicas=5, allow_scale_down=True)
    assert config.server_for(db).name == "mimir"
    assert db.spec.utilization_requests is RequestsBasis.APPLIED
    assert config.targets[1].spec.utilization_requests is None  # [daemon]'s applies


def test_metrics_and_queries(config: Config) -> None:
    """Metric specs in milli-units, aligned with their queries."""
    memory, rps = config.targets[0].spec.metrics
    assert (memory.type, memory.name, memory.container) == (
        MetricSourceType.CONTAINER_RESOURCE, "memory", "app")
    assert memory.target.average_value == 1536 * 2**20 * 1000
    assert (rps.type, rps.name, rps.described_object_kind) == (MetricSourceType.OBJECT, "rps",
                                                               "Ingress")
    assert (rps.target.type, rps.target.value) == (MetricTargetType.VALUE, 10_000_000)
    assert config.targets[0].metric_queries == (
        MetricQuery(query=None, requests_source="kube-state-metrics", window=120.0),
        MetricQuery(query='sum(rate(x{namespace="${namespace}"}[1m]))'),
    )


def test_defaults_merge_into_each_target(config: Config) -> None:
    """[defaults] tables merge key by key under a target's own; its own values win."""
    db, web = config.targets
    down = db.spec.behavior and db.spec.behavior.scale_down
    assert down
    assert (down.stabilization_window_seconds, down.select_policy) == (
        60, SelectPolicy.MIN)
    assert down.policies
    assert down.policies[0].type is PolicyType.PODS
    assert db.spec.behavior
    assert db.spec.behavior.scale_up
    assert db.spec.behavior.scale_up.tolerance == 0.2
    assert (db.spec.min_replicas, web.spec.min_replicas) == (2, 1)
    web_down = web.spec.behavior and web.spec.behavior.scale_down
    assert web_down
    assert web_down.policies is None


def test_bare_target_gets_upstream_defaults() -> None:
    """minReplicas 1, cpu at 80 %, the built-in query, no behavior, the daemon's period."""
    (target,) = parse_config(TARGET).targets
    assert (target.spec.min_replicas, target.spec.behavior, target.sync_period) == (1, None, 15.0)
    (metric,) = target.spec.metrics
    assert (metric.type, metric.name, metric.target.average_utilization) == (
        MetricSourceType.RESOURCE, "cpu", 80)
    assert target.metric_queries == (MetricQuery(query=None, requests_source="pods",
                                                 window=60.0),)
    assert (target.prometheus, target.paused, target.fallback) == ("default", False, None)
    assert target.spec.utilization_requests is None
    assert DaemonSettings().algorithm.utilization_requests is RequestsBasis.APPLIED


def test_empty_file_is_a_config_without_targets() -> None:
    """Every setting has a default; Prometheus defaults to localhost:9090."""
    config = parse_config(b"")
    assert config.targets == ()
    assert config.prometheus.url == "http://localhost:9090"
    assert config.daemon == DaemonSettings()
    assert config.source is None


def test_scale_to_zero_with_external_metric() -> None:
    """minReplicas 0 is accepted next to an External metric."""
    text = TARGET + ("minReplicas = 0\nmetrics = [{ type = \"External\", external = { metric = "
                     "{ name = \"q\" }, target = { type = \"Value\", value = 3 }, query = 'sum(q)'"
                     " } }]\n")
    assert parse_config(text).targets[0].spec.min_replicas == 0


def test_load_config_reads_the_file(tmp_path: Path) -> None:
    """load_config keeps the path as the config's source."""
    path = tmp_path / "autoscaler.toml"
    path.write_text(TARGET)
    assert load_config(path).source == path


def test_unreadable_file(tmp_path: Path) -> None:
    """A missing file is a ConfigError naming the file."""
    with pytest.raises(ConfigError, match="cannot read the config") as caught:
        load_config(tmp_path / "missing.toml")
    assert caught.value.issues[0].file == str(tmp_path / "missing.toml")


def test_error_text_is_one_issue_per_line() -> None:
    """str(ConfigError) is FILE:LINE: PATH: message per issue, and it is an InvalidConfigError."""
    with pytest.raises(InvalidConfigError) as caught:
        parse_config(TARGET + "minReplicas = 0\n[kubernetes]\nnope = 1\n", source="a.toml")
    assert str(caught.value).splitlines() == [
        "a.toml:5: autoscaler[0].minReplicas: 0 is allowed only with at least one Object or "
        "External metric (upstream's HPAScaleToZero)",
        "a.toml:7: kubernetes.nope: unknown key; expected one of: context, inCluster, kubeconfig, "
        "requestTimeout, watchScope",
    ]


def test_issue_without_line() -> None:
    """An issue whose line is unknown prints FILE: PATH: message."""
    issue = ConfigIssue(file="a.toml", line=None, path="daemon", message="bad")
    assert str(issue) == "a.toml: daemon: bad"


def test_not_utf8() -> None:
    """Bytes that are not UTF-8 are one issue, not an exception."""
    with pytest.raises(ConfigError, match="not UTF-8"):
        parse_config(b"\xff\xfe")


@pytest.mark.parametrize(("prediction", "history_query"), [
    ('{ model = "seasonalNaive" }', None),
    ("{ model = \"holtWinters\", historyQuery = 'sum(rps{app=\"${name}\"})' }",
     'sum(rps{app="${name}"})'),
], ids=["derived", "history-query"])
def test_a_history_query_lands_on_the_metrics_query(prediction: str,
                                                    history_query: str | None) -> None:
    """``prediction.historyQuery`` is kept with the metric's query settings (the adapter
    reads it there); without it the history is derived from ``query``."""
    (target,) = parse_config(TARGET + "[[autoscaler.metrics]]\ntype = \"Pods\"\n"
                             "pods.metric.name = \"rps\"\npods.target = { type = "
                             "\"AverageValue\", averageValue = 5 }\npods.query = "
                             "'sum by (pod) (rps{${pod_selector}})'\n"
                             f"prediction = {prediction}\n").targets
    assert target.metric_queries[0].history_query == history_query
    assert target.predictions[0] is not None


@pytest.mark.parametrize(("defaults", "own", "period"), [
    ("", "syncPeriodSeconds = 5", 5.0),
    ("", 'syncPeriod = "5s"', 5.0),
    ("", "syncPeriodSeconds = 3600", 3600.0),
    ("", "syncPeriodSeconds = 1", 1.0),
    ("syncPeriodSeconds = 20", "", 20.0),
    ('syncPeriod = "20s"', "syncPeriodSeconds = 5", 5.0),
    ("syncPeriodSeconds = 20", 'syncPeriod = "5s"', 5.0),
    ("", "", 15.0),
], ids=["seconds", "duration-alias", "an-hour", "one-second", "from-defaults",
        "own-seconds-over-default-duration", "own-duration-over-default-seconds", "daemon"])
def test_sync_period_by_either_name(defaults: str, own: str, period: float) -> None:
    """syncPeriodSeconds (KEP-6003's name) and syncPeriod (its duration alias) set the same
    period; a target's own, by either name, replaces the default's by either name."""
    text = f"[defaults]\n{defaults}\n\n{TARGET}{own}\n"
    (target,) = parse_config(text).targets
    assert target.sync_period == period


def test_metric_source_is_accepted_as_a_manifest_has_it() -> None:
    """KEP-6382's metric.source.apiGroup naming another provider loads (the query fetches)."""
    text = TARGET + ('metrics = [{ type = "Pods", pods = { metric = { name = "queued", source = '
                     '{ apiGroup = "modelserver.example.com" } }, target = { type = '
                     '"AverageValue", averageValue = 5 }, query = \'queued{${pod_selector}}\' '
                     "} }]\n")
    (metric,) = parse_config(text).targets[0].spec.metrics
    assert (metric.type, metric.name) == (MetricSourceType.PODS, "queued")
