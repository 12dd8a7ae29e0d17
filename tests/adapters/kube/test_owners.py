"""Never fight another controller: HPAs and ScaledObjects that target the same object."""

import pytest

from autoscaler.adapters.kube.owners import OwnerCache, OwnerCheck
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.adapters.kube.watch_cache import WatchScope
from autoscaler.errors import TransientError
from tests.adapters.kube.conftest import Ref
from tests.adapters.kube.waiting import eventually
from tests.sim.kube import SimApiServer


@pytest.fixture(autouse=True)
def namespaces(apiserver: SimApiServer) -> None:
    for namespace in ("shop", "blog"):
        apiserver.create_namespace(namespace)


async def test_no_other_autoscaler(kube: KubeSession, apiserver: SimApiServer) -> None:
    """Autoscalers on other targets do not block ours."""
    apiserver.create_hpa("shop", "db-hpa", target_name="db")
    apiserver.create_hpa("shop", "web-sts", target_kind="StatefulSet", target_name="web")
    apiserver.create_hpa("blog", "web-hpa", target_name="web")
    assert await OwnerCheck(kube.api_client).owners_of("shop", Ref()) == ()


@pytest.mark.parametrize(
    "target_api_version", ["apps/v1", "apps/v1beta1"], ids=["same-version", "other-version"])
async def test_hpa_on_the_target(kube: KubeSession, apiserver: SimApiServer,
                                 target_api_version: str) -> None:
    """An HPA naming the same group, kind and name owns the target (any version)."""
    apiserver.create_hpa("shop", "web-hpa", target_name="web",
                         target_api_version=target_api_version)
    owners = await OwnerCheck(kube.api_client).owners_of("shop", Ref())
    assert owners == ("HorizontalPodAutoscaler web-hpa",)


async def test_scaled_object_and_hpa(kube: KubeSession, apiserver: SimApiServer) -> None:
    """KEDA's ScaledObject counts too; all owners are reported, sorted."""
    apiserver.create_scaled_object("shop", "web-keda", target_name="web")
    apiserver.create_hpa("shop", "web-hpa", target_name="web")
    owners = await OwnerCheck(kube.api_client).owners_of("shop", Ref())
    assert owners == ("HorizontalPodAutoscaler web-hpa", "ScaledObject web-keda")


async def test_keda_not_installed(kube: KubeSession, apiserver: SimApiServer) -> None:
    """A 404 on keda.sh means no ScaledObjects, not an error."""
    apiserver.registry.remove("keda.sh", "v1alpha1", "scaledobjects")
    apiserver.create_hpa("shop", "web-hpa", target_name="web")
    owners = await OwnerCheck(kube.api_client).owners_of("shop", Ref())
    assert owners == ("HorizontalPodAutoscaler web-hpa",)
    [missing] = apiserver.requests(status=404)
    assert missing.path == "/apis/keda.sh/v1alpha1/namespaces/shop/scaledobjects"


async def test_lists_are_cached(kube: KubeSession, apiserver: SimApiServer) -> None:
    """Within the TTL, many targets and passes cost one LIST per kind and namespace."""
    now = [0.0]
    check = OwnerCheck(kube.api_client, ttl=30, clock=lambda: now[0])
    for name in ("web", "api", "web"):
        await check.owners_of("shop", Ref(name=name))
    assert apiserver.count(verb="list", resource="horizontalpodautoscalers") == 1
    apiserver.create_hpa("shop", "api-hpa", target_name="api")
    now[0] = 31.0
    assert await check.owners_of("shop", Ref(name="api")) == ("HorizontalPodAutoscaler api-hpa",)
    assert apiserver.count(verb="list", resource="horizontalpodautoscalers") == 2


async def test_list_failure_propagates(kube: KubeSession, apiserver: SimApiServer) -> None:
    """Not knowing is no licence to act: a failed list raises for the caller to hold off."""
    apiserver.fail_next(1, status=503, resource="horizontalpodautoscalers")
    with pytest.raises(TransientError, match="HTTP 503"):
        await OwnerCheck(kube.api_client).owners_of("shop", Ref())


async def test_cached_owners_answer_from_fresh_lists_only(
        kube: KubeSession, apiserver: SimApiServer) -> None:
    """From memory exactly what owners_of would say, while both lists are fresh; None (ask)
    before the first LIST and once the TTL is over, never a stale "no owner"."""
    now = [0.0]
    check = OwnerCheck(kube.api_client, ttl=30, clock=lambda: now[0])
    apiserver.create_scaled_object("shop", "web-keda", target_name="web")
    assert check.cached_owners("shop", Ref()) is None
    assert await check.owners_of("shop", Ref(name="api")) == ()
    assert check.cached_owners("shop", Ref()) == ("ScaledObject web-keda",)
    assert check.cached_owners("shop", Ref(name="api")) == ()
    assert check.cached_owners("blog", Ref()) is None
    now[0] = 30.0
    assert check.cached_owners("shop", Ref()) is None
    assert apiserver.count(verb="list", resource="scaledobjects") == 1


@pytest.mark.parametrize("scope", ["cluster", "namespaces"])
async def test_the_cache_sees_an_autoscaler_come_and_go(
        kube: KubeSession, apiserver: SimApiServer, scope: WatchScope) -> None:
    """Watched, not polled: an HPA created after the lists is in the next answer, one
    deleted is gone from it, and answering makes no request."""
    async with OwnerCache(kube.api_client, scope=scope, watch_timeout=5) as cache:
        await cache.set_namespaces(["shop"])
        await eventually(lambda: cache.cached_owners("shop", Ref()) is not None)
        assert cache.cached_owners("shop", Ref()) == ()
        def asked() -> int:
            return apiserver.count(verb="list") + apiserver.count(verb="get")

        requests = asked()
        apiserver.create_hpa("shop", "web-hpa", target_name="web")
        await eventually(lambda: cache.cached_owners("shop", Ref()) != ())
        assert cache.cached_owners("shop", Ref()) == ("HorizontalPodAutoscaler web-hpa",)
        apiserver.create_scaled_object("shop", "web-keda", target_name="web")
        await eventually(lambda: len(cache.cached_owners("shop", Ref()) or ()) == 2)
        apiserver.delete("autoscaling/v2", "HorizontalPodAutoscaler", "shop", "web-hpa")
        await eventually(lambda: cache.cached_owners("shop", Ref()) == (
            "ScaledObject web-keda",))
        assert await cache.owners_of("shop", Ref(name="api")) == ()
        assert asked() == requests  # watched, not asked


async def test_the_cache_without_keda_answers_and_looks_again_later(
        kube: KubeSession, apiserver: SimApiServer) -> None:
    """KEDA not installed: synced with no ScaledObjects, not failing and not asking every
    pass; looked for again after the recheck period."""
    apiserver.registry.remove("keda.sh", "v1alpha1", "scaledobjects")
    apiserver.create_hpa("shop", "web-hpa", target_name="web")
    async with OwnerCache(kube.api_client, watch_timeout=5, absent_recheck=0.3) as cache:
        await cache.set_namespaces(["shop"])
        await eventually(lambda: cache.cached_owners("shop", Ref()) is not None)
        assert cache.cached_owners("shop", Ref()) == ("HorizontalPodAutoscaler web-hpa",)
        assert cache.failures() == []
        looks = apiserver.count(verb="list", resource="scaledobjects")
        await eventually(lambda: apiserver.count(
            verb="list", resource="scaledobjects") > looks, timeout=3)


async def test_the_cache_asks_the_server_until_it_has_listed(
        kube: KubeSession, apiserver: SimApiServer) -> None:
    """Before the first LIST completes the answer is a fresh LIST, never a guess."""
    apiserver.create_hpa("shop", "web-hpa", target_name="web")
    apiserver.delay_next(2, seconds=1.0, verb="list")
    async with OwnerCache(kube.api_client, watch_timeout=5) as cache:
        assert cache.cached_owners("shop", Ref()) is None
        assert await cache.owners_of("shop", Ref()) == ("HorizontalPodAutoscaler web-hpa",)


async def test_the_cache_reports_what_each_hpa_wants(
        kube: KubeSession, apiserver: SimApiServer) -> None:
    """Shadow mode reads an HPA's status.desiredReplicas from the watch, as it changes."""
    apiserver.create_hpa("shop", "web-hpa", target_name="web")
    rt = apiserver.resource("autoscaling/v2", "HorizontalPodAutoscaler")

    def hpa_wants(desired: int) -> None:
        apiserver.rest.patch(rt, "shop", "web-hpa", content_type="application/merge-patch+json",
                             body={"status": {"desiredReplicas": desired}}, subresource="status")

    async with OwnerCache(kube.api_client, watch_timeout=5) as cache:
        await cache.set_namespaces(["shop"])
        await eventually(lambda: cache.cached_owners("shop", Ref()) is not None)
        assert cache.reported_desired("shop", Ref()) == ()  # no status yet
        hpa_wants(4)
        await eventually(lambda: cache.reported_desired("shop", Ref()) == (
            ("HorizontalPodAutoscaler web-hpa", 4),))
        hpa_wants(6)
        await eventually(lambda: cache.reported_desired("shop", Ref()) == (
            ("HorizontalPodAutoscaler web-hpa", 6),))
        assert cache.reported_desired("shop", Ref(name="api")) == ()
