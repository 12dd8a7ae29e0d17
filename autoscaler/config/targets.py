"""One ``[[autoscaler]]`` table (already merged over ``[defaults]``) into a ``TargetConfig``.

The schema has checked each field; this module checks upstream's rules that span fields
(``ValidateHorizontalPodAutoscalerSpec``): bounds, the metric source table matching
``type``, the target field matching ``target.type``, a query wherever no built-in one
exists, scale-to-zero only with an Object or External metric, and a known Prometheus.
"""

from __future__ import annotations

from collections.abc import Collection

from pydantic import ValidationError

from autoscaler.algorithm import (
    AutoscalerSpec,
    Behavior,
    MetricSourceType,
    MetricSpec,
    MetricTarget,
    MetricTargetType,
    PolicyType,
    RequestsBasis,
    ScalingPolicy,
    ScalingRules,
    SelectPolicy,
    parse_milli,
)
from autoscaler.algorithm.activation import ScaleToZero
from autoscaler.config.fields import show
from autoscaler.config.issues import Loc, Problems, did_you_mean
from autoscaler.config.prediction_table import convert_prediction
from autoscaler.config.query import known_placeholders
from autoscaler.config.schedule_tables import convert_schedules
from autoscaler.config.schema import (
    SOURCE_KEYS,
    BehaviorModel,
    ContainerResourceSourceModel,
    ExternalSourceModel,
    MetricModel,
    MetricTargetModel,
    ObjectSourceModel,
    ResourceSourceModel,
    RulesModel,
    SourceModel,
    TargetModel,
)
from autoscaler.config.settings import given
from autoscaler.config.validated import (
    DEFAULT_SERVER,
    Fallback,
    MetricQuery,
    ScaleTargetRef,
    TargetConfig,
    target_key,
)

BUILT_IN_RESOURCES = frozenset({"cpu", "memory"})
"""Resources with a built-in cAdvisor query (``adapters/prometheus/queries.py``)."""

DEFAULT_METRIC = MetricSpec(
    type=MetricSourceType.RESOURCE, name="cpu",
    target=MetricTarget(type=MetricTargetType.UTILIZATION, average_utilization=80),
)
"""Upstream's default when ``metrics`` is empty: cpu at 80 % of the requests."""

_ALLOWED_TARGETS: dict[str, tuple[str, ...]] = {
    "Resource": ("Utilization", "AverageValue"),
    "ContainerResource": ("Utilization", "AverageValue"),
    "Pods": ("AverageValue",),
    "Object": ("Value", "AverageValue"),
    "External": ("Value", "AverageValue"),
}
_TARGET_FIELDS = {
    "Utilization": "averageUtilization", "Value": "value", "AverageValue": "averageValue",
}
DEFAULT_METRIC_GROUPS = {
    "Pods": "custom.metrics.k8s.io", "Object": "custom.metrics.k8s.io",
    "External": "external.metrics.k8s.io",
}
"""The API group each metric type is read from when ``metric.source`` names none (KEP-6382)."""


def convert_target(
    model: TargetModel, *, loc: Loc, servers: Collection[str], sync_period: float,
    problems: Problems, dropped: Collection[str] = frozenset(),
) -> TargetConfig | None:
    """The target, or ``None`` after adding every problem found to ``problems``.

    ``dropped`` names top-level keys already reported as invalid and removed: rules that
    depend on them are skipped rather than reported against a value the user did not write.
    A target converted with keys dropped is only good for finding duplicates.
    """
    before = len(problems.items)
    for key, value in (("namespace", model.namespace), ("scaleTargetRef", model.scale_target_ref),
                       ("maxReplicas", model.max_replicas)):
        if value is None and key not in dropped:
            problems.add((*loc, key), "required")
    pairs = [_metric(m, (*loc, "metrics", i), problems) for i, m in enumerate(model.metrics or ())]
    _check_bounds(model, loc, pairs, problems, dropped)
    server = model.prometheus or DEFAULT_SERVER
    if server not in servers:
        problems.add((*loc, "prometheus"), f"unknown Prometheus server {show(server)}"
                     f"{did_you_mean(server, servers, listing='known servers')}")
    predictions = tuple(
        convert_prediction(m.prediction, loc=(*loc, "metrics", i, "prediction"), problems=problems)
        for i, m in enumerate(model.metrics or ()))
    schedules = convert_schedules(model.schedules, loc=loc, problems=problems,
                                  min_replicas=model.min_replicas, max_replicas=model.max_replicas)
    ref = model.scale_target_ref
    if len(problems.items) > before or ref is None or model.namespace is None:
        return None
    if model.max_replicas is None:
        return None
    spec = AutoscalerSpec(
        **given(min_replicas=model.min_replicas), max_replicas=model.max_replicas,
        metrics=tuple(s for s, _ in pairs if s) or (DEFAULT_METRIC,),
        behavior=_behavior(model.behavior),
        utilization_requests=None if model.utilization_requests is None
        else RequestsBasis(model.utilization_requests),
    )
    f = model.fallback
    return TargetConfig(
        key=target_key(model.namespace, ref.kind, ref.name), namespace=model.namespace,
        scale_target_ref=ScaleTargetRef(api_version=ref.api_version, kind=ref.kind,
                                        name=ref.name),
        spec=spec, metric_queries=tuple(q for _, q in pairs if q) or (MetricQuery(query=None),),
        prometheus=server, sync_period=_sync_period(model) or sync_period,
        **given(paused=model.paused, paused_replicas=model.paused_replicas),
        fallback=None if f is None else Fallback(**given(
            failure_threshold=f.failure_threshold, replicas=f.replicas,
            allow_scale_down=f.allow_scale_down)),
        schedules=schedules,
        scale_to_zero=_scale_to_zero(model) if spec.min_replicas == 0 else None,
        **given(shadow=model.shadow),
        predictions=predictions if any(predictions) else (),
    )


SYNC_PERIOD_NAMES = ("syncPeriodSeconds", "syncPeriod")
"""A target's sync period by upstream's name (KEP-6003) and by its alias, the duration."""


def _sync_period(model: TargetModel) -> float | None:
    """The target's own period in seconds, by whichever name it was given."""
    if model.sync_period_seconds is not None:
        return float(model.sync_period_seconds)
    return model.sync_period


def check_sync_period_names(table: dict[str, object], *, loc: Loc, problems: Problems) -> None:
    """One table ([defaults] or a target) gives its sync period once, by one name."""
    if all(name in table for name in SYNC_PERIOD_NAMES):
        problems.add((*loc, SYNC_PERIOD_NAMES[0]),
                     f"set either {' or '.join(SYNC_PERIOD_NAMES)}, not both")


def _scale_to_zero(model: TargetModel) -> ScaleToZero:
    """The activation thresholds (0 unless given) of the Object and External metrics, and
    the cooldowns (KEDA's defaults unless given)."""
    thresholds = tuple(
        parse_milli(source.activation_threshold or 0)
        if isinstance(source := m.sources().get(SOURCE_KEYS[m.type]),
                      ObjectSourceModel | ExternalSourceModel) else None
        for m in model.metrics or ())
    return ScaleToZero(activation_thresholds=thresholds, **given(
        cooldown=model.cooldown_period, initial_cooldown=model.initial_cooldown_period))


def check_metrics(raw: object, *, loc: Loc, problems: Problems) -> None:
    """Cross-field checks of the metrics that are valid on their own, when others are not."""
    for index, item in enumerate(raw if isinstance(raw, list) else ()):
        try:
            model = MetricModel.model_validate(item)
        except ValidationError:
            continue  # already reported with the whole target
        _metric(model, (*loc, "metrics", index), problems)


def _check_bounds(
    model: TargetModel, loc: Loc, pairs: list[tuple[MetricSpec | None, MetricQuery | None]],
    problems: Problems, dropped: Collection[str],
) -> None:
    low, high = model.min_replicas, model.max_replicas
    if low is not None and high is not None and low > high:
        problems.add((*loc, "maxReplicas"),
                     f"must be greater than or equal to minReplicas ({low}), got {high}")
    types = {spec.type for spec, _ in pairs if spec}
    scales_to_zero = {MetricSourceType.OBJECT, MetricSourceType.EXTERNAL}
    if low == 0 and "metrics" not in dropped and not types & scales_to_zero:
        problems.add((*loc, "minReplicas"), "0 is allowed only with at least one Object or "
                     "External metric (upstream's HPAScaleToZero)")
    f, floor = model.fallback, 1 if low is None else low
    in_range = f is None or high is None or "minReplicas" in dropped or floor <= f.replicas <= high
    if f is not None and not in_range:
        problems.add((*loc, "fallback", "replicas"),
                     f"must be between minReplicas ({floor}) and maxReplicas ({high}), "
                     f"got {f.replicas}")


def _metric(
    model: MetricModel, loc: Loc, problems: Problems
) -> tuple[MetricSpec | None, MetricQuery | None]:
    """The metric and its query, or ``(None, None)`` after adding its problems."""
    key, sources = SOURCE_KEYS[model.type], model.sources()
    for other in sources.keys() - {key}:
        problems.add((*loc, other), f"must not be set for type {show(model.type)} "
                     f"(its details go in {show(key)})")
    source = sources.get(key)
    if source is None:
        problems.add((*loc, key), f"required for type {show(model.type)}")
        return None, None
    before = len(problems.items)
    _check_source_group(model.type, source, (*loc, key, "metric", "source", "apiGroup"),
                        problems)
    target = _target(model.type, source.target, (*loc, key, "target"), problems)
    name = _source_name(source)
    if source.query is None and (
        model.type not in {"Resource", "ContainerResource"} or name not in BUILT_IN_RESOURCES
    ):
        problems.add((*loc, key, "query"), _query_required(model.type, name))
    if target is None or len(problems.items) > before:
        return None, None
    spec = MetricSpec(
        type=MetricSourceType(model.type), name=name, target=target,
        container=source.container if isinstance(source, ContainerResourceSourceModel) else None,
        described_object_kind=(
            source.described_object.kind if isinstance(source, ObjectSourceModel) else None),
    )
    requests = source.requests_from if isinstance(source, ResourceSourceModel) else None
    when_empty = source.when_empty if isinstance(
        source, ObjectSourceModel | ExternalSourceModel) else None
    history = model.prediction.history_query if model.prediction else None
    query = MetricQuery(query=source.query, **given(
        window=source.window, requests_source=requests, when_empty=when_empty,
        history_query=history))
    return spec, query


def _check_source_group(metric_type: str, source: SourceModel, loc: Loc,
                        problems: Problems) -> None:
    """KEP-6382's rule: ``metric.source.apiGroup`` names another provider than the default
    one for the metric's type (the default is what leaving ``source`` out means)."""
    if isinstance(source, ResourceSourceModel) or source.metric.source is None:
        return
    group = source.metric.source.api_group
    if group == DEFAULT_METRIC_GROUPS[metric_type]:
        problems.add(loc, f"{show(group)} is the default API group for {metric_type} metrics; "
                     "leave source out")


def _source_name(source: SourceModel) -> str:
    """The resource's name for Resource metrics, the metric's name for the others."""
    return source.name if isinstance(source, ResourceSourceModel) else source.metric.name


def _query_required(metric_type: str, name: str) -> str:
    if metric_type in {"Resource", "ContainerResource"}:
        return (f"required: resource {show(name)} has no built-in query (only "
                f"{', '.join(sorted(BUILT_IN_RESOURCES))}); write its PromQL")
    return f"required: the PromQL for {metric_type} metric {show(name)} (placeholders: " \
           f"{known_placeholders()})"


def _target(
    metric_type: str, model: MetricTargetModel, loc: Loc, problems: Problems
) -> MetricTarget | None:
    allowed = _ALLOWED_TARGETS[metric_type]
    if model.type not in allowed:
        problems.add((*loc, "type"), f"{show(model.type)} is not allowed for a {metric_type} "
                     f"metric; use {' or '.join(map(show, allowed))}")
        return None
    values = {"averageUtilization": model.average_utilization,
              "value": model.value, "averageValue": model.average_value}
    wanted = _TARGET_FIELDS[model.type]
    for field, value in values.items():
        if field != wanted and value is not None:
            problems.add((*loc, field), f"must not be set for target type {show(model.type)}")
    if values[wanted] is None:
        problems.add((*loc, wanted), f"required for target type {show(model.type)}")
        return None
    return MetricTarget(
        type=MetricTargetType(model.type), average_utilization=model.average_utilization,
        value=None if model.value is None else parse_milli(model.value),
        average_value=None if model.average_value is None else parse_milli(model.average_value),
    )


def _behavior(model: BehaviorModel | None) -> Behavior | None:
    if model is None:
        return None
    return Behavior(scale_up=_rules(model.scale_up), scale_down=_rules(model.scale_down))


def _rules(model: RulesModel | None) -> ScalingRules | None:
    if model is None:
        return None
    policies = None if model.policies is None else tuple(
        ScalingPolicy(type=PolicyType(p.type), value=p.value, period_seconds=p.period_seconds)
        for p in model.policies
    )
    return ScalingRules(
        stabilization_window_seconds=model.stabilization_window_seconds,
        select_policy=None if model.select_policy is None else SelectPolicy(model.select_policy),
        policies=policies, tolerance=model.tolerance,
    )
