"""Event reasons, in one place: upstream HPA's own and the ones this daemon adds.

Upstream's reasons keep their exact spelling so dashboards and alerts written for the HPA
(``kubectl get events --field-selector reason=FailedGetScale``) keep working.
"""

from __future__ import annotations

from enum import StrEnum


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


class EventReason(StrEnum):
    # upstream pkg/controller/podautoscaler/horizontal.go
    SUCCESSFUL_RESCALE = "SuccessfulRescale"
    FAILED_RESCALE = "FailedRescale"
    FAILED_GET_SCALE = "FailedGetScale"
    FAILED_COMPUTE_METRICS_REPLICAS = "FailedComputeMetricsReplicas"
    FAILED_GET_RESOURCE_METRIC = "FailedGetResourceMetric"
    FAILED_GET_CONTAINER_RESOURCE_METRIC = "FailedGetContainerResourceMetric"
    FAILED_GET_PODS_METRIC = "FailedGetPodsMetric"
    FAILED_GET_OBJECT_METRIC = "FailedGetObjectMetric"
    FAILED_GET_EXTERNAL_METRIC = "FailedGetExternalMetric"
    SELECTOR_REQUIRED = "SelectorRequired"
    INVALID_SELECTOR = "InvalidSelector"
    # ours
    AUTOSCALER_CONFLICT = "AutoscalerConflict"
    """Another HPA or KEDA ScaledObject targets the same object: we do not act on it."""
    SCALE_DRIFT = "ScaleDrift"
    """Replicas changed between passes without our write (GitOps, kubectl scale)."""
    WOULD_SCALE = "WouldScale"
    """Dry run: what a live daemon would have written."""


def successful_rescale_message(new_size: int, reason: str) -> str:
    """Upstream's wording: ``New size: %d; reason: %s``."""
    return f"New size: {new_size}; reason: {reason}"
