"""Kubernetes adapter: every API call the daemon makes, on kubernetes-asyncio.

``session`` (the one ApiClient), ``discovery`` (kind -> resource), ``scale`` (GET/PUT
``/scale`` with optimistic concurrency), ``pods`` (list-and-watch cache), ``events``
(aggregated core/v1 Events), ``owners`` (other autoscalers on the same target), ``drift``
(replicas changed under us), ``labels`` (selector strings), ``pod_json`` and ``pod_index``
(pods as the core sees them, indexed by label), ``reasons`` (event reasons), ``errors`` (the
boundary into ``autoscaler.errors``). ``leader`` and ``state`` hold the Lease elector and
the ConfigMap state store.
"""

from autoscaler.adapters.kube.discovery import Discovery, ResourceInfo
from autoscaler.adapters.kube.drift import Drift, DriftTracker
from autoscaler.adapters.kube.errors import RejectedError
from autoscaler.adapters.kube.events import EventRecorder, SpamPolicy
from autoscaler.adapters.kube.labels import Selector, parse_selector
from autoscaler.adapters.kube.owners import Owner, OwnerCheck
from autoscaler.adapters.kube.pods import Backoff, PodCache, WatchCounters
from autoscaler.adapters.kube.reasons import EventReason, EventType, successful_rescale_message
from autoscaler.adapters.kube.scale import (
    ObjectRef,
    Scale,
    ScaleClient,
    ScaleOutcome,
    scale_with_retry,
)
from autoscaler.adapters.kube.session import InClusterFiles, KubeSession

__all__ = [
    "Backoff", "Discovery", "Drift", "DriftTracker", "EventReason", "EventRecorder", "EventType",
    "InClusterFiles", "KubeSession", "ObjectRef", "Owner", "OwnerCheck", "PodCache",
    "RejectedError", "ResourceInfo", "Scale", "ScaleClient", "ScaleOutcome", "Selector",
    "SpamPolicy", "WatchCounters", "parse_selector", "scale_with_retry",
    "successful_rescale_message",
]
