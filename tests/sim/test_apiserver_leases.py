"""The Lease history an oracle reads, and Leases as kubectl shows them, over real HTTPS."""

from __future__ import annotations

import asyncio
import shutil
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.sim.apiserver.server import DEFAULT_USER
from tests.sim.kube import MEMBER_B, SimApiServer, api_client, apiserver, kubectl, other, wait_until

__all__ = ["apiserver", "other"]

MERGE = "application/merge-patch+json"


def _lease(name: str, holder: str) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 3,
                     "leaseTransitions": 0,
                     "renewTime": "2026-01-01T00:00:00.000000Z"}}


def _summary(apiserver: SimApiServer) -> list[tuple[Any, ...]]:
    return [(w.name, w.verb, w.user, w.holder, w.transitions)
            for w in apiserver.lease_history]


async def _raw(call: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The JSON answer as sent: kubernetes-asyncio's models would re-render MicroTime
    without its six digits, which the server refuses."""
    response = await call(*args, _preload_content=False, **kwargs)
    body: dict[str, Any] = await response.json()
    return body


def _renewed(lease: dict[str, Any], renew_time: str, **spec: Any) -> dict[str, Any]:
    return {**lease, "spec": {**lease["spec"], "renewTime": renew_time, **spec}}


async def test_the_history_lists_each_applied_write_with_its_user(
        apiserver: SimApiServer, other: Any) -> None:
    """A creates and renews its Lease, B evicts it (takes it over), A's stale renewal is
    refused (absent from the history), B annotates it by merge patch, A deletes it: the
    history lists the five applied writes, each with its verb, user and holder."""
    async with api_client(apiserver) as session:
        mine, theirs = client.CoordinationV1Api(session), client.CoordinationV1Api(other)
        created = await _raw(mine.create_namespaced_lease, "default", _lease("member-a", "a"))
        renewed = await _raw(mine.replace_namespaced_lease, "member-a", "default",
                             _renewed(created, "2026-01-01T00:00:01.000000Z"))
        seen = await _raw(theirs.read_namespaced_lease, "member-a", "default")
        evicted = await _raw(theirs.replace_namespaced_lease, "member-a", "default", _renewed(
            seen, "2026-01-01T00:00:05.000000Z", holderIdentity="b", leaseTransitions=1))
        with pytest.raises(ApiException) as caught:
            await mine.replace_namespaced_lease("member-a", "default", _renewed(
                renewed, "2026-01-01T00:00:02.000000Z"))
        assert caught.value.status == 409
        annotated = await _raw(
            theirs.patch_namespaced_lease, "member-a", "default",
            {"metadata": {"annotations": {"example.com/why": "expired"}}}, _content_type=MERGE)
        await mine.delete_namespaced_lease("member-a", "default")
    assert _summary(apiserver) == [
        ("member-a", "create", DEFAULT_USER, "a", 0),
        ("member-a", "update", DEFAULT_USER, "a", 0),
        ("member-a", "update", MEMBER_B, "b", 1),
        ("member-a", "patch", MEMBER_B, "b", 1),
        ("member-a", "delete", DEFAULT_USER, "b", 1)]
    history = apiserver.lease_history
    assert [w.resource_version for w in history[:4]] == [
        body["metadata"]["resourceVersion"] for body in (created, renewed, evicted, annotated)]
    assert history[3].annotations == {"example.com/why": "expired"}
    assert [w.renew_time for w in history[:3]] == [
        "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:01.000000Z",
        "2026-01-01T00:00:05.000000Z"]
    assert [w.applied for w in history] == sorted(w.applied for w in history)


async def test_the_history_stamps_writes_with_the_request_log_clock(
        apiserver: SimApiServer) -> None:
    """A Lease write's applied time is its request's applied time (one clock for both)."""
    async with api_client(apiserver) as session:
        await client.CoordinationV1Api(session).create_namespaced_lease(
            "default", _lease("member-a", "a"))
    (write,) = apiserver.lease_history
    (record,) = apiserver.requests(verb="create", resource="leases")
    assert record.applied is not None
    assert record.arrived <= write.applied <= record.applied


async def test_only_committed_lease_writes_are_recorded(apiserver: SimApiServer) -> None:
    """A dry run, a no-op update and a ConfigMap write leave no entry; the test's own
    helper write is recorded without a user."""
    apiserver.create(_lease("seeded", "x"))
    async with api_client(apiserver) as session:
        leases = client.CoordinationV1Api(session)
        await leases.create_namespaced_lease("default", _lease("dry", "a"), dry_run="All")
        current = await _raw(leases.read_namespaced_lease, "seeded", "default")
        await leases.replace_namespaced_lease("seeded", "default", current)
        await client.CoreV1Api(session).create_namespaced_config_map(
            "default", {"metadata": {"name": "state"}})
    assert _summary(apiserver) == [("seeded", "create", None, "x", 0)]


@pytest.mark.skipif(shutil.which("kubectl") is None,
                    reason="LOUD: the real kubectl is not on PATH; fidelity unproven")
async def test_kubectl_shows_leases_and_a_hand_delete_is_in_the_history(
        apiserver: SimApiServer) -> None:
    """kubectl get leases prints NAME HOLDER AGE as on a real cluster; deleting one by
    hand with kubectl shows up in the history as the kubectl user's delete."""
    apiserver.create(_lease("bucket-017", "autoscaler-1-9d0e11"))
    apiserver.create({**_lease("released", ""), "spec": {"leaseDurationSeconds": 3}})
    result = (await kubectl(apiserver, "get", "leases")).check()
    header, *rows = [line.split() for line in result.stdout.strip().splitlines()]
    assert header == ["NAME", "HOLDER", "AGE"]
    assert [row[:2] for row in rows] == [["bucket-017", "autoscaler-1-9d0e11"],
                                         ["released", rows[1][1]]]  # no holder: an empty cell
    assert [len(row) for row in rows] == [3, 2]
    (await kubectl(apiserver, "delete", "lease", "bucket-017")).check()
    assert _summary(apiserver)[-1] == ("bucket-017", "delete", DEFAULT_USER,
                                       "autoscaler-1-9d0e11", 0)


async def test_leases_list_and_watch_by_label(apiserver: SimApiServer) -> None:
    """A ring's Leases are found by label: the LIST and the WATCH skip another ring's."""
    def ring_lease(name: str, ring: str) -> dict[str, Any]:
        lease = _lease(name, "a")
        lease["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "autoscaler",
                                       "autoscaler.dev/ring": ring}
        return lease

    apiserver.create(ring_lease("r1-member-a", "r1"))
    apiserver.create(ring_lease("r2-member-a", "r2"))
    seen: list[str] = []
    async with api_client(apiserver) as session:
        leases = client.CoordinationV1Api(session)
        listed = await _raw(leases.list_namespaced_lease, "default",
                            label_selector="autoscaler.dev/ring=r1")

        async def follow() -> None:
            async with watch.Watch() as w:
                async for event in w.stream(
                        leases.list_namespaced_lease, "default",
                        label_selector="autoscaler.dev/ring=r1",
                        resource_version=listed["metadata"]["resourceVersion"],
                        timeout_seconds=30, _request_timeout=40):
                    seen.append(event["object"].metadata.name)

        task = asyncio.create_task(follow())
        try:
            await wait_until(lambda: apiserver.open_watches == 1)
            apiserver.create(ring_lease("r2-member-b", "r2"))
            apiserver.create(ring_lease("r1-member-b", "r1"))
            await wait_until(lambda: seen == ["r1-member-b"])
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert [item["metadata"]["name"] for item in listed["items"]] == ["r1-member-a"]


async def test_lease_at_answers_who_held_a_lease_when_a_write_landed(
        apiserver: SimApiServer, other: Any) -> None:
    """lease_at: before the create None, then A's, then B's after B's takeover, None after
    the delete; a PUT /scale applied between the takeover and the delete saw B."""
    apiserver.create_deployment("default", "web", replicas=1)
    async with api_client(apiserver) as session:
        mine, theirs = client.CoordinationV1Api(session), client.CoordinationV1Api(other)
        created = await _raw(mine.create_namespaced_lease, "default", _lease("bucket-7", "a"))
        await _raw(theirs.replace_namespaced_lease, "bucket-7", "default",
                   _renewed(created, "2026-01-01T00:00:05.000000Z", holderIdentity="b"))
        custom = client.CustomObjectsApi(other)
        scale = await custom.get_namespaced_custom_object_scale(
            "apps", "v1", "default", "deployments", "web")
        scale["spec"]["replicas"] = 2
        await custom.replace_namespaced_custom_object_scale(
            "apps", "v1", "default", "deployments", "web", scale)
        await mine.delete_namespaced_lease("bucket-7", "default")
    create, takeover, delete = apiserver.lease_history
    (put,) = apiserver.requests(verb="update", resource="deployments/scale")
    assert put.applied is not None
    holders = [apiserver.lease_at("default", "bucket-7", when)
               for when in (create.applied - 1, create.applied, takeover.applied, put.applied,
                            delete.applied)]
    assert [h.holder if h else None for h in holders] == [None, "a", "b", "b", None]
    assert apiserver.lease_at("default", "bucket-8", put.applied) is None
