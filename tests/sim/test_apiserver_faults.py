"""Faults scoped to one user, partitions, and the request log's timings, over real HTTPS."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.sim.apiserver.access import RequestRecord
from tests.sim.kube import MEMBER_B, SimApiServer, api_client, apiserver, other, wait_until

__all__ = ["apiserver", "other"]

SCALE = ("apps", "v1", "default", "deployments", "web")


def _last(apiserver: SimApiServer, **criteria: Any) -> RequestRecord:
    return apiserver.requests(**criteria)[-1]


async def _put_replicas(session: Any, replicas: int) -> dict[str, Any]:
    custom = client.CustomObjectsApi(session)
    scale = await custom.get_namespaced_custom_object_scale(*SCALE)
    scale["spec"]["replicas"] = replicas
    result: dict[str, Any] = await custom.replace_namespaced_custom_object_scale(*SCALE, scale)
    return result


def _replicas(apiserver: SimApiServer) -> int:
    deployment = apiserver.get("apps/v1", "Deployment", "default", "web")
    assert deployment is not None
    return int(deployment["spec"]["replicas"])


async def test_a_write_is_stamped_arrived_applied_answered(apiserver: SimApiServer) -> None:
    """A PUT /scale that lands carries arrived <= applied <= answered; the GET before it,
    which wrote nothing, has no applied time."""
    apiserver.create_deployment("default", "web", replicas=2)
    async with api_client(apiserver) as session:
        await _put_replicas(session, 3)
    get, put = _last(apiserver, verb="get"), _last(apiserver, verb="update")
    assert get.applied is None
    assert get.answered is not None
    assert put.applied is not None
    assert put.answered is not None
    assert put.arrived <= put.applied <= put.answered
    assert get.answered <= put.arrived


async def test_a_write_that_changes_nothing_is_not_applied(apiserver: SimApiServer) -> None:
    """A PUT /scale of the count already there, and a dryRun one, leave applied None."""
    apiserver.create_deployment("default", "web", replicas=2)
    async with api_client(apiserver) as session:
        await _put_replicas(session, 2)
        custom = client.CustomObjectsApi(session)
        scale = await custom.get_namespaced_custom_object_scale(*SCALE)
        scale["spec"]["replicas"] = 5
        await custom.replace_namespaced_custom_object_scale(*SCALE, scale, dry_run="All")
    assert [(r.status, r.applied) for r in apiserver.requests(verb="update")] == [
        (200, None), (200, None)]
    assert _replicas(apiserver) == 2


async def test_delay_next_holds_a_request_before_it_is_applied(apiserver: SimApiServer) -> None:
    """delay_next: while the PUT waits the object is unchanged; it is applied and answered
    only after the delay (the API server holding the request)."""
    apiserver.create_deployment("default", "web", replicas=2)
    apiserver.delay_next(seconds=0.5, verb="update", resource="deployments/scale")
    async with api_client(apiserver) as session:
        put = asyncio.create_task(_put_replicas(session, 3))
        await wait_until(lambda: apiserver.faults[0].arrived == 1)
        await asyncio.sleep(0.2)
        assert _replicas(apiserver) == 2
        await asyncio.wait_for(put, 5)
    record = _last(apiserver, verb="update")
    assert record.applied is not None
    assert record.answered is not None
    assert record.applied - record.arrived >= 0.5
    assert record.answered - record.applied < 0.1


async def test_answer_after_applies_at_once_and_answers_late(apiserver: SimApiServer) -> None:
    """after_next(answer_after): the object changes at once, the answer comes late."""
    apiserver.create_deployment("default", "web", replicas=2)
    apiserver.after_next(verb="update", resource="deployments/scale", answer_after=0.5)
    async with api_client(apiserver) as session:
        put = asyncio.create_task(_put_replicas(session, 3))
        await wait_until(lambda: _replicas(apiserver) == 3)
        assert not put.done()
        await asyncio.wait_for(put, 5)
    record = _last(apiserver, verb="update")
    assert record.applied is not None
    assert record.answered is not None
    assert record.applied - record.arrived < 0.1
    assert record.answered - record.applied >= 0.5


async def test_a_user_scoped_fault_leaves_other_users_alone(apiserver: SimApiServer,
                                                            other: Any) -> None:
    """fail_next(user=B): A's list succeeds and leaves the rule armed; B's fails."""
    rule = apiserver.fail_next(1, status=503, verb="list", resource="pods", user=MEMBER_B)
    async with api_client(apiserver) as session:
        await client.CoreV1Api(session).list_namespaced_pod("default")
    assert rule.remaining == 1
    with pytest.raises(ApiException) as caught:
        await client.CoreV1Api(other).list_namespaced_pod("default")
    assert caught.value.status == 503
    assert [(r.user, r.status) for r in apiserver.requests(verb="list")] == [
        ("system:serviceaccount:autoscaler:autoscaler", 200), (MEMBER_B, 503)]


async def test_a_user_scoped_delay_leaves_other_users_alone(apiserver: SimApiServer,
                                                            other: Any) -> None:
    """delay_next(user=B) holds B's PUT; A's PUT lands meanwhile, then B's (409: stale)."""
    apiserver.create_deployment("default", "web", replicas=2)
    rule = apiserver.delay_next(seconds=0.5, verb="update", resource="deployments/scale",
                                user=MEMBER_B)
    b_put = asyncio.create_task(_put_replicas(other, 4))
    await wait_until(lambda: rule.arrived == 1)
    async with api_client(apiserver) as session:
        await _put_replicas(session, 3)
    assert _replicas(apiserver) == 3
    with pytest.raises(ApiException) as caught:
        await asyncio.wait_for(b_put, 5)
    assert caught.value.status == 409


async def _list_pods(session: Any, timeout: float = 10) -> int:
    pods = await client.CoreV1Api(session).list_namespaced_pod("default",
                                                              _request_timeout=timeout)
    return len(pods.items)


async def test_a_stalled_partition_holds_one_user_until_healed(apiserver: SimApiServer,
                                                               other: Any) -> None:
    """partition(B, stall): B's request waits while A is served; healed, B's is served."""
    apiserver.create_deployment("default", "web", replicas=2)
    partition = apiserver.partition(MEMBER_B)
    stalled = asyncio.create_task(_list_pods(other))
    await wait_until(lambda: partition.cut == 1)
    async with api_client(apiserver) as session:
        assert await _list_pods(session) == 2
    await asyncio.sleep(0.3)
    assert not stalled.done()
    apiserver.heal(MEMBER_B)
    assert await asyncio.wait_for(stalled, 5) == 2
    record = _last(apiserver, user=MEMBER_B)
    assert record.status == 200
    assert record.answered is not None
    assert record.answered - record.arrived >= 0.3


async def test_a_stalled_request_whose_client_gives_up_is_logged_unanswered(
        apiserver: SimApiServer, other: Any) -> None:
    """A client that times out during a stall leaves a 499 record with no answer and
    nothing applied, and its write never lands, even after the heal."""
    apiserver.create_deployment("default", "web", replicas=2)
    custom = client.CustomObjectsApi(other)
    scale = await custom.get_namespaced_custom_object_scale(*SCALE)
    scale["spec"]["replicas"] = 5
    apiserver.partition(MEMBER_B)
    with pytest.raises(asyncio.TimeoutError):
        await custom.replace_namespaced_custom_object_scale(*SCALE, scale,
                                                            _request_timeout=0.3)
    await wait_until(lambda: bool(apiserver.requests(verb="update")))
    apiserver.heal(MEMBER_B)
    await asyncio.sleep(0.1)
    record = _last(apiserver, verb="update")
    assert (record.status, record.applied, record.answered) == (499, None, None)
    assert _replicas(apiserver) == 2


async def test_a_reset_partition_fails_one_user_fast(apiserver: SimApiServer,
                                                     other: Any) -> None:
    """partition(B, reset): B's request fails at once as a dropped connection (status 0,
    unanswered); A is served; healed, B is served again."""
    apiserver.partition(MEMBER_B, mode="reset")
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(aiohttp.ClientConnectionError):
        await _list_pods(other)
    assert loop.time() - started < 1.0
    async with api_client(apiserver) as session:
        assert await _list_pods(session) == 0
    record = _last(apiserver, user=MEMBER_B)
    assert (record.status, record.answered) == (0, None)
    apiserver.heal(MEMBER_B)
    assert await _list_pods(other) == 0


async def _watch_names(session: Any, seen: list[str]) -> None:
    async with watch.Watch() as w:
        async for event in w.stream(client.CoreV1Api(session).list_namespaced_config_map,
                                    "default", timeout_seconds=30, _request_timeout=40):
            seen.append(event["object"].metadata.name)


def _config_map(apiserver: SimApiServer, name: str) -> None:
    apiserver.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})


async def test_a_stalled_partition_pauses_the_users_open_watch(apiserver: SimApiServer,
                                                               other: Any) -> None:
    """During a stall B's open watch delivers nothing while A's does; healed, B gets the
    events it missed."""
    mine: list[str] = []
    theirs: list[str] = []
    async with api_client(apiserver) as session:
        tasks = [asyncio.create_task(_watch_names(session, mine)),
                 asyncio.create_task(_watch_names(other, theirs))]
        try:
            await wait_until(lambda: apiserver.open_watches == 2)
            apiserver.partition(MEMBER_B)
            _config_map(apiserver, "during")
            await wait_until(lambda: mine == ["during"])
            await asyncio.sleep(0.2)
            assert theirs == []
            apiserver.heal(MEMBER_B)
            await wait_until(lambda: theirs == ["during"])
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_reset_partition_cuts_the_users_open_watch(apiserver: SimApiServer,
                                                           other: Any) -> None:
    """partition(B, reset) ends B's open watch at once; A's stays open."""
    mine: list[str] = []
    theirs: list[str] = []
    async with api_client(apiserver) as session:
        ours = asyncio.create_task(_watch_names(session, mine))
        cut = asyncio.create_task(_watch_names(other, theirs))
        try:
            await wait_until(lambda: apiserver.open_watches == 2)
            apiserver.partition(MEMBER_B, mode="reset")
            with pytest.raises(aiohttp.ClientError):
                await asyncio.wait_for(cut, 5)
            await wait_until(lambda: apiserver.open_watches == 1)
            _config_map(apiserver, "after")
            await wait_until(lambda: mine == ["after"])
        finally:
            ours.cancel()
            await asyncio.gather(ours, return_exceptions=True)

