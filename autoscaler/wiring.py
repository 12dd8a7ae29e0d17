"""The composition root of the adapters: build those a config asks for, as the runtime's
ports, and close them.

Used by ``run`` (the daemon, ``app.py``) and ``plan`` (one pass that changes nothing), so
both talk to Prometheus and the API server through exactly the same code. The daemon's own
adapters are chosen here too: its history store and its Lease.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from autoscaler.adapters.kube.bucket_store import BucketStateStore, Legacy
from autoscaler.adapters.kube.buckets import BucketLeases
from autoscaler.adapters.kube.configmap_store import (
    ConfigMapStateStore,
    host_owner,
    lease_owner,
)
from autoscaler.adapters.kube.discovery import Discovery
from autoscaler.adapters.kube.events import EventRecorder
from autoscaler.adapters.kube.leader import LeaderElector, LeaseConfig
from autoscaler.adapters.kube.membership import MemberConfig, MembershipThread, client_factory
from autoscaler.adapters.kube.owners import OwnerCache
from autoscaler.adapters.kube.pod_cache import PodCache
from autoscaler.adapters.kube.scale import ScaleClient
from autoscaler.adapters.kube.session import (
    DateObserver,
    InClusterFiles,
    KubeSession,
    pod_namespace,
    wants_in_cluster,
)
from autoscaler.adapters.kube.target_cache import TargetCache, kinds_of
from autoscaler.adapters.local_state import FileStateStore, MemoryStateStore, ReadOnceStore
from autoscaler.adapters.prometheus import PrometheusSource
from autoscaler.adapters.prometheus.port import PrometheusHistory, PrometheusMetrics
from autoscaler.adapters.store_lock import StoreLock
from autoscaler.config import Config
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime import ring
from autoscaler.runtime.history import HistoryKeeper
from autoscaler.runtime.ports import BucketStatePort, StateStore
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from autoscaler.runtime.ring_member import RingParts

if TYPE_CHECKING:  # only named here: importing it first would import all of the library
    from kubernetes_asyncio.client import ApiClient

log = structlog.get_logger("autoscaler.app")  # the daemon's lines, as before the split


@dataclass(slots=True, kw_only=True)
class Components:
    api_client: ApiClient
    scales: ScaleClient
    target_cache: TargetCache
    pods: PodCache
    events: EventRecorder
    owners: OwnerCache
    metrics: PrometheusMetrics
    history: PrometheusHistory

    def reconciler(self, *, options: ReconcileOptions, telemetry: DaemonMetrics,
                   clock: Callable[[], float] = time.time,
                   wall: Callable[[], float] | None = None) -> Reconciler:
        """A reconciler over these adapters (the daemon's, and ``plan``'s one pass)."""
        return Reconciler(scales=self.scales, pods=self.pods, metrics=self.metrics,
                          events=self.events, owners=self.owners, options=options,
                          telemetry=telemetry, clock=clock, wall=wall)


@asynccontextmanager
async def connect(config: Config, *, telemetry: DaemonMetrics | None = None,
                  on_date: DateObserver | None = None,
                  share: bool = False) -> AsyncIterator[Components]:
    """Open every adapter the config needs; close them all on exit. With ``telemetry``, every
    API request and PromQL query is counted there; ``on_date`` is told of every API
    server's answer's ``Date`` header (its clock); ``share``: this process acts for a share
    of the configured targets (a ring member, a static shard)."""
    if telemetry is not None:
        telemetry.prometheus_servers(config.prometheus_servers)
    async with KubeSession.connect(
            config.kubernetes, on_date=on_date,
            on_request=None if telemetry is None else telemetry.kube_request) as session:
        client = session.api_client
        discovery = Discovery(client)
        # The Deployments, StatefulSets and ReplicaSets among the targets' kinds are watched,
        # so a pass reads their /scale from memory; other kinds fall back to GET /scale.
        scope = config.kubernetes.watch_scope
        target_cache = TargetCache(
            client, scope=scope, kinds=kinds_of(t.scale_target_ref for t in config.targets))
        scales = ScaleClient(client, discovery, targets=target_cache)
        pod_cache = PodCache(client, scope=scope)
        owners = OwnerCache(client, scope=scope)
        source = PrometheusSource(
            config.prometheus_servers, max_workers=min(8, max(2, config.daemon.concurrency)),
            observe=None if telemetry is None else telemetry.prometheus_query, share=share)
        try:
            async with EventRecorder(client, uid_of=scales.uid_of) as events:
                yield Components(
                    api_client=client, scales=scales, target_cache=target_cache,
                    pods=pod_cache, events=events, owners=owners,
                    metrics=PrometheusMetrics(source), history=PrometheusHistory(source),
                )
        finally:
            await pod_cache.close()
            await target_cache.close()
            await owners.close()
            await source.close()


async def watch_namespaces(components: Components, namespaces: set[str]) -> None:
    """Watch pods, workloads and other autoscalers in exactly these namespaces (those with
    targets)."""
    await components.pods.set_namespaces(namespaces)
    await components.target_cache.set_namespaces(namespaces)
    await components.owners.set_namespaces(namespaces)


async def caches_synced(components: Components, namespaces: Iterable[str],
                        timeout: float) -> bool:
    """Whether the pods and workloads of these namespaces have been LISTed once, waiting at
    most ``timeout`` seconds (a namespace not watched counts as not synced)."""
    deadline = time.monotonic() + timeout
    wanted = list(namespaces)
    while not all(components.pods.is_synced(ns) and components.target_cache.is_synced(ns)
                  for ns in wanted):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def wait_synced(components: Components, namespaces: set[str]) -> None:
    await asyncio.gather(*(components.pods.wait_synced(ns) for ns in namespaces),
                         *(components.target_cache.wait_synced(ns) for ns in namespaces))


def lease_names(config: Config, *, shard: int | None,
                total_shards: int | None) -> tuple[str, str]:
    """The Lease's name and namespace: a shard of several holds a Lease of its own."""
    election = config.daemon.leader_election
    name = election.lease_name
    if total_shards and total_shards > 1:
        name = f"{name}-shard-{shard}-of-{total_shards}"
    return name, election.lease_namespace or pod_namespace()


def lease_elector(client: ApiClient, config: Config, *, lease: tuple[str, str],
                  identity: str) -> LeaderElector:
    election = config.daemon.leader_election
    name, namespace = lease
    return LeaderElector(client, LeaseConfig(
        namespace=namespace, name=name, identity=identity,
        lease_duration=election.lease_duration, renew_deadline=election.renew_deadline,
        retry_period=election.retry_period))


def state_store(config: Config, *, client: ApiClient, lock: StoreLock | None,
                lease: Callable[[], tuple[str, str]]) -> StateStore:
    """The store this daemon owns; a dry run's is the live one read once at start, then
    kept in memory: it takes neither the state file's lock nor the Lease and writes
    nothing, so it can run beside the daemon it shadows."""
    daemon = config.daemon
    store: StateStore
    if daemon.state_file is not None:
        store = FileStateStore(daemon.state_file, read_only=daemon.dry_run, lock=lock)
    elif daemon.leader_election.enabled or wants_in_cluster(
            config.kubernetes, os.environ, InClusterFiles()):
        name, namespace = lease()
        owner = (lease_owner(namespace, name) if daemon.leader_election.enabled
                 else host_owner(socket.gethostname()))
        store = ConfigMapStateStore(client, namespace=namespace, name=f"{name}-state",
                                    owner=owner, read_only=daemon.dry_run)
    else:
        log.warning("no state file and no cluster state: history is lost on restart "
                    "(set daemon.stateFile)")
        return MemoryStateStore()
    return ReadOnceStore(store) if daemon.dry_run else store


def start_membership(config: Config, *, lease: tuple[str, str],
                     wall_offset: Callable[[], float | None]) -> MembershipThread:
    """Join the ring named by the Lease's name, in its namespace: a member Lease renewed
    from a thread of its own, with its own client (a main loop stalled by a long pass must
    not look like death to the peers), carrying ``wall_offset`` (our clock minus the API
    server's, for whoever reads the Lease). Blocks until it runs: call it in a thread."""
    name, namespace = lease
    thread = MembershipThread(client_factory(config.kubernetes), MemberConfig(
        namespace=namespace, ring=name, timings=ring.Timings.of(config.daemon.sharding)),
        wall_offset=wall_offset)
    thread.start()
    return thread


def ring_parts(
    config: Config, *, client: ApiClient, lease: tuple[str, str], membership: MembershipThread,
    keeper: Callable[[BucketStatePort, Callable[[], Iterable[str]], Callable[[], bool]],
                     HistoryKeeper],
) -> RingParts:
    """The ring's adapters over the daemon's client: the bucket Leases (watched) and one
    state ConfigMap per bucket; a bucket with no state of its own takes its targets' entries
    from the single-leader store of the same name (read only) the first time."""
    sharding = config.daemon.sharding
    name, namespace = lease
    member = membership.membership
    assert member is not None  # started
    leases = BucketLeases(
        client, namespace=namespace, ring=name, identity=member.incarnation,
        placement=sharding.placement, lease_duration=sharding.lease_duration,
        may_write=member.valid, request_timeout=sharding.retry_period)
    leases.start()

    def store(bucket: int, may_write: Callable[[], bool]) -> BucketStatePort:
        def in_bucket(key: str) -> bool:
            return ring.target_bucket(namespace=key.split("/", 1)[0], key=key,
                                      placement=sharding.placement) == bucket
        return BucketStateStore(
            client, namespace=namespace, ring=name, bucket=bucket, may_write=may_write,
            legacy=Legacy(name=f"{name}-state", in_bucket=in_bucket),
            request_timeout=config.kubernetes.request_timeout)

    return RingParts(membership=member, leases=leases, store=store, keeper=keeper)
