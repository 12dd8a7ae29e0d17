"""Condition types, condition and Event reasons, named as upstream's HPA reports them, plus the
explain vocabulary.

Upstream's reasons are the public contract (``kubectl describe hpa`` users know them, and
``kubectl get events --field-selector reason=FailedGetScale`` finds them), so they are kept
verbatim; the messages beside them speak of this autoscaler, not of upstream's HPA
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


class EventReason(StrEnum):
    """Reasons of the Events recorded on a target, in one place: upstream's and ours.

    An Event about a failed read or metric carries the condition's reason, as upstream's
    does (``Reason.FAILED_GET_SCALE``, ``MetricOutcome.failure_reason``); these are the rest.
    """

    # upstream pkg/controller/podautoscaler/horizontal.go
    SUCCESSFUL_RESCALE = "SuccessfulRescale"
    FAILED_RESCALE = "FailedRescale"
    """A scale write failed or was held (also the AbleToScale reason's Event)."""
    FAILED_COMPUTE_METRICS_REPLICAS = "FailedComputeMetricsReplicas"
    # ours
    WOULD_SCALE = "WouldScale"
    """Dry run: what a live daemon would have written (and, in a plan, the AbleToScale
    condition's reason)."""
    SCALE_DRIFT = "ScaleDrift"
    """Replicas changed between passes without our write (GitOps, kubectl scale)."""
    AUTOSCALER_CONFLICT = "AutoscalerConflict"
    """Another HPA or KEDA ScaledObject targets the same object: we do not act on it."""
    FAILED_EVALUATION = "FailedEvaluation"
    """The target's evaluation raised; it is held (also the AbleToScale condition's reason)."""
    SHADOW_DISAGREEMENT = "ShadowDisagreement"
    """Shadow mode: our desired count differs from the owning HPA's."""
    HISTORY_UNREADABLE = "HistoryUnreadable"
    """The saved history could not be decoded: every target's windows start fresh."""
    STRANDED_AT_ZERO = "StrandedAtZero"
    """At a zero this daemon did not make (or cannot tell it made), an activation metric is
    active: work waits and nothing serves it (``runtime/zero_owner.py``)."""


def rescale_message(new_size: int, reason: str) -> str:
    """Upstream's rescale Event message: ``New size: %d; reason: %s``."""
    return f"New size: {new_size}; reason: {reason}"


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
