"""Never fight another controller: HPAs and ScaledObjects that target the same object."""

import pytest

from autoscaler.adapters.kube.owners import OwnerCheck
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.errors import TransientError
from tests.adapters.kube.conftest import Ref
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
