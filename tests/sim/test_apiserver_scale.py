"""Scale and lifecycle of the simulator: hundreds of workloads settle, stop() is bounded.

No timing assertions: a complexity regression (a controller rescanning the store on every
change) shows up as these tests turning slow or hitting the pytest timeout.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from tests.sim.kube import SimApiServer, apiserver, http, run_apiserver, wait_until

__all__ = ["apiserver"]

PODS, REPLICASETS, DEPLOYMENTS = ("", "pods"), ("apps", "replicasets"), ("apps", "deployments")
VOLATILE = {"uid", "resourceVersion", "creationTimestamp", "lastTransitionTime",
            "lastUpdateTime", "startTime", "podIP", "podIPs", "containerID", "startedAt",
            "namespace", "managedFields"}


def _seed(api: SimApiServer, count: int, *, bulk: bool, namespace: str | None = None) -> None:
    names = [(namespace or f"ns{i % 10}", f"app-{i}") for i in range(count)]
    if bulk:
        api.create_deployments(names, replicas=5, requests={"cpu": "100m"})
        return
    for ns, name in names:
        api.create_deployment(ns, name, replicas=5, requests={"cpu": "100m"})


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"])


def _stable(value: Any) -> Any:
    """The object without what differs between two runs (uids, times, IPs, versions)."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _shape(api: SimApiServer, namespace: str) -> list[Any]:
    pods = [{**_stable(p), "metadata": _stable(p["metadata"]["labels"])}
            for p in api.store.list(PODS, namespace)]
    return [[_stable(o) for o in api.store.list(DEPLOYMENTS, namespace)],
            [_stable(o) for o in api.store.list(REPLICASETS, namespace)],
            sorted(pods, key=repr)]


@pytest.mark.parametrize("bulk", [False, True], ids=["one-by-one", "bulk"])
def test_hundreds_of_deployments_settle_with_every_pod_ready(apiserver: SimApiServer,
                                                            bulk: bool) -> None:
    """300 Deployments x 5 pods over 10 namespaces: 300 ReplicaSets, 1,500 Ready pods."""
    _seed(apiserver, 300, bulk=bulk)
    apiserver.settle()
    pods = apiserver.store.list(PODS)
    assert (len(pods), sum(map(_ready, pods))) == (1500, 1500)
    assert apiserver.store.count(REPLICASETS) == 300
    assert {d["status"].get("readyReplicas") for d in apiserver.store.list(DEPLOYMENTS)} == {5}
    assert len(apiserver.pods("ns3", "app=app-13")) == 5


def test_bulk_seeding_makes_the_same_objects(apiserver: SimApiServer) -> None:
    """create_deployments gives the Deployments, ReplicaSets and pods one-by-one seeding gives."""
    _seed(apiserver, 20, bulk=False, namespace="one")
    _seed(apiserver, 20, bulk=True, namespace="bulk")
    assert _shape(apiserver, "bulk") == _shape(apiserver, "one")
    assert len(_shape(apiserver, "bulk")[2]) == 100


def test_deleting_one_of_many_deployments_collects_only_its_objects(
        apiserver: SimApiServer) -> None:
    """The garbage collector removes the deleted Deployment's ReplicaSet and pods, no others."""
    _seed(apiserver, 300, bulk=True)
    rt = apiserver.resource("apps/v1", "Deployment")
    apiserver.rest.delete(rt, "ns7", "app-7", {}, None)
    apiserver.settle()
    assert apiserver.pods("ns7", "app=app-7") == []
    assert apiserver.store.count(REPLICASETS) == 299
    assert apiserver.store.count(PODS) == 1495


async def test_a_watch_of_a_big_namespace_gets_one_change_once(apiserver: SimApiServer) -> None:
    """With 1,500 pods stored, a pod watch from now sees exactly the one pod changed."""
    _seed(apiserver, 300, bulk=True, namespace="big")
    listed = await http(apiserver, "GET", "/api/v1/namespaces/big/pods")
    assert len(listed.json()["items"]) == 1500
    rv = listed.json()["metadata"]["resourceVersion"]
    name = apiserver.pods("big", "app=app-1")[0]["metadata"]["name"]
    apiserver.touch("v1", "Pod", "big", name)
    watched = await http(apiserver, "GET", f"/api/v1/namespaces/big/pods?watch=1&"
                                           f"resourceVersion={rv}&timeoutSeconds=1")
    events = [line for line in watched.text.splitlines() if line]
    assert len(events) == 1
    assert name in events[0]


async def test_stop_cancels_a_stuck_handler_within_its_timeout() -> None:
    """stop() returns within stop_timeout though a request handler is stuck for a minute."""
    loop = asyncio.get_running_loop()
    async with run_apiserver() as api:
        api.stop_timeout = 0.5
        rule = api.delay_next(1, seconds=60, verb="list", resource="pods")
        stuck = asyncio.create_task(http(api, "GET", "/api/v1/namespaces/default/pods"))
        await wait_until(lambda: rule.remaining == 0)
        started = loop.time()
        await api.stop()
        assert loop.time() - started < 3.0
    with pytest.raises(aiohttp.ClientError):  # dropped, instead of answered after a minute
        await asyncio.wait_for(stuck, 5)
