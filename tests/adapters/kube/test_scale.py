"""/scale of any scalable kind: read, and write with its resourceVersion (a race is a conflict)."""

import json
from typing import Any

import pytest

from autoscaler.adapters.kube.discovery import Discovery
from autoscaler.adapters.kube.scale import ScaleClient
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.adapters.kube.structs import Scale
from autoscaler.adapters.kube.target_cache import TargetCache, scale_from_object
from autoscaler.errors import (
    AccessDeniedError,
    BadDataError,
    ConflictError,
    NotFoundError,
    ThrottledError,
)
from tests.adapters.kube.conftest import Ref
from tests.sim.kube import SimApiServer


def scales(kube: KubeSession) -> ScaleClient:
    return ScaleClient(kube.api_client, Discovery(kube.api_client))


def spec_replicas(api: SimApiServer, ref: Ref, namespace: str = "default") -> int:
    obj = api.get(ref.api_version, ref.kind, namespace, ref.name)
    assert obj is not None
    return int(obj["spec"]["replicas"])


@pytest.mark.parametrize(
    "ref",
    [Ref(), Ref(kind="StatefulSet"), Ref(kind="ReplicaSet"),
     Ref(api_version="example.com/v1", kind="Rollout")],
    ids=["deployment", "statefulset", "replicaset", "custom-resource"],
)
async def test_get_and_update(kube: KubeSession, apiserver: SimApiServer, ref: Ref) -> None:
    """GET /scale gives replicas, selector and uid; a PUT with its resourceVersion writes."""
    created = apiserver.create_workload(ref.kind, "shop", "web", replicas=2,
                                        labels={"app": "web", "tier": "front"},
                                        api_version=ref.api_version)
    client = scales(kube)
    scale = await client.get_scale("shop", ref)
    assert (scale.spec_replicas, scale.target.uid) == (2, created["metadata"]["uid"])
    assert scale.pod_selector().matches({"app": "web", "tier": "front"})
    written = await client.update_scale("shop", ref, 5, scale.resource_version)
    assert written.spec_replicas == 5
    assert spec_replicas(apiserver, ref, "shop") == 5
    assert client.uid_of("shop", ref) == created["metadata"]["uid"]


async def test_stale_resource_version_is_a_conflict(kube: KubeSession,
                                                    apiserver: SimApiServer) -> None:
    """A write carrying an old resourceVersion is refused with ConflictError, not applied."""
    apiserver.create_deployment("default", "web", replicas=2)
    client = scales(kube)
    scale = await client.get_scale("default", Ref())
    apiserver.set_replicas("Deployment", "default", "web", 3)
    with pytest.raises(ConflictError, match="update /scale of Deployment default/web"):
        await client.update_scale("default", Ref(), 7, scale.resource_version)
    assert spec_replicas(apiserver, Ref()) == 3


async def test_missing_target_and_kind_without_scale(kube: KubeSession) -> None:
    """A missing object and a kind without /scale are NotFoundErrors."""
    client = scales(kube)
    with pytest.raises(NotFoundError, match="HTTP 404"):
        await client.get_scale("default", Ref(name="absent"))
    with pytest.raises(NotFoundError, match="has no /scale"):
        await client.get_scale("default", Ref(api_version="v1", kind="ConfigMap"))


async def test_forbidden_write(kube: KubeSession, apiserver: SimApiServer) -> None:
    """A 403 on the write is a AccessDeniedError carrying the server's message."""
    apiserver.create_deployment("default", "web", replicas=2)
    apiserver.deny("update", "deployments/scale")
    client = scales(kube)
    scale = await client.get_scale("default", Ref())
    with pytest.raises(AccessDeniedError, match="HTTP 403"):
        await client.update_scale("default", Ref(), 3, scale.resource_version)


def test_scale_without_selector() -> None:
    """Upstream refuses a target whose /scale has no selector: a clear BadDataError."""
    from autoscaler.adapters.kube.scale import scale_from_json
    from autoscaler.adapters.kube.structs import ObjectRef

    target = ObjectRef(api_version="example.com/v1", kind="Rollout", namespace="ns", name="r")
    scale = scale_from_json({"spec": {"replicas": 1}, "status": {"replicas": 1}}, target)
    with pytest.raises(BadDataError, match="selector is required"):
        scale.pod_selector()
    with pytest.raises(BadDataError, match="is not a Scale"):
        scale_from_json({"spec": {"replicas": "many"}}, target)


async def test_object_read_denied_fails_closed(kube: KubeSession,
                                               apiserver: SimApiServer) -> None:
    """Without get on the object its annotations (pause) are unknown: an error naming the
    missing rule, never a Scale that looks unpaused."""
    ref = Ref(api_version="example.com/v1", kind="Rollout")
    apiserver.create_workload("Rollout", "shop", "web", api_version=ref.api_version)
    apiserver.deny("get", "rollouts")
    with pytest.raises(AccessDeniedError, match="grant get on rollouts"):
        await scales(kube).get_scale("shop", ref)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"spec": {}, "status": {}}, (1, 0, "")),
        ({"spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}}},
          "status": {"replicas": 2}}, (0, 2, "app=web")),
    ],
    ids=["defaults", "explicit"],
)
def test_scale_from_object(raw: dict[str, Any], expected: tuple[int, int, str]) -> None:
    """An apps/v1 object's Scale: spec.replicas defaults to 1, status.replicas to 0."""
    from autoscaler.adapters.kube.target_cache import scale_from_object

    raw["metadata"] = {"name": "web", "namespace": "shop", "resourceVersion": "7",
                       "annotations": {"a": "b"}}
    scale = scale_from_object(raw, kind="Deployment")
    assert (scale.spec_replicas, scale.status_replicas, scale.selector) == expected
    assert (scale.resource_version, dict(scale.annotations)) == ("7", {"a": "b"})


def test_objects_without_annotations_share_one_empty_map_and_their_namespace() -> None:
    """Most workloads have no annotations: each held an empty map of its own (0.11 KB), and
    its own copy of its namespace's name, for every cached target."""

    def listed(name: str) -> Scale:  # parsed apart, as two objects of a LIST's pages are
        raw = json.loads(json.dumps({"metadata": {"name": name, "namespace": "shop-" + "x"}}))
        return scale_from_object(raw, kind="Deployment")

    web, api = listed("web"), listed("api")
    assert web.annotations is api.annotations
    assert not web.annotations
    assert web.target.namespace is api.target.namespace


def test_scale_from_garbage_object() -> None:
    """An object without a name or with a non-numeric replicas is a BadDataError."""
    from autoscaler.adapters.kube.target_cache import scale_from_object

    with pytest.raises(BadDataError, match="not a valid object"):
        scale_from_object({"metadata": {"namespace": "shop"}}, kind="Deployment")
    with pytest.raises(BadDataError, match="not a valid object"):
        scale_from_object({"metadata": {"namespace": "shop", "name": "web"},
                           "spec": {"replicas": "many"}}, kind="Deployment")


async def test_throttled_write_says_how_long_to_wait(
        kube: KubeSession, apiserver: SimApiServer) -> None:
    """A 429 on PUT /scale is a ThrottledError carrying the server's Retry-After."""
    apiserver.create_workload("Deployment", "shop", "web", replicas=2)
    client = scales(kube)
    scale = await client.get_scale("shop", Ref())
    apiserver.fail_next(1, status=429, retry_after=7, verb="update",
                        resource="deployments/scale")
    with pytest.raises(ThrottledError, match="HTTP 429") as caught:
        await client.update_scale("shop", Ref(), 3, scale.resource_version)
    assert caught.value.retry_after == 7.0
    assert spec_replicas(apiserver, Ref(), "shop") == 2


async def test_a_fresh_read_bypasses_the_watch_cache(
        kube: KubeSession, apiserver: SimApiServer) -> None:
    """``fresh=True`` asks the server even when the cache could answer (settling whether an
    earlier write landed, re-reading after a conflict)."""
    apiserver.create_workload("Deployment", "shop", "web", replicas=2)
    async with TargetCache(kube.api_client, watch_timeout=5) as cache:
        await cache.set_namespaces(["shop"])
        await cache.wait_synced("shop")
        client = ScaleClient(kube.api_client, Discovery(kube.api_client), targets=cache)
        await client.get_scale("shop", Ref())
        assert apiserver.count(verb="get", resource="deployments/scale") == 0
        await client.get_scale("shop", Ref(), fresh=True)
        assert apiserver.count(verb="get", resource="deployments/scale") == 1


async def test_a_read_from_the_server_says_who_last_set_the_replicas(
    kube: KubeSession, apiserver: SimApiServer,
) -> None:
    """A kind not watched (a custom resource): the object's managed fields tell."""
    ref = Ref(api_version="example.com/v1", kind="Rollout")
    apiserver.create_workload(ref.kind, "shop", "web", replicas=2, labels={"app": "web"},
                              api_version=ref.api_version)
    client = scales(kube)
    read = await client.get_scale("shop", ref)
    await client.update_scale("shop", ref, 0, read.resource_version)
    assert (await client.get_scale("shop", ref, fresh=True)).replicas_managers == (
        "autoscaler",)
    (put,) = [r for r in apiserver.log.records if r.verb == "update"]
    assert put.query.get("fieldManager") == "autoscaler"


@pytest.mark.parametrize(("metadata", "expected"), [
    ({}, None),
    ({"managedFields": []}, None),
    ({"managedFields": [{"manager": "kubectl", "time": "2026-01-01T00:00:00Z",
                         "fieldsV1": {"f:metadata": {}}}]}, ()),
    ({"managedFields": [
        {"manager": "old", "time": "2026-01-01T00:00:00Z",
         "fieldsV1": {"f:spec": {"f:replicas": {}}}},
        {"manager": "keda", "time": "2026-01-02T00:00:00Z", "subresource": "scale",
         "fieldsV1": {"f:spec": {"f:replicas": {}}}},
        "garbage", {"time": "x"}]}, ("keda", "old")),
], ids=["none", "empty", "nobody-owns-replicas", "newest-first"])
def test_replicas_managers(metadata: dict[str, Any], expected: tuple[str, ...] | None) -> None:
    from autoscaler.adapters.kube.structs import replicas_managers

    assert replicas_managers(metadata) == expected
