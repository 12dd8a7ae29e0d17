"""deploy/rbac.yaml grants exactly what the daemon's Kubernetes calls need: no less, no more.

"No less" is checked after every test that uses the ``kube`` fixture (conftest). Here one
session makes every kind of call the daemon makes (the adapters of this package, a scale
write through the reconciler's own write path, the Lease elector and the ConfigMap state
store) and the set of (verb, group, resource) it used must equal the set the manifests
grant.
"""

import asyncio
import contextlib
import time

from autoscaler.adapters.kube.buckets import BucketLeases
from autoscaler.adapters.kube.configmap_store import ConfigMapStateStore
from autoscaler.adapters.kube.discovery import Discovery
from autoscaler.adapters.kube.events import EventRecorder
from autoscaler.adapters.kube.leader import LeaderElector, LeaseConfig
from autoscaler.adapters.kube.membership import MemberConfig, Membership
from autoscaler.adapters.kube.owners import OwnerCache, OwnerCheck
from autoscaler.adapters.kube.pod_cache import PodCache
from autoscaler.adapters.kube.scale import ScaleClient
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.adapters.kube.target_cache import TargetCache
from autoscaler.algorithm import History
from autoscaler.config import parse_config
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from autoscaler.runtime.ring import Timings
from autoscaler.snapshot import SavedTarget, Snapshot, encode
from tests.adapters.kube.conftest import Ref, _as_resource_request
from tests.adapters.kube.rbac import custom_resource_template, granted
from tests.runtime.doubles import NoPods, QueueDepth, Quiet
from tests.sim.kube import SimApiServer

WORKLOADS = ("Deployment", "StatefulSet", "ReplicaSet")


async def scale_up(scales: ScaleClient, *, kind: str, api_version: str = "apps/v1") -> None:
    """One reconcile pass over shop/<kind>/web (at 1 replica, its metric wants 2): the
    daemon's own read and write path through ``scales``, its other ports in memory."""
    [target] = parse_config(f"""
[[autoscaler]]
namespace = "shop"
scaleTargetRef = {{ apiVersion = "{api_version}", kind = "{kind}", name = "web" }}
maxReplicas = 10
metrics = [{{ type = "External", external = {{ metric = {{ name = "depth" }}, target = {{ type = "AverageValue", averageValue = "10" }}, query = "sum(depth)" }} }}]
""").targets
    reconciler = Reconciler(scales=scales, pods=NoPods(), metrics=QueueDepth(20),
                            events=Quiet(), owners=Quiet(), options=ReconcileOptions(),
                            telemetry=DaemonMetrics())
    await reconciler.run_pass([target], deadline=time.monotonic() + 5)
    state = reconciler.states[target.key]
    assert (state.last_outcome, state.expected_replicas) == ("ok", 2), state.last_error


async def exercise_targets(kube: KubeSession, apiserver: SimApiServer) -> None:
    # Without a target cache: every read is the fallback (GET /scale, GET the object).
    scales = ScaleClient(kube.api_client, Discovery(kube.api_client))
    async with EventRecorder(kube.api_client, uid_of=scales.uid_of) as events, \
            PodCache(kube.api_client, watch_timeout=5) as pods, \
            TargetCache(kube.api_client, watch_timeout=5) as targets, \
            OwnerCache(kube.api_client, watch_timeout=5) as owners:
        pods.add_namespace("shop")
        await targets.set_namespaces(["shop"])
        await owners.set_namespaces(["shop"])
        for kind in WORKLOADS:
            apiserver.create_workload(kind, "shop", "web")
            await OwnerCheck(kube.api_client).owners_of("shop", Ref(kind=kind))
            await scale_up(scales, kind=kind)
            for _ in range(2):  # the repeat is aggregated: a PATCH
                await events.record("shop", Ref(kind=kind), warning=False,
                                    reason="SuccessfulRescale", message="New size: 2")
        async with asyncio.timeout(5):
            await pods.wait_synced("shop")
            await targets.wait_synced("shop")
            await owners.wait_synced("shop")


async def exercise_leader_and_state(kube: KubeSession) -> None:
    elector = LeaderElector(kube.api_client, LeaseConfig(
        namespace="autoscaler", name="autoscaler", identity="test", retry_period=0.05))
    task = asyncio.create_task(elector.run())
    async with asyncio.timeout(5):
        while not elector.is_leader:  # noqa: ASYNC110 - the elector has no wait API
            await asyncio.sleep(0.01)
    await asyncio.sleep(0.15)  # a few renewals: GET + PUT
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await elector.release()
    store = ConfigMapStateStore(kube.api_client, namespace="autoscaler", name="autoscaler-state")
    await store.load()
    await store.save(encode(Snapshot(targets={"shop/web": SavedTarget(history=History())})))
    await store.save(encode(Snapshot(targets={"shop/web": SavedTarget(history=History()),
                                              "shop/api": SavedTarget(history=History())})))


async def exercise_ring(kube: KubeSession) -> None:
    """Dynamic sharding: two members watch each other, one leaves, the other collects its
    Lease (a delete); the bucket Leases are watched too."""
    config = MemberConfig(namespace="autoscaler", ring="autoscaler", gc_grace=0.1,
                          timings=Timings(lease_duration=1.5, renew_deadline=1.0,
                                          retry_period=0.25))
    staying, leaving = Membership(kube.api_client, config), Membership(kube.api_client, config)
    tasks = [asyncio.create_task(m.run()) for m in (staying, leaving)]
    buckets = BucketLeases(kube.api_client, namespace="autoscaler", ring="autoscaler",
                           identity=staying.incarnation, placement="namespace",
                           lease_duration=1.5, may_write=staying.valid)
    buckets.start()
    try:
        async with asyncio.timeout(10):
            while len(staying.members()) < 2:  # noqa: ASYNC110 - a plain view
                await asyncio.sleep(0.05)
            await buckets.synced.wait()
            await leaving.stop()
            while staying.members().keys() & {leaving.incarnation}:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # past the grace: collected
    finally:
        await buckets.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await staying.stop()


def used(apiserver: SimApiServer) -> set[tuple[str, str, str]]:
    calls = set()
    for record in apiserver.log.records:
        if record.resource is not None:
            calls.add((record.verb, record.group or "", record.resource))
        elif (unserved := _as_resource_request(record.method, record.path)) is not None:
            calls.add(unserved[:3])
    return calls


async def test_rules_match_the_calls_exactly(kube: KubeSession, apiserver: SimApiServer) -> None:
    """Every granted (verb, group, resource) is used, and every used one is granted."""
    apiserver.create_namespace("autoscaler")
    await exercise_targets(kube, apiserver)
    await exercise_leader_and_state(kube)
    await exercise_ring(kube)
    grants = {(p.verb, p.group, p.resource) for p in granted()}
    assert used(apiserver) == grants


async def test_custom_resource_template_matches_its_calls(kube: KubeSession,
                                                          apiserver: SimApiServer) -> None:
    """The commented rules for a custom resource grant exactly what scaling one uses."""
    apiserver.create_workload("Rollout", "shop", "web", api_version="example.com/v1")
    scales = ScaleClient(kube.api_client, Discovery(kube.api_client))
    await scale_up(scales, kind="Rollout", api_version="example.com/v1")
    calls = {(verb, resource) for verb, group, resource in used(apiserver)
             if group == "example.com"}
    template = custom_resource_template()
    assert calls == ({(verb, "rollouts/scale") for verb in template["/scale"]}
                     | {(verb, "rollouts") for verb in template[""]})
