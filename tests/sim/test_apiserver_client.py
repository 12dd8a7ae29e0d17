"""The simulated API server as kubernetes-asyncio sees it over real HTTPS."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.sim.kube import SimApiServer, api_client, apiserver, run_apiserver, wait_until

__all__ = ["apiserver"]

SCALE = ("apps", "v1", "default", "deployments", "web")


async def _status(call: Any) -> dict[str, Any]:
    with pytest.raises(ApiException) as caught:
        await call
    body = json.loads(caught.value.body)
    assert body["code"] == caught.value.status
    return body


async def test_list_pods_by_label_selector(apiserver: SimApiServer) -> None:
    """A label-selected list returns only matching pods, without kind on the items."""
    apiserver.create_deployment("default", "web", replicas=3)
    apiserver.create_deployment("default", "db", replicas=1)
    async with api_client(apiserver) as session:
        pods = await client.CoreV1Api(session).list_namespaced_pod(
            "default", label_selector="app=web", _preload_content=False)
        body = await pods.json()
    assert len(body["items"]) == 3
    assert body["metadata"]["resourceVersion"] == str(apiserver.store.resource_version)
    assert all("kind" not in item and "apiVersion" not in item for item in body["items"])


async def test_field_selector_on_pod_phase(apiserver: SimApiServer) -> None:
    """fieldSelector=status.phase=Running selects by phase; an unknown field is a 400."""
    apiserver.create_deployment("default", "web", replicas=2)
    async with api_client(apiserver) as session:
        core = client.CoreV1Api(session)
        running = await core.list_namespaced_pod("default", field_selector="status.phase=Running")
        pending = await core.list_namespaced_pod("default", field_selector="status.phase=Pending")
        body = await _status(core.list_namespaced_pod("default", field_selector="spec.foo=x"))
    assert (len(running.items), len(pending.items)) == (2, 0)
    assert body["reason"] == "BadRequest"


async def test_watch_follows_a_scale_up(apiserver: SimApiServer) -> None:
    """A watch from a list's resourceVersion sees the pods a scale-up creates."""
    apiserver.create_deployment("default", "web", replicas=1)
    async with api_client(apiserver) as session:
        core = client.CoreV1Api(session)
        listed = await core.list_namespaced_pod("default")
        apiserver.set_replicas("Deployment", "default", "web", 3)
        added: set[str] = set()
        async with watch.Watch() as w:
            async for event in w.stream(core.list_namespaced_pod, "default",
                                        resource_version=listed.metadata.resource_version,
                                        timeout_seconds=5, _request_timeout=10):
                if event["type"] == "ADDED":
                    added.add(event["object"].metadata.name)
                if len(added) == 2:
                    break
    assert len(added) == 2


async def test_get_and_replace_scale_with_a_stale_resource_version(
        apiserver: SimApiServer) -> None:
    """GET /scale then PUT with its resourceVersion works once; the stale one gets 409."""
    apiserver.create_deployment("default", "web", replicas=2)
    async with api_client(apiserver) as session:
        custom = client.CustomObjectsApi(session)
        scale = await custom.get_namespaced_custom_object_scale(*SCALE)
        assert (scale["spec"]["replicas"], scale["status"]["selector"]) == (2, "app=web")
        scale["spec"]["replicas"] = 4
        written = await custom.replace_namespaced_custom_object_scale(*SCALE, scale)
        scale["spec"]["replicas"] = 5
        body = await _status(custom.replace_namespaced_custom_object_scale(*SCALE, scale))
    assert written["spec"]["replicas"] == 4
    assert int(written["metadata"]["resourceVersion"]) > int(scale["metadata"]["resourceVersion"])
    assert (body["reason"], body["details"]) == (
        "Conflict", {"name": "web", "group": "apps", "kind": "deployments"})


async def test_patch_scale_content_types(apiserver: SimApiServer) -> None:
    """Merge patch via _content_type works; a dict sent as JSON Patch is a 400."""
    apiserver.create_deployment("default", "web", replicas=1)
    async with api_client(apiserver) as session:
        custom = client.CustomObjectsApi(session)
        patched = await custom.patch_namespaced_custom_object_scale(
            *SCALE, {"spec": {"replicas": 3}}, _content_type="application/merge-patch+json")
        body = await _status(custom.patch_namespaced_custom_object_scale(
            *SCALE, {"spec": {"replicas": 4}}))
        json_patched = await custom.patch_namespaced_custom_object_scale(
            *SCALE, [{"op": "replace", "path": "/spec/replicas", "value": 2}])
    assert patched["spec"]["replicas"] == 3
    assert body["reason"] == "BadRequest"
    assert json_patched["spec"]["replicas"] == 2


async def test_scale_to_zero_omits_spec_replicas(apiserver: SimApiServer) -> None:
    """autoscaling/v1 Scale has spec.replicas omitempty: zero arrives as an empty spec."""
    apiserver.create_deployment("default", "web", replicas=0)
    async with api_client(apiserver) as session:
        scale = await client.CustomObjectsApi(session).get_namespaced_custom_object_scale(*SCALE)
    assert scale["spec"] == {}


async def test_missing_object_is_a_not_found_status(apiserver: SimApiServer) -> None:
    """GET of a missing deployment is a 404 Status naming the group resource."""
    async with api_client(apiserver) as session:
        body = await _status(client.AppsV1Api(session).read_namespaced_deployment(
            "nope", "default"))
    assert body["message"] == 'deployments.apps "nope" not found'
    assert body["reason"] == "NotFound"


@pytest.mark.parametrize(("timeout_seconds", "watch_requests"), [(None, 2), (5, 1)],
                         ids=["watch-forever-retries-once", "with-timeout-raises-at-once"])
async def test_watch_from_a_compacted_version_raises_410(
        apiserver: SimApiServer, timeout_seconds: int | None, watch_requests: int) -> None:
    """An expired resourceVersion is a 200 stream with ERROR 410; the client raises 410."""
    apiserver.create_deployment("default", "web", replicas=1)
    old = str(apiserver.store.resource_version)
    apiserver.set_replicas("Deployment", "default", "web", 2)
    apiserver.compact()
    kwargs = {"timeout_seconds": timeout_seconds} if timeout_seconds else {}

    async def drain() -> None:
        async with api_client(apiserver) as session, watch.Watch() as w:
            async for _ in w.stream(client.CoreV1Api(session).list_namespaced_pod, "default",
                                    resource_version=old, _request_timeout=10, **kwargs):
                pass

    with pytest.raises(ApiException) as caught:
        await drain()
    assert caught.value.status == 410
    assert apiserver.count(verb="watch", resource="pods", status=200) == watch_requests


async def test_expire_watches_ends_open_streams(apiserver: SimApiServer) -> None:
    """expire_watches() ends a stream; a watch with timeout_seconds then stops iterating."""
    async with api_client(apiserver) as session:
        core = client.CoreV1Api(session)

        async def consume() -> int:
            seen = 0
            async with watch.Watch() as w:
                async for _ in w.stream(core.list_namespaced_pod, "default",
                                        timeout_seconds=30, _request_timeout=35):
                    seen += 1
            return seen

        task = asyncio.create_task(consume())
        await wait_until(lambda: apiserver.open_watches == 1)
        assert apiserver.expire_watches() == 1
        assert await asyncio.wait_for(task, 5) == 0


def _lease(renew_time: str) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "leader"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": renew_time}}


@pytest.mark.parametrize("renew_time", [
    "2026-01-01T00:00:00.123456Z", "2026-01-01T00:00:00.123456+02:00",
], ids=["micro-utc", "micro-offset"])
async def test_lease_micro_time_accepted(apiserver: SimApiServer, renew_time: str) -> None:
    """Lease renewTime with six fractional digits and a zone is stored as sent."""
    async with api_client(apiserver) as session:
        await client.CoordinationV1Api(session).create_namespaced_lease(
            "default", _lease(renew_time))
    assert apiserver.get("coordination.k8s.io/v1", "Lease", "default", "leader")[
        "spec"]["renewTime"] == renew_time


@pytest.mark.parametrize("renew_time", [
    "2026-01-01T00:00:00Z", "2026-01-01T00:00:00.123Z", "2026-01-01T00:00:00.123456",
], ids=["no-fraction", "millis", "no-zone"])
async def test_lease_micro_time_refused(apiserver: SimApiServer, renew_time: str) -> None:
    """Lease renewTime in any other form is a 400, as a real server's decoder answers."""
    async with api_client(apiserver) as session:
        body = await _status(client.CoordinationV1Api(session).create_namespaced_lease(
            "default", _lease(renew_time)))
    assert body["reason"] == "BadRequest"
    assert apiserver.get("coordination.k8s.io/v1", "Lease", "default", "leader") is None


async def test_lease_update_needs_the_current_resource_version(apiserver: SimApiServer) -> None:
    """Two electors updating one Lease: the second with the old resourceVersion gets 409."""
    async with api_client(apiserver) as session:
        api = client.CoordinationV1Api(session)
        created = await api.create_namespaced_lease("default", client.V1Lease(
            metadata=client.V1ObjectMeta(name="leader"),
            spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15)))
        created.spec.holder_identity = "b"
        await api.replace_namespaced_lease("leader", "default", created)
        created.spec.holder_identity = "c"
        body = await _status(api.replace_namespaced_lease("leader", "default", created))
        current = await api.read_namespaced_lease("leader", "default")
    assert body["reason"] == "Conflict"
    assert current.spec.holder_identity == "b"


async def test_unknown_token_is_401(apiserver: SimApiServer, tmp_path: Any) -> None:
    """A kubeconfig with a token the server does not know gets 401 Unauthorized."""
    config = apiserver.write_kubeconfig(tmp_path / "bad", token="wrong")
    async with api_client(apiserver, kubeconfig=config) as session:
        body = await _status(client.CoreV1Api(session).list_namespaced_pod("default"))
    assert body["reason"] == "Unauthorized"


async def test_denied_verb_is_403(apiserver: SimApiServer) -> None:
    """deny() makes the scale update forbidden for the token while get stays allowed."""
    apiserver.create_deployment("default", "web", replicas=1)
    apiserver.deny("update", "deployments/scale")
    async with api_client(apiserver) as session:
        custom = client.CustomObjectsApi(session)
        scale = await custom.get_namespaced_custom_object_scale(*SCALE)
        body = await _status(custom.replace_namespaced_custom_object_scale(*SCALE, scale))
    assert body["reason"] == "Forbidden"
    assert 'cannot update resource "deployments/scale" in API group "apps"' in body["message"]


async def test_fail_next_injects_a_status(apiserver: SimApiServer) -> None:
    """fail_next(1, 503) fails exactly one matching request with a Status body."""
    apiserver.fail_next(1, status=503, verb="list", resource="pods")
    async with api_client(apiserver) as session:
        core = client.CoreV1Api(session)
        body = await _status(core.list_namespaced_pod("default"))
        again = await core.list_namespaced_pod("default")
    assert (body["code"], body["reason"]) == (503, "ServiceUnavailable")
    assert again.items == []


async def test_discovery_lists_scale_subresources(apiserver: SimApiServer) -> None:
    """get_api_resources lists deployments/scale as autoscaling/v1 Scale, and the CR's too."""
    async with api_client(apiserver) as session:
        apps = await client.AppsV1Api(session).get_api_resources()
        custom = await client.CustomObjectsApi(session).get_api_resources("example.com", "v1")
    names = {r.name: r for r in apps.resources}
    assert (names["deployments/scale"].group, names["deployments/scale"].kind) == (
        "autoscaling", "Scale")
    assert "rollouts/scale" in {r.name for r in custom.resources}


async def test_events_are_one_storage_in_two_api_groups(apiserver: SimApiServer) -> None:
    """An events.k8s.io/v1 Event is listed by core/v1 with involvedObject and message."""
    event = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
             "metadata": {"generateName": "web."},
             "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "autoscaler",
             "reportingInstance": "a-1", "action": "Scale", "reason": "SuccessfulRescale",
             "type": "Normal", "note": "New size: 3",
             "regarding": {"kind": "Deployment", "name": "web", "namespace": "default"}}
    async with api_client(apiserver) as session:
        await client.EventsV1Api(session).create_namespaced_event("default", event)
        listed = await client.CoreV1Api(session).list_namespaced_event(
            "default", field_selector="involvedObject.name=web")
    assert [(e.reason, e.message, e.involved_object.kind) for e in listed.items] == [
        ("SuccessfulRescale", "New size: 3", "Deployment")]


async def test_client_hanging_up_ends_its_watch(apiserver: SimApiServer) -> None:
    """When the client drops a watch connection, the server forgets the watch at once."""
    async with api_client(apiserver) as session:
        core = client.CoreV1Api(session)

        async def follow() -> None:
            async with watch.Watch() as w:
                async for _ in w.stream(core.list_namespaced_pod, "default",
                                        timeout_seconds=60, _request_timeout=70):
                    pass

        task = asyncio.create_task(follow())
        await wait_until(lambda: apiserver.open_watches == 1)
        task.cancel()
        await wait_until(lambda: apiserver.open_watches == 0)
    assert task.cancelled()


async def test_startup_is_fast_and_stop_ends_watches() -> None:
    """A server starts well under a second and its exit ends an open watch cleanly."""
    loop = asyncio.get_running_loop()
    async with contextlib.AsyncExitStack() as clients:  # outlives the server
        started = loop.time()
        async with run_apiserver() as api:
            assert loop.time() - started < 1.0
            core = client.CoreV1Api(await clients.enter_async_context(api_client(api)))

            async def follow() -> int:
                seen = 0
                async with watch.Watch() as w:
                    async for _ in w.stream(core.list_namespaced_pod, "default",
                                            timeout_seconds=60, _request_timeout=70):
                        seen += 1
                return seen

            task = asyncio.create_task(follow())
            await wait_until(lambda: api.open_watches == 1)
        assert await asyncio.wait_for(task, 5) == 0


async def test_core_events_have_null_event_time_in_the_events_api(
        apiserver: SimApiServer) -> None:
    """A core/v1 Event without eventTime shows eventTime null through events.k8s.io/v1, which
    kubernetes-asyncio's EventsV1Api refuses to deserialize, as on a real cluster."""
    async with api_client(apiserver) as session:
        await client.CoreV1Api(session).create_namespaced_event("default", client.CoreV1Event(
            metadata=client.V1ObjectMeta(name="web.1"), reason="Scaled", message="m",
            involved_object=client.V1ObjectReference(kind="Deployment", name="web",
                                                     namespace="default")))
        raw = await client.EventsV1Api(session).list_namespaced_event(
            "default", _preload_content=False)
        items = (await raw.json())["items"]
        with pytest.raises(ValueError, match="event_time"):
            await client.EventsV1Api(session).list_namespaced_event("default")
    assert items[0]["eventTime"] is None
    assert items[0]["note"] == "m"


async def test_after_next_makes_a_genuine_race(apiserver: SimApiServer) -> None:
    """after_next + touch: another writer right after our GET turns our PUT into a real 409."""
    apiserver.create_deployment("default", "web", replicas=2)
    apiserver.after_next(verb="get", resource="deployments/scale", action=lambda: apiserver.touch(
        "apps/v1", "Deployment", "default", "web"))
    async with api_client(apiserver) as session:
        custom = client.CustomObjectsApi(session)
        scale = await custom.get_namespaced_custom_object_scale(*SCALE)
        scale["spec"]["replicas"] = 3
        body = await _status(custom.replace_namespaced_custom_object_scale(*SCALE, scale))
        fresh = await custom.get_namespaced_custom_object_scale(*SCALE)
    assert body["reason"] == "Conflict"
    assert fresh["spec"]["replicas"] == 2
    assert fresh["metadata"]["resourceVersion"] != scale["metadata"]["resourceVersion"]


async def test_a_failed_write_then_a_touch_moves_only_the_resource_version(
        apiserver: SimApiServer) -> None:
    """fail_next(500, then=touch): the PUT is not applied, yet the object's resourceVersion
    moves (as a controller's status update moves it on a real cluster)."""
    apiserver.create_deployment("default", "web", replicas=2)
    apiserver.fail_next(1, status=500, verb="update", resource="deployments/scale",
                        then=lambda: apiserver.touch("apps/v1", "Deployment", "default", "web"))
    async with api_client(apiserver) as session:
        custom = client.CustomObjectsApi(session)
        scale = await custom.get_namespaced_custom_object_scale(*SCALE)
        scale["spec"]["replicas"] = 3
        body = await _status(custom.replace_namespaced_custom_object_scale(*SCALE, scale))
        fresh = await custom.get_namespaced_custom_object_scale(*SCALE)
    assert body["code"] == 500
    assert fresh["spec"]["replicas"] == 2
    assert fresh["metadata"]["resourceVersion"] != scale["metadata"]["resourceVersion"]


async def test_a_held_request_is_served_when_released_against_the_objects_then(
        apiserver: SimApiServer) -> None:
    """hold_next: a PUT waits unserved while another writer writes; released, it is served
    against the object as it is then, so its stale resourceVersion is a 409."""
    apiserver.create_deployment("default", "web", replicas=2)
    held = apiserver.hold_next(verb="update", resource="deployments/scale")
    async with api_client(apiserver) as session:
        custom = client.CustomObjectsApi(session)
        scale = await custom.get_namespaced_custom_object_scale(*SCALE)
        scale["spec"]["replicas"] = 3
        put = asyncio.create_task(_status(custom.replace_namespaced_custom_object_scale(
            *SCALE, scale)))
        await wait_until(lambda: held.arrived == 1)
        apiserver.touch("apps/v1", "Deployment", "default", "web")
        assert not put.done()
        held.release()
        body = await asyncio.wait_for(put, 5)
    assert body["reason"] == "Conflict"
