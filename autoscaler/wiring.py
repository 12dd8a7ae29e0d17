"""Build the adapters a config asks for and bind them to the runtime's ports.

Used by ``run`` (the daemon) and ``plan`` (one pass that changes nothing), so both talk to
Prometheus and the API server through exactly the same code.
"""

from __future__ import annotations

import asyncio
import gc
import os
import zlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from kubernetes_asyncio.client import ApiClient

from autoscaler.adapters.kube.discovery import Discovery
from autoscaler.adapters.kube.events import EventRecorder
from autoscaler.adapters.kube.labels import parse_selector
from autoscaler.adapters.kube.owners import OwnerCache
from autoscaler.adapters.kube.pods import PodCache
from autoscaler.adapters.kube.scale import ScaleClient
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.adapters.kube.targets import TargetCache
from autoscaler.adapters.prometheus import PrometheusSource, TargetRequest
from autoscaler.algorithm import Pod
from autoscaler.config import Config, TargetConfig
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.ports import FetchedMetrics, MetricsWanted


class PodSelectorCache:
    """The runtime's ``PodPort`` over the watch cache: selectors parsed once, not per pass."""

    def __init__(self, cache: PodCache) -> None:
        self.cache = cache
        self._parsed: dict[str, object] = {}

    def pods_for(self, namespace: str, selector: str) -> Sequence[Pod]:
        parsed = self._parsed.get(selector)
        if parsed is None:
            parsed = self._parsed[selector] = parse_selector(selector)
        return self.cache.pods_for(namespace, parsed)  # type: ignore[arg-type]


class PrometheusMetrics:
    """The runtime's ``MetricsPort`` over the batched Prometheus source."""

    def __init__(self, source: PrometheusSource) -> None:
        self.source = source

    async def fetch_metrics(
        self, wanted: Sequence[MetricsWanted], *, deadline: float
    ) -> FetchedMetrics:
        requests = [
            TargetRequest(
                key=w.target.key, namespace=w.target.namespace,
                name=w.target.scale_target_ref.name, kind=w.target.scale_target_ref.kind,
                server=w.target.prometheus, pods=w.pods, metrics=w.target.spec.metrics,
                queries=w.target.metric_queries,
            )
            for w in wanted
        ]
        return await self.source.fetch(requests, deadline=deadline)


@dataclass(slots=True, kw_only=True)
class Components:
    api_client: ApiClient
    scales: ScaleClient
    target_cache: TargetCache
    pods: PodSelectorCache
    pod_cache: PodCache
    events: EventRecorder
    owners: OwnerCache
    metrics: PrometheusMetrics


@asynccontextmanager
async def connect(config: Config, *, record_events: bool = True,
                  telemetry: DaemonMetrics | None = None) -> AsyncIterator[Components]:
    """Open every adapter the config needs; close them all on exit. With ``telemetry``, every
    API request and PromQL query is counted there."""
    if telemetry is not None:
        telemetry.prometheus_servers(config.prometheus_servers)
    async with KubeSession.connect(
            config.kubernetes,
            on_request=None if telemetry is None else telemetry.kube_request) as session:
        client = session.api_client
        discovery = Discovery(client)
        # Deployments, StatefulSets and ReplicaSets are watched, so a pass reads their /scale
        # from memory; other kinds fall back to GET /scale.
        scope = config.kubernetes.watch_scope
        target_cache = TargetCache(client, scope=scope)
        scales = ScaleClient(client, discovery, targets=target_cache)
        pod_cache = PodCache(client, scope=scope)
        owners = OwnerCache(client, scope=scope)
        source = PrometheusSource(
            config.prometheus_servers, max_workers=min(8, max(2, config.daemon.concurrency)),
            observe=None if telemetry is None else telemetry.prometheus_query)
        try:
            async with EventRecorder(client, uid_of=scales.uid_of) as events:
                yield Components(
                    api_client=client, scales=scales, target_cache=target_cache,
                    pods=PodSelectorCache(pod_cache),
                    pod_cache=pod_cache, events=events, owners=owners,
                    metrics=PrometheusMetrics(source),
                )
        finally:
            await pod_cache.close()
            await target_cache.close()
            await owners.close()
            await source.close()


async def watch_namespaces(components: Components, namespaces: set[str]) -> None:
    """Watch pods, workloads and other autoscalers in exactly these namespaces (those with
    targets)."""
    await components.pod_cache.set_namespaces(namespaces)
    await components.target_cache.set_namespaces(namespaces)
    await components.owners.set_namespaces(namespaces)


async def wait_synced(components: Components, namespaces: set[str]) -> None:
    await asyncio.gather(*(components.pod_cache.wait_synced(ns) for ns in namespaces),
                         *(components.target_cache.wait_synced(ns) for ns in namespaces))


def settle_heap() -> None:
    """Once the caches hold their first full LIST: move everything alive now (modules, the
    caches) out of the collector's reach and make young collections rarer.

    A pass allocates a few hundred thousand short-lived objects at 10,000 targets (JSON
    answers, samples, decisions); with the default thresholds each of its ~hundreds of
    collections also walks the long-lived caches. Measured by bench/daemon_scale.py at 1,000
    targets: a pass takes ~40 % less time. Garbage is still collected, only in larger steps.
    """
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


def shard_of(key: str, total: int) -> int:
    """A stable shard for a target key (crc32: the same on every replica and restart)."""
    return zlib.crc32(key.encode()) % total


def targets_for_shard(
    targets: Sequence[TargetConfig], shard: int | None, total: int | None
) -> list[TargetConfig]:
    if shard is None or not total or total <= 1:
        return list(targets)
    return [t for t in targets if shard_of(t.key, total) == shard]


def pod_namespace() -> str:
    """The namespace this pod runs in (downward API or the service account), else default."""
    env = os.environ.get("POD_NAMESPACE")
    if env:
        return env
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as handle:
            return handle.read().strip() or "default"
    except OSError:
        return "default"
