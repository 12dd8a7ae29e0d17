"""The pod watch cache: one LIST, then WATCH; resume, relist on 410, never crash."""

import asyncio
from collections.abc import AsyncIterator

import pytest

from autoscaler.adapters.kube.pod_cache import Backoff, PodCache, _PodSink
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.algorithm import ConditionStatus, PodPhase
from autoscaler.errors import TransientError
from autoscaler.runtime import ring
from tests.adapters.kube.waiting import eventually
from tests.sim.apiserver.sharding import ShardMode
from tests.sim.kube import SimApiServer

FAST = Backoff(initial=0.01, maximum=0.05)


@pytest.fixture(params=["cluster", "namespaces"])
async def cache(kube: KubeSession, request: pytest.FixtureRequest) -> AsyncIterator[PodCache]:
    """Every test runs with both watch scopes: one watch per kind, or one per namespace."""
    async with PodCache(kube.api_client, watch_timeout=5, backoff=FAST,
                     scope=request.param) as pods:
        yield pods


async def synced(cache: PodCache, namespace: str = "shop") -> None:
    cache.add_namespace(namespace)
    async with asyncio.timeout(5):
        await cache.wait_synced(namespace)


def names(cache: PodCache, selector: str = "app=web", namespace: str = "shop") -> list[str]:
    return [pod.name for pod in cache.pods_for(namespace, selector)]


async def test_sync_selects_by_labels(cache: PodCache, apiserver: SimApiServer) -> None:
    """After one LIST the cache answers per selector with converted pods."""
    apiserver.create_deployment("shop", "web", replicas=3, requests={"cpu": "250m"})
    apiserver.create_deployment("shop", "db", replicas=1)
    await synced(cache)
    web = cache.pods_for("shop", "app=web")
    assert sorted(names(cache)) == sorted(p["metadata"]["name"]
                                          for p in apiserver.pods("shop", "app=web"))
    assert len(web) == 3
    assert {(p.phase, p.ready) for p in web} == {(PodPhase.RUNNING, ConditionStatus.TRUE)}
    assert web[0].containers[0].requests["cpu"] == 250
    assert len(names(cache, "app=db")) == 1
    assert cache.seconds_since_contact("shop") < 1.0


async def test_watch_follows_scaling_without_listing(cache: PodCache,
                                                     apiserver: SimApiServer) -> None:
    """Pods created and deleted after the LIST arrive as watch events; no second LIST."""
    apiserver.create_deployment("shop", "web", replicas=1)
    await synced(cache)
    apiserver.set_replicas("Deployment", "shop", "web", 4)
    apiserver.settle()
    await eventually(lambda: len(names(cache)) == 4)
    apiserver.set_replicas("Deployment", "shop", "web", 2)
    apiserver.settle()
    await eventually(lambda: len(apiserver.pods("shop", "app=web")) == len(names(cache)) == 2)
    assert apiserver.count(verb="list", resource="pods") == cache.counters.lists == 1


async def test_steady_state_makes_no_list(cache: PodCache, apiserver: SimApiServer) -> None:
    """Many passes over many targets read memory only: the LIST count stays at one."""
    apiserver.create_deployment("shop", "web", replicas=2)
    await synced(cache)
    for _ in range(20):
        assert len(names(cache)) == 2
        await asyncio.sleep(0.005)
    assert apiserver.count(verb="list", resource="pods") == 1
    assert apiserver.count(verb="watch", resource="pods") == 1


async def test_ended_watch_resumes_from_last_version(cache: PodCache,
                                                     apiserver: SimApiServer) -> None:
    """A watch the server ends is reopened from the last resourceVersion, not relisted."""
    apiserver.create_deployment("shop", "web", replicas=1)
    await synced(cache)
    apiserver.set_replicas("Deployment", "shop", "web", 2)
    apiserver.settle()
    await eventually(lambda: len(names(cache)) == 2)
    await eventually(lambda: apiserver.open_watches == 1)
    apiserver.expire_watches()
    await eventually(lambda: apiserver.count(verb="watch", resource="pods") == 2)
    resumed = apiserver.requests(verb="watch", resource="pods")[-1]
    newest = max(int(p["metadata"]["resourceVersion"]) for p in apiserver.pods("shop"))
    assert resumed.query["resourceVersion"] == str(newest)
    assert resumed.query.get("allowWatchBookmarks", "").lower() == "true"
    assert apiserver.count(verb="list", resource="pods") == 1


async def test_gone_relists(cache: PodCache, apiserver: SimApiServer) -> None:
    """A watch that expires with 410 Gone leads to one relist and a consistent cache."""
    apiserver.create_deployment("shop", "web", replicas=2)
    await synced(cache)
    await eventually(lambda: apiserver.open_watches == 1)
    apiserver.compact()
    apiserver.expire_watches(gone=True)
    await eventually(lambda: cache.counters.relists == 1 and apiserver.open_watches == 1)
    assert apiserver.count(verb="list", resource="pods") == 2
    apiserver.set_replicas("Deployment", "shop", "web", 3)
    apiserver.settle()
    await eventually(lambda: len(names(cache)) == 3)


async def test_a_relist_keeps_the_pods_it_lists_again_unchanged(
        cache: PodCache, apiserver: SimApiServer) -> None:
    """A pod listed again at the version the cache has is the same object: no second copy
    of every pod while the list runs, no second conversion."""
    apiserver.create_deployment("shop", "web", replicas=3)
    await synced(cache)
    await eventually(lambda: apiserver.open_watches == 1)
    before = {pod.name: pod for pod in cache.pods_for("shop", "app=web")}
    apiserver.compact()
    apiserver.expire_watches(gone=True)
    await eventually(lambda: cache.counters.relists == 1 and apiserver.open_watches == 1)
    after = {pod.name: pod for pod in cache.pods_for("shop", "app=web")}
    assert after.keys() == before.keys()
    assert all(after[name] is before[name] for name in before)


def raw_pod(name: str, version: str, *, ready: str = "True") -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "shop", "resourceVersion": version,
                         "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]}}


def test_a_relisted_pod_at_another_version_is_converted_anew() -> None:
    """Only the same resourceVersion is reused: a pod changed while the watch was down, or
    one whose version the cache has from an event, is what the list says."""
    sink = _PodSink()
    sink.replace([sink.convert(raw_pod("a", "1")), sink.convert(raw_pod("b", "1"))])
    first = {name: sink.pods.get(name) for name in ("a", "b")}
    sink.upsert(raw_pod("b", "2", ready="False"))  # an event after the list
    relisted = [sink.convert(raw_pod("a", "1")), sink.convert(raw_pod("b", "3")),
                sink.convert(raw_pod("c", "3"))]
    sink.replace(relisted)
    assert sink.pods.get("a") is first["a"]
    entry = sink.pods.get("b")
    assert entry is not None
    assert entry is not first["b"]
    assert entry[1].ready is ConditionStatus.TRUE  # version 3 as listed, not the event's 2
    assert len(sink.pods) == 3
    sink.delete(raw_pod("a", "4"))
    sink.replace([sink.convert(raw_pod("a", "1"))])  # the old version again: not reused
    again = sink.pods.get("a")
    assert again is not None
    assert again is not first["a"]


async def test_bookmarks_advance_the_version(cache: PodCache, apiserver: SimApiServer) -> None:
    """A BOOKMARK moves the resume point without touching the pods."""
    apiserver.create_deployment("shop", "web", replicas=1)
    apiserver.create_deployment("other", "noise", replicas=1)
    await synced(cache)
    await eventually(lambda: apiserver.open_watches == 1)
    apiserver.send_bookmarks()
    await eventually(lambda: cache.counters.bookmarks >= 1)
    assert len(names(cache)) == 1


@pytest.mark.parametrize("verb", ["list", "watch"])
async def test_errors_are_retried_with_backoff(cache: PodCache, apiserver: SimApiServer,
                                               verb: str) -> None:
    """500s on LIST or WATCH are retried; a failed watch resumes without a relist."""
    apiserver.create_deployment("shop", "web", replicas=1)
    apiserver.fail_next(2, status=500, verb=verb, resource="pods")
    await synced(cache)
    await eventually(lambda: cache.counters.errors == 2 and apiserver.open_watches == 1)
    expected_lists = 3 if verb == "list" else 1
    assert apiserver.count(verb="list", resource="pods") == expected_lists
    assert names(cache)


async def test_pagination(kube: KubeSession, apiserver: SimApiServer) -> None:
    """The LIST is paged with limit/continue; every page lands in the cache."""
    apiserver.create_deployment("shop", "web", replicas=5)
    async with PodCache(kube.api_client, page_size=2, backoff=FAST) as cache:
        await synced(cache)
        assert len(names(cache)) == 5
        assert cache.counters.lists == 3


async def test_not_synced_yet(cache: PodCache, apiserver: SimApiServer) -> None:
    """Before the first LIST completes, pods_for is a TransientError, not an empty list."""
    apiserver.delay_next(1, seconds=1.0, verb="list", resource="pods")
    cache.add_namespace("shop")
    with pytest.raises(TransientError, match="not synced"):
        cache.pods_for("shop", "app=web")


def poke(api: SimApiServer, namespace: str, replicas: int) -> None:
    """Change pods in a namespace: the server notices a closed watch when it next writes."""
    api.set_replicas("Deployment", namespace, "web", replicas)
    api.settle()


async def test_namespaces_added_and_removed(cache: PodCache, apiserver: SimApiServer) -> None:
    """set_namespaces starts and stops watches at run time (cluster-wide: one watch for all,
    relisted when a namespace joins); close ends them all."""
    per_namespace = cache.scope == "namespaces"
    apiserver.create_deployment("shop", "web", replicas=1)
    apiserver.create_deployment("blog", "web", replicas=2)
    await cache.set_namespaces(["shop", "blog"])
    await eventually(lambda: apiserver.open_watches == (2 if per_namespace else 1))
    assert len(names(cache, namespace="blog")) == 2
    await cache.set_namespaces(["blog"])
    poke(apiserver, "shop", 2)
    await eventually(lambda: apiserver.open_watches == 1)
    assert cache.namespaces == {"blog"}
    await cache.close()
    poke(apiserver, "blog", 3)
    await eventually(lambda: apiserver.open_watches == 0)
    assert apiserver.count(verb="watch", resource="pods") == (2 if per_namespace else 1)


async def test_cluster_scope_keeps_only_the_namespaces_asked_for(
    kube: KubeSession, apiserver: SimApiServer,
) -> None:
    """One cluster-wide watch feeds the wanted namespaces and drops the rest; a namespace
    added later is filled by a relist, and events reach only their own namespace."""
    apiserver.create_deployment("shop", "web", replicas=2)
    apiserver.create_deployment("blog", "web", replicas=1)
    async with PodCache(kube.api_client, watch_timeout=5, backoff=FAST) as cache:
        await synced(cache, "shop")
        assert len(names(cache)) == 2
        assert cache.namespaces == {"shop"}
        with pytest.raises(TransientError, match="not synced"):
            cache.pods_for("blog", "app=web")  # starts it: a relist for both
        async with asyncio.timeout(5):
            await cache.wait_synced("blog")
        assert len(names(cache, namespace="blog")) == 1
        assert len(names(cache)) == 2
        poke(apiserver, "blog", 3)
        await eventually(lambda: len(names(cache, namespace="blog")) == 3)
        assert len(names(cache)) == 2
        assert apiserver.count(verb="list", resource="pods") == 2
        assert apiserver.open_watches == 1


async def test_asking_starts_a_namespace(cache: PodCache, apiserver: SimApiServer) -> None:
    """pods_for on a namespace not cached yet starts its watch and says "not synced"."""
    apiserver.create_deployment("shop", "web", replicas=2)
    with pytest.raises(TransientError, match="not synced"):
        cache.pods_for("shop", "app=web")
    async with asyncio.timeout(5):
        await cache.wait_synced("shop")
    assert len(names(cache)) == 2


@pytest.mark.parametrize("mode", ["on", "off", "list-only", "old-grammar"])
async def test_a_cluster_wide_watch_asks_for_its_namespaces_only(
    kube: KubeSession, apiserver: SimApiServer, mode: ShardMode,
) -> None:
    """KEP-5866: the LIST and WATCH carry a ``shardSelector`` naming the watched namespaces;
    where the server echoes it the cache knows the server filtered (fewer bytes decoded);
    ignored (gate off, or a WATCH mid-rollout) or refused (an older grammar: one 400, then
    without it), the cache filters on its side: in every mode it holds the same pods."""
    apiserver.shard_selector_mode = mode
    for namespace in ("shop", "blog", "wiki", "mail"):
        apiserver.create_deployment(namespace, "web", replicas=2)
    async with PodCache(kube.api_client, watch_timeout=5, backoff=FAST) as cache:
        await cache.set_namespaces({"shop", "blog"})
        async with asyncio.timeout(5):
            await cache.wait_synced("shop")
            await cache.wait_synced("blog")
        assert len(names(cache)) == len(names(cache, namespace="blog")) == 2
        lists = apiserver.requests(verb="list", resource="pods", status=200)
        sent = lists[-1].query.get("shardSelector")
        assert (sent is None) == (mode == "old-grammar")
        if sent is not None:
            assert sent == ring.shard_selector(["blog", "shop"])
        assert cache.selector_modes == {"pods": "server" if mode in ("on", "list-only")
                                        else "client"}
        # Events of a namespace not watched never reach the cache, however the server sends.
        poke(apiserver, "wiki", 3)
        poke(apiserver, "shop", 3)
        await eventually(lambda: len(names(cache)) == 3)
        assert cache.namespaces == {"shop", "blog"}
        with pytest.raises(KeyError):
            cache.seconds_since_contact("wiki")
        refused = apiserver.count(verb="list", resource="pods", status=400)
        assert refused == (1 if mode == "old-grammar" else 0)
        # A namespace dropped: the watch resumes (no relist) asking for the rest only.
        lists = apiserver.count(verb="list", resource="pods")
        await cache.set_namespaces({"blog"})
        await eventually(lambda: (apiserver.requests(verb="watch", resource="pods")[-1]
                                  .query.get("shardSelector")) == (
            None if mode == "old-grammar" else ring.shard_selector(["blog"])))
        poke(apiserver, "blog", 1)
        await eventually(lambda: len(names(cache, namespace="blog")) == 1)
        assert apiserver.count(verb="list", resource="pods") == lists


async def test_a_selector_naming_hundreds_of_namespaces_is_sent_and_honoured(
    kube: KubeSession, apiserver: SimApiServer,
) -> None:
    """300 namespaces make a selector of ~24 KB: sent whole (kube-apiserver takes request
    lines up to 1 MiB, and so does the simulator) and honoured."""
    apiserver.create_deployment("shop", "web", replicas=2)
    apiserver.create_deployment("blog", "web", replicas=1)
    async with PodCache(kube.api_client, watch_timeout=5, backoff=FAST) as cache:
        await cache.set_namespaces({"shop"} | {f"team-{i:03d}" for i in range(300)})
        async with asyncio.timeout(5):
            await cache.wait_synced("shop")
        assert len(names(cache)) == 2
        assert cache.selector_modes == {"pods": "server"}
        sent = apiserver.requests(verb="list", resource="pods")[-1].query["shardSelector"]
        assert len(sent) > 8192
