"""Discovery: apiVersion + kind to plural, scope and /scale, cached and refreshed on a miss."""

import pytest

from autoscaler.adapters.kube.discovery import Discovery, ResourceInfo
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.errors import NotFoundError
from tests.sim.apiserver import rollout_type
from tests.sim.kube import SimApiServer


@pytest.mark.parametrize(
    ("api_version", "kind", "plural"),
    [("apps/v1", "Deployment", "deployments"), ("apps/v1", "StatefulSet", "statefulsets"),
     ("apps/v1", "ReplicaSet", "replicasets"), ("example.com/v1", "Rollout", "rollouts")],
    ids=["deployment", "statefulset", "replicaset", "custom-resource"],
)
async def test_scalable_kinds(kube: KubeSession, api_version: str, kind: str,
                              plural: str) -> None:
    """Workloads and a custom resource resolve to their plural with a /scale subresource."""
    info = await Discovery(kube.api_client).resolve(api_version, kind)
    assert (info.plural, info.namespaced, info.scalable) == (plural, True, True)
    assert info.api_version == api_version


async def test_core_group_and_no_scale(kube: KubeSession) -> None:
    """The core group is discovered through /api/v1; Pods have no /scale."""
    info = await Discovery(kube.api_client).resolve("v1", "Pod")
    assert info == ResourceInfo(group="", version="v1", kind="Pod", plural="pods",
                                namespaced=True, scalable=False)


async def test_cached_per_group_version(kube: KubeSession, apiserver: SimApiServer) -> None:
    """Two kinds of one groupVersion cost one discovery request."""
    discovery = Discovery(kube.api_client)
    await discovery.resolve("apps/v1", "Deployment")
    await discovery.resolve("apps/v1", "StatefulSet")
    await discovery.resolve("apps/v1", "Deployment")
    assert discovery.fetches == 1
    assert [r.path.rstrip("/") for r in apiserver.log.records] == ["/apis/apps/v1"]


@pytest.mark.parametrize(
    ("api_version", "kind", "message"),
    [("apps/v1", "Widget", "serves no kind 'Widget' in apps/v1"),
     ("nothing.example/v1", "Widget", "serves no API group version nothing.example/v1"),
     ("a/b/c", "Widget", "is not an apiVersion")],
    ids=["unknown-kind", "unknown-group", "malformed"],
)
async def test_unknown(kube: KubeSession, api_version: str, kind: str, message: str) -> None:
    """An unknown kind or group is a NotFoundError saying what is missing."""
    with pytest.raises(NotFoundError, match=message):
        await Discovery(kube.api_client).resolve(api_version, kind)


async def test_kind_added_at_run_time(kube: KubeSession, apiserver: SimApiServer) -> None:
    """A CRD installed after the first lookup is found on the next miss."""
    discovery = Discovery(kube.api_client, refresh_interval=0)
    with pytest.raises(NotFoundError):
        await discovery.resolve("argoproj.io/v1alpha1", "Rollout")
    apiserver.add_custom_resource(rollout_type("argoproj.io", "v1alpha1"))
    info = await discovery.resolve("argoproj.io/v1alpha1", "Rollout")
    assert (info.plural, info.scalable) == ("rollouts", True)


async def test_refresh_on_miss_is_throttled(kube: KubeSession) -> None:
    """Within refresh_interval a repeated miss is answered from the cache."""
    discovery = Discovery(kube.api_client, refresh_interval=60)
    for _ in range(3):
        with pytest.raises(NotFoundError):
            await discovery.resolve("apps/v1", "Widget")
    assert discovery.fetches == 1
