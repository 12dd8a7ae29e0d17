"""The TOML file's shape as pydantic models: types, ranges and unknown keys, field by field.

Keys are HPA's camelCase (``minReplicas``, ``scaleTargetRef``) so a manifest transliterates;
attributes are snake_case through the camel alias generator. Models are strict (TOML has
types: ``"3"`` is not a replica count) and forbid unknown keys. Optional fields default to
``None`` meaning "not given": the converter fills defaults, so each default lives in one
place (``model.py``). Rules that involve several fields are the converter's
(``targets.py``, ``settings.py``), which knows the paths to report.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from autoscaler.config.fields import (
    ApiGroup,
    ApiVersion,
    ByteSize,
    DnsLabel,
    Duration,
    HeaderName,
    HeaderValue,
    HostPort,
    Kind,
    NonEmpty,
    NonNegativeQuantity,
    ObjectName,
    PositiveDuration,
    PositiveQuantity,
    QueryParamName,
    QueryParamValue,
    QueryTemplate,
    ServerName,
    Tolerance,
    Url,
    above,
    at_least,
    at_most,
    between,
    fail,
    int32,
    longest,
    shortest,
    whole_seconds,
)

HOUR, DAY = 3600.0, 86400.0

# Durations are bounded where a value would not work: a pass more often than once a second
# never lets a metric window fill, and nothing the daemon waits for is worth more than an
# hour (upstream's longest window, stabilizationWindowSeconds, is 3600). The upper bounds
# also keep every duration inside what timers and datetimes can hold.
SyncPeriod = Annotated[Duration, shortest(1), longest(HOUR)]

SYNC_PERIOD_SECONDS_MIN = 1
"""The shortest sync period a target may set, by either name (``syncPeriodSeconds``, or
its alias the duration ``syncPeriod``). Ours, as ``[daemon].syncPeriod``'s floor: a second.
KEP-6003's latest draft (not merged) bounds upstream's ``spec.syncPeriodSeconds`` to
[3, 3600]; this one constant follows it when it merges (docs/upstream.md)."""
SYNC_PERIOD_SECONDS_MAX = 3600
"""KEP-6003's upper bound, an hour: every draft has it."""
TargetSyncPeriod = Annotated[Duration, shortest(SYNC_PERIOD_SECONDS_MIN),
                             longest(SYNC_PERIOD_SECONDS_MAX)]
SyncPeriodSeconds = Annotated[int, between(SYNC_PERIOD_SECONDS_MIN, SYNC_PERIOD_SECONDS_MAX)]
UpToAnHour = Annotated[Duration, longest(HOUR)]
PositiveUpToAnHour = Annotated[PositiveDuration, longest(HOUR)]
Window = Annotated[Duration, shortest(1), longest(DAY)]
UpToADay = Annotated[Duration, longest(DAY)]
"""A query's averaging window: ``rate()`` needs two samples, so at least a second."""
LeaseDuration = Annotated[Duration, shortest(1), longest(HOUR), whole_seconds]
"""The Lease stores it as whole ``leaseDurationSeconds``."""
ScheduleDuration = Annotated[PositiveDuration, longest(366 * DAY)]
Replicas = Annotated[int, at_least(0), int32]


class Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, alias_generator=to_camel,
        validate_by_name=False, validate_by_alias=True,
    )


# --- daemon, Prometheus, Kubernetes ---------------------------------------------------------

LogLevel = Literal["debug", "info", "warning", "error", "critical"]


class LeaderElectionModel(Model):
    enabled: bool | None = None
    lease_name: ObjectName | None = None
    lease_namespace: DnsLabel | None = None
    lease_duration: LeaseDuration | None = None
    renew_deadline: PositiveUpToAnHour | None = None
    retry_period: PositiveUpToAnHour | None = None


class ShardingModel(Model):
    mode: Literal["leader", "dynamic"] | None = None
    placement: Literal["namespace", "target"] | None = None
    standby: Literal["warm", "none"] | None = None
    lease_duration: LeaseDuration | None = None
    renew_deadline: PositiveUpToAnHour | None = None
    retry_period: PositiveUpToAnHour | None = None


UtilizationRequests = Literal["applied", "spec"]
"""Which requests Utilization divides by while a pod is resized in place (``RequestsBasis``)."""


class DaemonModel(Model):
    sync_period: SyncPeriod | None = None
    tolerance: Tolerance | None = None
    utilization_requests: UtilizationRequests | None = None
    cpu_initialization_period: UpToAnHour | None = None
    initial_readiness_delay: UpToAnHour | None = None
    downscale_stabilization: UpToAnHour | None = None
    concurrency: Annotated[int, at_least(1)] | None = None
    listen_address: HostPort | None = None
    dry_run: bool | None = None
    log_format: Literal["json", "console"] | None = None
    log_level: LogLevel | None = None
    state_file: NonEmpty | None = None
    leader_election: LeaderElectionModel | None = None
    sharding: ShardingModel | None = None


class BasicAuthModel(Model):
    username: NonEmpty
    password_file: NonEmpty


class ServerModel(Model):
    url: Url | None = None
    bearer_token_file: NonEmpty | None = None
    basic_auth: BasicAuthModel | None = None
    headers: dict[HeaderName, HeaderValue] | None = None
    ca_file: NonEmpty | None = None
    insecure_skip_verify: bool | None = None
    timeout: PositiveUpToAnHour | None = None
    query_params: dict[QueryParamName, QueryParamValue] | None = None
    max_response_bytes: Annotated[ByteSize, at_least(1024)] | None = None
    max_series: Annotated[int, at_least(1), int32] | None = None
    max_sample_age: PositiveUpToAnHour | None = None
    follow_redirects: Literal["same-origin", "never", "any"] | None = None


class PrometheusModel(ServerModel):
    servers: dict[ServerName, ServerModel] | None = None


class KubernetesModel(Model):
    in_cluster: bool | None = None
    kubeconfig: NonEmpty | None = None
    context: NonEmpty | None = None
    request_timeout: PositiveUpToAnHour | None = None
    watch_scope: Literal["cluster", "namespaces"] | None = None


# --- metrics (autoscaling/v2 MetricSpec) ----------------------------------------------------

MetricType = Literal["Resource", "ContainerResource", "Pods", "Object", "External"]
TargetType = Literal["Utilization", "Value", "AverageValue"]
RequestsFrom = Literal["pods", "kube-state-metrics"]


class MetricTargetModel(Model):
    type: TargetType
    average_utilization: Annotated[int, above(0), int32] | None = None
    average_value: PositiveQuantity | None = None
    value: PositiveQuantity | None = None


class MetricSourceReferenceModel(Model):
    """KEP-6382's ``MetricSourceReference``: which metrics API group serves the metric."""

    api_group: ApiGroup


class MetricIdentifierModel(Model):
    name: NonEmpty
    selector: dict[str, Any] | None = None
    """A LabelSelector, accepted so manifests transliterate; the PromQL does the selecting."""
    source: MetricSourceReferenceModel | None = None
    """The provider the HPA would ask (KEP-6382), accepted so manifests transliterate; the
    PromQL is what fetches the metric here."""


class ObjectReferenceModel(Model):
    api_version: ApiVersion | None = None
    kind: Kind
    name: ObjectName


class _QueryModel(Model):
    query: QueryTemplate | None = None
    window: Window | None = None


class ResourceSourceModel(_QueryModel):
    name: NonEmpty
    target: MetricTargetModel
    requests_from: RequestsFrom | None = None


class ContainerResourceSourceModel(ResourceSourceModel):
    container: NonEmpty


class PodsSourceModel(_QueryModel):
    metric: MetricIdentifierModel
    target: MetricTargetModel


class _ActivationModel(_QueryModel):
    """What only an Object or External metric has: it can be read at zero pods."""

    activation_threshold: NonNegativeQuantity | None = None
    """KEDA's: with minReplicas = 0, the target wakes when the value is above it."""
    when_empty: Literal["invalid", "zero"] | None = None
    """An answer with no series: invalid (hold) by default, or 0 (KEDA's ignoreNullValues)."""


class ObjectSourceModel(_ActivationModel):
    described_object: ObjectReferenceModel
    metric: MetricIdentifierModel
    target: MetricTargetModel


class ExternalSourceModel(_ActivationModel):
    metric: MetricIdentifierModel
    target: MetricTargetModel


SourceModel = (
    ResourceSourceModel | ContainerResourceSourceModel | PodsSourceModel | ObjectSourceModel
    | ExternalSourceModel
)

SOURCE_KEYS: dict[str, str] = {
    "Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods",
    "Object": "object", "External": "external",
}
"""The table each metric type keeps its details in (HPA's ``MetricSpec`` layout)."""


class SmoothingModel(Model):
    level: Annotated[float, between(0, 1)]
    trend: Annotated[float, between(0, 1)]
    seasonal: Annotated[float, between(0, 1)]


class PredictionModel(Model):
    """A metric's ``prediction`` (issue #27; converted in ``config/prediction_table.py``)."""

    model: Literal["seasonalNaive", "linearTrend", "holtWinters"]
    season: Annotated[PositiveDuration, shortest(60), longest(28 * DAY)] | None = None
    step: Annotated[PositiveDuration, shortest(10), longest(DAY)] | None = None
    window: Annotated[PositiveDuration, longest(28 * DAY)] | None = None
    horizon: Annotated[PositiveDuration, longest(HOUR)] | None = None
    forecast_only: bool | None = None
    max_error_percent: Annotated[float, above(0), at_most(1000)] | None = None
    smoothing: SmoothingModel | None = None
    history_query: QueryTemplate | None = None


class MetricModel(Model):
    type: MetricType
    resource: ResourceSourceModel | None = None
    container_resource: ContainerResourceSourceModel | None = None
    pods: PodsSourceModel | None = None
    object_: ObjectSourceModel | None = Field(default=None, alias="object")
    external: ExternalSourceModel | None = None
    prediction: PredictionModel | None = None

    def sources(self) -> dict[str, SourceModel]:
        """The source tables that are set, by their TOML key."""
        found: dict[str, SourceModel | None] = {
            "resource": self.resource, "containerResource": self.container_resource,
            "pods": self.pods, "object": self.object_, "external": self.external,
        }
        return {key: value for key, value in found.items() if value is not None}


# --- behavior (HorizontalPodAutoscalerBehavior) ---------------------------------------------


class PolicyModel(Model):
    type: Literal["Pods", "Percent"]
    value: Annotated[int, above(0), int32]
    period_seconds: Annotated[int, between(1, 1800)]


def _some_policies(value: list[PolicyModel]) -> list[PolicyModel]:
    if not value:
        raise fail("must list at least one policy (leave policies out for the defaults)")
    return value


class RulesModel(Model):
    stabilization_window_seconds: Annotated[int, between(0, 3600)] | None = None
    select_policy: Literal["Max", "Min", "Disabled"] | None = None
    policies: Annotated[list[PolicyModel], AfterValidator(_some_policies)] | None = None
    tolerance: Tolerance | None = None


class BehaviorModel(Model):
    scale_up: RulesModel | None = None
    scale_down: RulesModel | None = None


# --- one target -----------------------------------------------------------------------------


class ScaleTargetRefModel(Model):
    api_version: ApiVersion
    kind: Kind
    name: ObjectName


class FallbackModel(Model):
    failure_threshold: Annotated[int, at_least(1), int32]
    replicas: Replicas
    allow_scale_down: bool | None = None


class ScheduleModel(Model):
    """One entry of a target's ``schedules`` (converted in ``config/schedule_tables.py``)."""

    name: NonEmpty | None = None
    timezone: NonEmpty | None = None
    cron: NonEmpty | None = None
    duration: ScheduleDuration | None = None
    start: NonEmpty | None = None
    end: NonEmpty | None = None
    days: list[NonEmpty] | None = None
    min_replicas: Replicas | None = None
    max_replicas: Annotated[int, at_least(1), int32] | None = None
    immediate: bool | None = None


class TargetModel(Model):
    """One ``[[autoscaler]]`` table, or ``[defaults]`` (which every target starts from)."""

    namespace: DnsLabel | None = None
    scale_target_ref: ScaleTargetRefModel | None = None
    min_replicas: Replicas | None = None
    max_replicas: Annotated[int, at_least(1), int32] | None = None
    metrics: list[MetricModel] | None = None
    behavior: BehaviorModel | None = None
    prometheus: ServerName | None = None
    sync_period_seconds: SyncPeriodSeconds | None = None
    """Upstream's name (KEP-6003's ``spec.syncPeriodSeconds``), whole seconds."""
    sync_period: TargetSyncPeriod | None = None
    """The same period as a duration: a documented alias, never both in one table."""
    utilization_requests: UtilizationRequests | None = None
    """This target's own choice; ``[daemon].utilizationRequests`` when left out."""
    paused: bool | None = None
    paused_replicas: Replicas | None = None
    fallback: FallbackModel | None = None
    schedules: list[ScheduleModel] | None = None
    cooldown_period: UpToADay | None = None
    """With minReplicas = 0: how long every activation metric must stay inactive before the
    target goes to 0 (KEDA's cooldownPeriod, default 300s)."""
    initial_cooldown_period: UpToADay | None = None
    """With minReplicas = 0: no scale to zero for this long after the daemon starts."""
    shadow: bool | None = None
    """Decide beside a live HPA or ScaledObject and report agreement; never write."""


class FileModel(Model):
    """The top level. Targets and defaults are checked after merging (``loader.py``)."""

    daemon: DaemonModel | None = None
    prometheus: PrometheusModel | None = None
    kubernetes: KubernetesModel | None = None
    defaults: dict[str, Any] | None = None
    autoscaler: list[dict[str, Any]] | None = None
