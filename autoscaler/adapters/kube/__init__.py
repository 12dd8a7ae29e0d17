"""Kubernetes adapter: every API call the daemon makes, on kubernetes-asyncio.

``session`` (the one ApiClient), ``discovery`` (kind -> resource), ``structs`` (the values
the others share: an object reference, a Scale), ``scale`` (GET/PUT ``/scale`` with
optimistic concurrency), ``target_cache`` (list-and-watch cache of the apps/v1 workloads'
scales, so reads of those need no request), ``pod_cache`` (list-and-watch cache of pods),
``informer`` (list-and-watch of one kind in one namespace) and ``watch_cache`` (a cache's
kinds over a changing set of namespaces), which the caches share, ``events`` (aggregated
core/v1 Events), ``owners`` (other autoscalers on the same target), ``labels`` (selector
strings), ``pod_json`` and ``pod_index`` (pods as the core sees them, indexed by label),
``api_errors`` (the boundary into ``autoscaler.errors``). ``leader`` and ``configmap_store``
hold the Lease elector and the ConfigMap state store. ``lazy_client`` imports only the parts
of kubernetes-asyncio the daemon uses.
"""
# ruff: noqa: E402  (lazy_client must be installed before the first import of the library)

from autoscaler.adapters.kube import lazy_client

lazy_client.install()

from autoscaler.adapters.kube.api_errors import RejectedError
from autoscaler.adapters.kube.discovery import Discovery, ResourceInfo
from autoscaler.adapters.kube.events import EventRecorder, EventType, SpamPolicy
from autoscaler.adapters.kube.informer import Backoff, WatchCounters
from autoscaler.adapters.kube.labels import Selector, format_label_selector, parse_selector
from autoscaler.adapters.kube.owners import Owner, OwnerCheck
from autoscaler.adapters.kube.pod_cache import PodCache
from autoscaler.adapters.kube.scale import ScaleClient
from autoscaler.adapters.kube.session import InClusterFiles, KubeSession
from autoscaler.adapters.kube.structs import ObjectRef, Scale
from autoscaler.adapters.kube.target_cache import TargetCache, TargetCounters

__all__ = [
    "Backoff", "Discovery", "EventRecorder", "EventType", "InClusterFiles", "KubeSession",
    "ObjectRef", "Owner", "OwnerCheck", "PodCache", "RejectedError", "ResourceInfo", "Scale",
    "ScaleClient", "Selector", "SpamPolicy", "TargetCache", "TargetCounters", "WatchCounters",
    "format_label_selector", "parse_selector",
]
