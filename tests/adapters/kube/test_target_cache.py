"""The target watch cache: /scale of apps/v1 workloads from memory, exact, current, cheap."""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from autoscaler.adapters.kube.discovery import Discovery
from autoscaler.adapters.kube.informer import Backoff
from autoscaler.adapters.kube.scale import ScaleClient
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.adapters.kube.structs import Scale
from autoscaler.adapters.kube.target_cache import TargetCache
from autoscaler.errors import NotFoundError
from tests.adapters.kube.conftest import Ref
from tests.adapters.kube.waiting import eventually
from tests.sim.kube import SimApiServer

FAST = Backoff(initial=0.01, maximum=0.05)
KINDS = ["Deployment", "StatefulSet", "ReplicaSet"]
SCALE_READS = ("deployments/scale", "statefulsets/scale", "replicasets/scale")


@pytest.fixture(params=["cluster", "namespaces"])
async def cache(kube: KubeSession, request: pytest.FixtureRequest) -> AsyncIterator[TargetCache]:
    """Every test runs with both watch scopes: one watch per kind, or one per namespace."""
    async with TargetCache(kube.api_client, watch_timeout=5, backoff=FAST,
                     scope=request.param) as targets:
        yield targets


def client(kube: KubeSession, targets: TargetCache | None) -> ScaleClient:
    return ScaleClient(kube.api_client, Discovery(kube.api_client), targets=targets)


async def synced(cache: TargetCache, namespace: str = "shop") -> None:
    await cache.set_namespaces([namespace])
    async with asyncio.timeout(5):
        await cache.wait_synced(namespace)


def scale_gets(api: SimApiServer) -> int:
    return sum(api.count(verb="get", resource=resource) for resource in SCALE_READS)


def fields(scale: Scale) -> tuple[Any, ...]:
    return (scale.target, scale.spec_replicas, scale.status_replicas, scale.selector,
            scale.resource_version, dict(scale.annotations))


SELECTORS = {
    "labels": {"matchLabels": {"app": "web", "tier": "front"}},
    "expressions": {"matchLabels": {"tier": "front"}, "matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["b", "a"]},
        {"key": "env", "operator": "NotIn", "values": ["dev"]},
        {"key": "app", "operator": "Exists"},
        {"key": "canary", "operator": "DoesNotExist"}]},
}


@pytest.mark.parametrize("kind", KINDS, ids=str.lower)
@pytest.mark.parametrize("selector", list(SELECTORS), ids=list(SELECTORS))
async def test_cached_scale_equals_the_servers(kube: KubeSession, apiserver: SimApiServer,
                                               cache: TargetCache, kind: str,
                                               selector: str) -> None:
    """Every field served from memory is what GET /scale (plus the object) returns."""
    apiserver.create_workload(kind, "shop", "web", replicas=3,
                              labels={"app": "web", "tier": "front", "zone": "a"},
                              extra_spec={"selector": SELECTORS[selector]})
    apiserver.patch("apps/v1", kind, "shop", "web",
                    {"metadata": {"annotations": {"autoscaler.dev/paused": "true"}}})
    apiserver.settle()
    await synced(cache)
    polled = await client(kube, None).get_scale("shop", Ref(kind=kind))
    gets = scale_gets(apiserver)
    await eventually(lambda: cache.lookup("shop", Ref(kind=kind)) is not None
                     and cache.lookup("shop", Ref(kind=kind)) == polled)
    cached = await client(kube, cache).get_scale("shop", Ref(kind=kind))
    assert fields(cached) == fields(polled)
    assert cached.annotations["autoscaler.dev/paused"] == "true"
    assert scale_gets(apiserver) == gets


async def test_steady_state_makes_no_request(kube: KubeSession, apiserver: SimApiServer,
                                             cache: TargetCache) -> None:
    """N passes over M Deployments: no GET /scale, no LIST, no GET; all cache hits."""
    passes, targets = 5, 10
    for index in range(targets):  # a scale at zero too (its /scale shows "spec": {})
        apiserver.create_deployment("shop", f"web-{index}", replicas=index % 2)
    await synced(cache)
    scales, before = client(kube, cache), len(apiserver.log.records)
    for _ in range(passes):
        for index in range(targets):
            scale = await scales.get_scale("shop", Ref(name=f"web-{index}"))
            assert scale.spec_replicas == index % 2
    assert len(apiserver.log.records) == before
    assert scale_gets(apiserver) == 0
    assert apiserver.count(verb="list") == cache.counters.lists == len(KINDS)
    assert (cache.counters.hits, cache.counters.misses) == (passes * targets, 0)
    cached = scales.cached_scale("shop", Ref(name="web-1"))  # what a pass reads first
    assert cached is not None
    assert cached.spec_replicas == 1


async def test_someone_elses_scale_arrives_by_watch(kube: KubeSession, apiserver: SimApiServer,
                                                    cache: TargetCache) -> None:
    """A scale written by another actor is seen on a later pass, through the watch only."""
    apiserver.create_deployment("shop", "web", replicas=2)
    await synced(cache)
    scales = client(kube, cache)
    apiserver.set_replicas("Deployment", "shop", "web", 7)
    apiserver.settle()
    await eventually(lambda: caught_up(cache, apiserver))
    scale = await scales.get_scale("shop", Ref())
    assert scale.spec_replicas == 7
    assert scale_gets(apiserver) == 0


def caught_up(cache: TargetCache, api: SimApiServer, name: str = "web") -> bool:
    """The cache holds the server's current version of the Deployment."""
    stored = api.get("apps/v1", "Deployment", "shop", name) or {"metadata": {}}
    scale = cache.lookup("shop", Ref(name=name))
    return scale is not None and \
        scale.resource_version == stored["metadata"].get("resourceVersion")


def cached_replicas(cache: TargetCache, name: str = "web") -> int | None:
    scale = cache.lookup("shop", Ref(name=name))
    return None if scale is None else scale.spec_replicas


async def test_own_write_is_served_at_once(kube: KubeSession, apiserver: SimApiServer,
                                           cache: TargetCache) -> None:
    """After update_scale the next read carries the written version, even before its event."""
    apiserver.create_deployment("shop", "web", replicas=2)
    await synced(cache)
    scales = client(kube, cache)
    await eventually(lambda: caught_up(cache, apiserver))
    read = await scales.get_scale("shop", Ref())
    written = await scales.update_scale("shop", Ref(), 4, read.resource_version)
    again = await scales.get_scale("shop", Ref())
    assert (again.spec_replicas, again.resource_version) == (4, written.resource_version)
    apiserver.set_replicas("Deployment", "shop", "web", 9)  # the watch still follows others
    await eventually(lambda: cached_replicas(cache) == 9)
    assert scale_gets(apiserver) == 0


async def test_no_op_write_does_not_freeze_the_entry(kube: KubeSession,
                                                     apiserver: SimApiServer,
                                                     cache: TargetCache) -> None:
    """Writing the current size (no new version, no event) leaves the watch in charge."""
    apiserver.create_deployment("shop", "web", replicas=2)
    await synced(cache)
    scales = client(kube, cache)
    read = await scales.get_scale("shop", Ref())
    await scales.update_scale("shop", Ref(), 2, read.resource_version)
    apiserver.set_replicas("Deployment", "shop", "web", 5)
    await eventually(lambda: cached_replicas(cache) == 5)


async def test_unsynced_namespace_falls_back(kube: KubeSession, apiserver: SimApiServer,
                                             cache: TargetCache) -> None:
    """Before the first LIST completes, get_scale asks the server (and starts the watch)."""
    apiserver.create_deployment("shop", "web", replicas=3)
    apiserver.patch("apps/v1", "Deployment", "shop", "web",
                    {"metadata": {"annotations": {"team": "checkout"}}})
    apiserver.delay_next(1, seconds=0.4, verb="list", resource="deployments")
    scale = await client(kube, cache).get_scale("shop", Ref())
    assert (scale.spec_replicas, scale.annotations["team"]) == (3, "checkout")
    assert apiserver.count(verb="get", resource="deployments/scale") == 1
    assert apiserver.count(verb="get", resource="deployments") == 1
    assert cache.namespaces == {"shop"}
    assert cache.counters.misses == 1
    async with asyncio.timeout(5):
        await cache.wait_synced("shop")


async def test_custom_resource_is_read_from_the_server(kube: KubeSession,
                                                       apiserver: SimApiServer,
                                                       cache: TargetCache) -> None:
    """A kind the cache does not watch is a GET /scale plus a GET of the object, every time."""
    ref = Ref(api_version="example.com/v1", kind="Rollout")
    apiserver.create_workload("Rollout", "shop", "web", replicas=2, api_version=ref.api_version)
    apiserver.patch(ref.api_version, "Rollout", "shop", "web",
                    {"metadata": {"annotations": {"autoscaler.dev/paused": "true"}}})
    scales = client(kube, cache)
    for _ in range(2):
        scale = await scales.get_scale("shop", ref)
        assert scale.annotations == {"autoscaler.dev/paused": "true"}
    assert apiserver.count(verb="get", resource="rollouts/scale") == 2
    assert apiserver.count(verb="get", resource="rollouts") == 2
    assert scales.cached_scale("shop", ref) is None  # a pass must ask for it
    assert cache.namespaces == set()
    assert cache.counters.misses == 0


async def test_deleted_target_is_not_found(kube: KubeSession, apiserver: SimApiServer,
                                           cache: TargetCache) -> None:
    """A target deleted leaves the cache; the fallback GET reports it missing."""
    apiserver.create_deployment("shop", "web", replicas=1)
    await synced(cache)
    apiserver.rest.delete(apiserver.resource("apps/v1", "Deployment"), "shop", "web", {}, None)
    await eventually(lambda: cache.lookup("shop", Ref()) is None)
    with pytest.raises(NotFoundError, match="HTTP 404"):
        await client(kube, cache).get_scale("shop", Ref())


async def test_gone_relists_and_keeps_serving(kube: KubeSession, apiserver: SimApiServer,
                                              cache: TargetCache) -> None:
    """A 410 Gone relists every kind; changes after it still arrive by watch."""
    apiserver.create_deployment("shop", "web", replicas=1)
    await synced(cache)
    await eventually(lambda: apiserver.open_watches == len(KINDS))
    apiserver.compact()
    apiserver.expire_watches(gone=True)
    await eventually(lambda: cache.counters.relists == len(KINDS)
                     and apiserver.open_watches == len(KINDS))
    apiserver.set_replicas("Deployment", "shop", "web", 3)
    await eventually(lambda: cached_replicas(cache) == 3)
    assert scale_gets(apiserver) == 0


async def test_a_relist_keeps_the_objects_it_lists_again_unchanged(
        apiserver: SimApiServer, cache: TargetCache) -> None:
    """After a 410 relist, a workload listed at the version cached is the same entry (no
    second copy while the list runs); one changed since is read anew."""
    apiserver.create_deployment("shop", "web", replicas=1)
    apiserver.create_deployment("shop", "api", replicas=2)
    await synced(cache)
    await eventually(lambda: apiserver.open_watches == len(KINDS))
    web, api = cache.lookup("shop", Ref(name="web")), cache.lookup("shop", Ref(name="api"))
    apiserver.compact()
    apiserver.expire_watches(gone=True)
    await eventually(lambda: cache.counters.relists == len(KINDS)
                     and apiserver.open_watches == len(KINDS))
    assert cache.lookup("shop", Ref(name="web")) is web
    assert cache.lookup("shop", Ref(name="api")) is api
    apiserver.set_replicas("Deployment", "shop", "web", 3)
    await eventually(lambda: cached_replicas(cache) == 3)
    assert cache.lookup("shop", Ref(name="api")) is api


async def test_stale_cache_asks_the_server(kube: KubeSession, apiserver: SimApiServer) -> None:
    """Past max_staleness without word from the server, reads go to GET /scale."""
    apiserver.create_deployment("shop", "web", replicas=2)
    async with TargetCache(kube.api_client, watch_timeout=5, backoff=FAST,
                           max_staleness=0.0) as stale:
        await synced(stale)
        await asyncio.sleep(0.01)
        scale = await client(kube, stale).get_scale("shop", Ref())
    assert scale.spec_replicas == 2
    assert apiserver.count(verb="get", resource="deployments/scale") == 1


async def test_namespaces_follow_the_targets(apiserver: SimApiServer,
                                             cache: TargetCache) -> None:
    """set_namespaces starts three watches per namespace (cluster-wide: three in all) and
    stops the ones dropped."""
    apiserver.create_deployment("shop", "web")
    apiserver.create_deployment("blog", "web")
    await cache.set_namespaces(["shop", "blog"])
    per_namespace = 2 if cache.scope == "namespaces" else 1
    await eventually(lambda: apiserver.open_watches == per_namespace * len(KINDS))
    await cache.set_namespaces(["blog"])
    if per_namespace == 2:
        apiserver.set_replicas("Deployment", "shop", "web", 2)  # a closed watch notices on write
    await eventually(lambda: apiserver.open_watches == len(KINDS))
    assert cache.namespaces == {"blog"}
    assert not cache.is_synced("shop")


async def test_who_last_set_the_replicas_is_known_from_the_watch(
    kube: KubeSession, apiserver: SimApiServer, cache: TargetCache,
) -> None:
    """Our write names field manager "autoscaler" (at once, then by its watch event);
    someone else's count arrives with its manager."""
    apiserver.create_deployment("shop", "web", replicas=2)
    await synced(cache)
    scales = client(kube, cache)
    await eventually(lambda: caught_up(cache, apiserver))
    assert (await scales.get_scale("shop", Ref())).replicas_managers == ("sim",)
    read = await scales.get_scale("shop", Ref())
    await scales.update_scale("shop", Ref(), 0, read.resource_version)
    assert (await scales.get_scale("shop", Ref())).replicas_managers == ("autoscaler",)
    await eventually(lambda: caught_up(cache, apiserver))
    assert (await scales.get_scale("shop", Ref())).replicas_managers == ("autoscaler",)
    apiserver.set_replicas("Deployment", "shop", "web", 3, manager="kubectl", via_scale=True)
    await eventually(lambda: caught_up(cache, apiserver))
    assert (await scales.get_scale("shop", Ref())).replicas_managers == ("kubectl",)


async def test_only_the_targets_kinds_are_watched(kube: KubeSession, apiserver: SimApiServer,
                                                  cache: TargetCache) -> None:
    """With Deployment targets only, no ReplicaSet or StatefulSet is listed or kept (a
    Deployment's ReplicaSets would outnumber the targets); a kind added later is listed then
    and served from memory, and a kind dropped is forgotten."""
    apiserver.create_deployment("shop", "web", replicas=2)  # with its ReplicaSet
    apiserver.create_workload("StatefulSet", "shop", "db", replicas=1)
    await cache.set_kinds(["Deployment", "Rollout"])  # a kind it cannot serve is ignored
    assert cache.kinds == {"Deployment"}
    await synced(cache)
    await eventually(lambda: apiserver.open_watches == 1)
    assert apiserver.count(verb="list", resource="replicasets") == 0
    assert apiserver.count(verb="list", resource="statefulsets") == 0
    assert cache.lookup("shop", Ref()) is not None
    assert cache.lookup("shop", Ref(kind="StatefulSet", name="db")) is None  # asked of the server

    await cache.set_kinds(["Deployment", "StatefulSet"])
    await synced(cache)
    await eventually(lambda: cache.lookup("shop", Ref(kind="StatefulSet", name="db")) is not None)
    assert cache.lookup("shop", Ref()) is not None
    assert apiserver.count(verb="list", resource="replicasets") == 0
    await eventually(lambda: apiserver.open_watches == 2)

    await cache.set_kinds(["StatefulSet"])
    assert cache.lookup("shop", Ref()) is None
    assert cache.lookup("shop", Ref(kind="StatefulSet", name="db")) is None  # until relisted
    await synced(cache)
    await eventually(lambda: cache.lookup("shop", Ref(kind="StatefulSet", name="db")) is not None)
    if cache.scope == "namespaces":
        apiserver.set_replicas("Deployment", "shop", "web", 3)  # a closed watch notices on write
    await eventually(lambda: apiserver.open_watches == 1)
