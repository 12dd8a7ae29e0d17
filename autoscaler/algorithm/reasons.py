"""Condition types and reasons, named as upstream's HPA reports them, plus the explain vocabulary.

Upstream's reasons are the public contract (``kubectl describe hpa`` users know them), so they
are kept verbatim; the messages beside them speak of this autoscaler, not of upstream's HPA
controller. ``Step`` is our small, stable vocabulary for *why* a number came out as it did,
after the names in upstream's decision-trace proposal.
"""

from __future__ import annotations

from enum import StrEnum


class ConditionType(StrEnum):
    ABLE_TO_SCALE = "AbleToScale"
    SCALING_ACTIVE = "ScalingActive"
    SCALING_LIMITED = "ScalingLimited"
    SCALED_TO_ZERO = "ScaledToZero"
    """HPAScaleToZero (beta, 1.37): whether the controller itself took the target to 0."""
    PREDICTIVE_SCALING = "PredictiveScaling"
    """Ours (issue #27), only on targets with a ``prediction``: whether forecasts are used."""


class Reason(StrEnum):
    # AbleToScale
    SUCCEEDED_GET_SCALE = "SucceededGetScale"
    FAILED_GET_SCALE = "FailedGetScale"
    READY_FOR_NEW_SCALE = "ReadyForNewScale"
    SCALE_DOWN_STABILIZED = "ScaleDownStabilized"
    SCALE_UP_STABILIZED = "ScaleUpStabilized"
    SUCCEEDED_RESCALE = "SucceededRescale"
    FAILED_UPDATE_SCALE = "FailedUpdateScale"
    # ScalingActive
    VALID_METRIC_FOUND = "ValidMetricFound"
    SCALING_DISABLED = "ScalingDisabled"
    INVALID_SELECTOR = "InvalidSelector"
    AMBIGUOUS_SELECTOR = "AmbiguousSelector"
    FAILED_GET_RESOURCE_METRIC = "FailedGetResourceMetric"
    FAILED_GET_CONTAINER_RESOURCE_METRIC = "FailedGetContainerResourceMetric"
    FAILED_GET_PODS_METRIC = "FailedGetPodsMetric"
    FAILED_GET_OBJECT_METRIC = "FailedGetObjectMetric"
    FAILED_GET_EXTERNAL_METRIC = "FailedGetExternalMetric"
    INVALID_METRIC_SOURCE_TYPE = "InvalidMetricSourceType"
    # ScalingLimited
    DESIRED_WITHIN_RANGE = "DesiredWithinRange"
    TOO_FEW_REPLICAS = "TooFewReplicas"
    TOO_MANY_REPLICAS = "TooManyReplicas"
    SCALE_UP_LIMIT = "ScaleUpLimit"
    SCALE_DOWN_LIMIT = "ScaleDownLimit"
    SCALED_TO_ZERO = "ScaledToZero"
    NOT_SCALED_TO_ZERO = "NotScaledToZero"
    # PredictiveScaling (ours)
    FORECAST_ACTING = "ForecastActing"
    FORECAST_ONLY = "ForecastOnly"
    FORECAST_UNRELIABLE = "ForecastUnreliable"
    FORECAST_NOT_READY = "ForecastNotReady"


class Step(StrEnum):
    """Why the desired count is what it is, one entry per stage that shaped it."""

    METRIC_RECOMMENDATION = "MetricRecommendation"
    """The metrics proposed a new count."""
    WITHIN_TOLERANCE = "WithinTolerance"
    """Every metric's ratio was within tolerance: keep the current count."""
    STABILIZED = "Stabilized"
    """A stabilization window held the count against the proposal."""
    POLICY_LIMITED = "PolicyLimited"
    """A rate limit (behavior policy or the default scale-up limit) cut the change."""
    REPLICA_LIMIT = "ReplicaLimit"
    """minReplicas or maxReplicas bounded the result."""
    INVALID_METRICS = "InvalidMetrics"
    """Metrics were missing or invalid: no scale-down (or no scaling at all)."""
    SCALING_DISABLED = "ScalingDisabled"
    """The target is at 0 replicas and this daemon did not put it there (or scale-to-zero is
    not configured)."""
    ACTIVATED = "Activated"
    """At 0: an activation metric rose above its threshold; the target wakes up."""
    INACTIVE = "Inactive"
    """At 0: no activation metric is above its threshold; the target stays at 0."""
    DEACTIVATED = "Deactivated"
    """Every activation metric stayed at or below its threshold for the cooldown: to 0."""
