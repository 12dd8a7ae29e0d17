"""KEP-5866 shardSelector in the simulated API server: the grammar, the hash, LIST and WATCH
filtering, the echo, and the modes that ignore it, through kubernetes-asyncio's
``shard_selector=`` over real HTTPS."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.sim.apiserver.errors import ApiError
from tests.sim.apiserver.sharding import HASH_SPACE, fnv1a64, parse
from tests.sim.kube import SimApiServer, api_client, apiserver, http, wait_until

__all__ = ["apiserver"]

HALF = 1 << 63
NAMESPACES = [f"team-{i}" for i in range(12)]
LOW = f"shardRange(object.metadata.namespace, '0x0000000000000000', '0x{HALF:016x}')"
HIGH = f"shardRange(object.metadata.namespace, '0x{HALF:016x}', '0x10000000000000000')"
OLD_LOW = f"shardRange(object.metadata.namespace, 0x0, 0x{HALF:x})"


def _low(namespace: str) -> bool:
    return fnv1a64(namespace) < HALF


@pytest.mark.parametrize(("text", "value"), [
    ("", 0xCBF29CE484222325), ("a", 0xAF63DC4C8601EC8C), ("foobar", 0x85944171F73967E8),
], ids=["empty", "a", "foobar"])
def test_fnv1a64_matches_the_reference_vectors(text: str, value: int) -> None:
    """The sim's own FNV-1a 64 gives the published test vectors."""
    assert fnv1a64(text) == value


@pytest.mark.parametrize(("text", "field", "ranges"), [
    (LOW, "namespace", ((0, HALF),)),
    (f"{LOW} || {HIGH}", "namespace", ((0, HALF), (HALF, HASH_SPACE))),
    ("shardRange(object.metadata.uid, '0x0', '0x8')", "uid", ((0, 8),)),
    ("  shardRange( object.metadata.uid ,'0xA','0xFF' )||shardRange(object.metadata.uid,"
     "'0x100','0x200')", "uid", ((10, 255), (256, 512))),
], ids=["one", "two-joined", "short-hex", "spacing-and-case"])
def test_the_released_grammar_parses(text: str, field: str,
                                     ranges: tuple[tuple[int, int], ...]) -> None:
    """Quoted hex, || between requirements, one field; the end may be 2^64."""
    selector = parse(text)
    assert (selector.field, selector.ranges) == (field, ranges)


@pytest.mark.parametrize("text", [
    OLD_LOW,
    f"{LOW}, {HIGH}",
    f"{LOW} || shardRange(object.metadata.uid, '0x0', '0x1')",
    "shardRange(metadata.uid, '0x0', '0x1')",
    "shardRange(object.metadata.name, '0x0', '0x1')",
    "shardRange(object.metadata.uid, '0x8', '0x8')",
    "shardRange(object.metadata.uid, '0x0', '0x10000000000000001')",
    "shardRange(object.metadata.uid, \"0x0\", \"0x1\")",
    f"{LOW} ||",
    "uid in (a, b)",
], ids=["old-bare-hex", "comma-joined", "mixed-fields", "fieldselector-path", "name-field",
        "empty-range", "beyond-2-64", "double-quotes", "trailing-or", "garbage"])
def test_anything_else_is_a_400_naming_the_selector(text: str) -> None:
    """A selector outside the released grammar is a 400 whose message quotes it."""
    with pytest.raises(ApiError) as caught:
        parse(text)
    assert caught.value.code == 400
    assert f'shardSelector: Invalid value: "{text}"' in caught.value.message


def test_the_old_grammar_parses_only_in_its_mode() -> None:
    """Bare hex joined by commas is the earlier grammar; the released one is refused in it."""
    assert parse(f"{OLD_LOW}, {OLD_LOW}", "old").ranges == ((0, HALF), (0, HALF))
    with pytest.raises(ApiError):
        parse(LOW, "old")


@pytest.fixture
def teams(apiserver: SimApiServer) -> SimApiServer:
    """One Deployment with one pod in each of twelve namespaces, on both sides of the half."""
    apiserver.create_deployments([(namespace, "web") for namespace in NAMESPACES])
    assert 0 < sum(map(_low, NAMESPACES)) < len(NAMESPACES)
    return apiserver


async def _pods(session: Any, selector: str | None) -> client.V1PodList:
    return await client.CoreV1Api(session).list_pod_for_all_namespaces(
        shard_selector=selector)


async def test_a_list_holds_only_the_range_and_echoes_it(teams: SimApiServer) -> None:
    """A pod LIST by namespace range returns exactly the pods of the namespaces whose hash
    is in it, and echoes the selector as sent; the two halves partition all pods."""
    async with api_client(teams) as session:
        low, high, every = (await _pods(session, LOW), await _pods(session, HIGH),
                            await _pods(session, None))
    namespaces = {p.metadata.namespace for p in low.items}
    assert namespaces == {n for n in NAMESPACES if _low(n)}
    assert low.metadata.shard_info.selector == LOW
    assert every.metadata.shard_info is None
    assert sorted(p.metadata.name for p in low.items + high.items) == sorted(
        p.metadata.name for p in every.items)
    assert len(every.items) == len(NAMESPACES)


async def test_a_namespaced_list_of_deployments_by_uid(teams: SimApiServer) -> None:
    """A namespaced Deployment LIST by uid range keeps those whose uid hashes into it."""
    uid = teams.get("apps/v1", "Deployment", "team-0", "web")["metadata"]["uid"]
    start = fnv1a64(uid)
    selector = (f"shardRange(object.metadata.uid, '0x{start:016x}', '0x{start + 1:016x}')")
    async with api_client(teams) as session:
        apps = client.AppsV1Api(session)
        hit = await apps.list_namespaced_deployment("team-0", shard_selector=selector)
        miss = await apps.list_namespaced_deployment("team-1", shard_selector=selector)
    assert [d.metadata.uid for d in hit.items] == [uid]
    assert miss.items == []
    assert hit.metadata.shard_info.selector == selector


async def test_a_bad_selector_is_a_400_over_http(teams: SimApiServer) -> None:
    """The old grammar sent to a server of the released one is a 400 naming the selector."""
    async with api_client(teams) as session:
        with pytest.raises(ApiException) as caught:
            await _pods(session, OLD_LOW)
    body = json.loads(caught.value.body)
    assert (caught.value.status, body["reason"]) == (400, "BadRequest")
    assert OLD_LOW in body["message"]


async def test_gate_off_ignores_the_selector_and_echoes_nothing(teams: SimApiServer) -> None:
    """Mode off: every pod, no shardInfo, and even a malformed selector is ignored."""
    teams.shard_selector_mode = "off"
    async with api_client(teams) as session:
        listed, garbage = await _pods(session, LOW), await _pods(session, "nonsense")
    assert len(listed.items) == len(garbage.items) == len(NAMESPACES)
    assert listed.metadata.shard_info is None


async def test_old_grammar_mode_refuses_the_released_grammar(teams: SimApiServer) -> None:
    """Mode old-grammar: the released selector is a 400; the old one filters and echoes."""
    teams.shard_selector_mode = "old-grammar"
    async with api_client(teams) as session:
        with pytest.raises(ApiException) as caught:
            await _pods(session, LOW)
        old = await _pods(session, OLD_LOW)
    assert caught.value.status == 400
    assert {p.metadata.namespace for p in old.items} == {n for n in NAMESPACES if _low(n)}
    assert old.metadata.shard_info.selector == OLD_LOW


async def _watched(session: Any, selector: str, names: list[str]) -> None:
    async with watch.Watch() as w:
        async for event in w.stream(client.CoreV1Api(session).list_pod_for_all_namespaces,
                                    shard_selector=selector, timeout_seconds=30,
                                    _request_timeout=40):
            names.append(event["object"].metadata.namespace)


async def _watch_then_add(api: SimApiServer, added: list[str]) -> list[str]:
    """Namespaces of the pod events a LOW watch sees: initial state, then ``added``."""
    seen: list[str] = []
    async with api_client(api) as session:
        task = asyncio.create_task(_watched(session, LOW, seen))
        try:
            await wait_until(lambda: api.open_watches == 1)
            await asyncio.sleep(0.2)  # the initial events
            for namespace in added:
                api.create_deployment(namespace, "late")
            await asyncio.sleep(0.3)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return seen


async def test_a_watch_sends_only_the_range(teams: SimApiServer) -> None:
    """Mode on: a watch's initial and later events are only those of in-range namespaces."""
    # FNV-1a's top bits barely move with a name's last characters ("late-0".."late-99" all
    # hash low), so the candidates differ in their first one.
    names = [f"{letter}-late" for letter in "abcdefghijklmnopqrstuvwxyz"]
    inside = next(n for n in names if _low(n))
    outside = next(n for n in names if not _low(n))
    seen = await _watch_then_add(teams, [outside, inside])
    assert set(seen) == {n for n in NAMESPACES if _low(n)} | {inside}


async def test_list_only_mode_ignores_the_selector_on_a_watch(teams: SimApiServer) -> None:
    """Mode list-only (HA mid-rollout): the LIST is filtered, the WATCH sends everything."""
    teams.shard_selector_mode = "list-only"
    async with api_client(teams) as session:
        listed = await _pods(session, LOW)
    seen = await _watch_then_add(teams, [])
    assert listed.metadata.shard_info.selector == LOW
    assert set(seen) == set(NAMESPACES)


async def _initial_bookmark(api: SimApiServer, selector: str = LOW) -> dict[str, Any]:
    result = await http(api, "GET", "/api/v1/pods?watch=true&sendInitialEvents=true"
                        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
                        f"&timeoutSeconds=1&shardSelector={quote(selector)}")
    events = [json.loads(line) for line in result.text.splitlines() if line]
    (mark,) = [e["object"] for e in events if e["type"] == "BOOKMARK" and (
        e["object"]["metadata"].get("annotations") or {}).get("k8s.io/initial-events-end")]
    return mark


async def test_the_initial_events_bookmark_echoes_an_honoured_selector(
        teams: SimApiServer) -> None:
    """sendInitialEvents: the initial-events-end bookmark carries shardInfo when the watch
    honoured the selector, and none when the server ignored it."""
    honoured = await _initial_bookmark(teams)
    teams.shard_selector_mode = "list-only"
    ignored = await _initial_bookmark(teams)
    assert honoured["metadata"]["shardInfo"] == {"selector": LOW}
    assert "shardInfo" not in ignored["metadata"]


async def test_the_rings_selector_lists_exactly_its_namespaces(teams: SimApiServer) -> None:
    """Our ring's selector (autoscaler.runtime.ring, checked here against the sim's own
    grammar and hash) for some namespaces lists exactly those namespaces."""
    from autoscaler.runtime.ring import shard_selector

    wanted = {*NAMESPACES[:3], *NAMESPACES[-2:]}
    selector = shard_selector(wanted)
    async with api_client(teams) as session:
        listed = await _pods(session, selector)
    assert {p.metadata.namespace for p in listed.items} == wanted
    assert listed.metadata.shard_info.selector == selector


async def test_an_honoured_selector_sends_fewer_bytes(teams: SimApiServer) -> None:
    """bytes_sent: a LIST and a WATCH honouring LOW send a fraction of the unfiltered ones'
    bytes; with the gate off they cost as much as without a selector."""
    user = "system:serviceaccount:autoscaler:autoscaler"

    async def cost(selector: str | None) -> int:
        before = teams.bytes_sent[user]
        async with api_client(teams) as session:
            await _pods(session, selector)
        return teams.bytes_sent[user] - before

    async def watch_cost(selector: str) -> int:
        before = teams.bytes_sent[user]
        await _initial_bookmark(teams, selector)
        return teams.bytes_sent[user] - before

    everything, low = await cost(None), await cost(LOW)
    watched_low = await watch_cost(LOW)
    teams.shard_selector_mode = "off"
    ignored, watched_ignored = await cost(LOW), await watch_cost(LOW)
    share = sum(map(_low, NAMESPACES)) / len(NAMESPACES)
    print(f"LIST bytes: all {everything}, LOW {low} ({low / everything:.0%}; "
          f"{share:.0%} of the pods), ignored {ignored}; WATCH LOW {watched_low}, "
          f"ignored {watched_ignored}")
    assert low < everything * (share + 0.1)
    assert ignored == everything
    assert watched_low < watched_ignored * (share + 0.1)


async def test_a_cluster_scoped_list_is_filtered_too(teams: SimApiServer) -> None:
    """Namespaces (cluster-scoped) by uid: the two halves partition them; by namespace,
    every one hashes the empty string, so one half holds them all."""
    def uid_half(start: int, end: int) -> str:
        return f"shardRange(object.metadata.uid, '0x{start:016x}', '0x{end:x}')"

    async with api_client(teams) as session:
        core = client.CoreV1Api(session)
        low = await core.list_namespace(shard_selector=uid_half(0, HALF))
        high = await core.list_namespace(shard_selector=uid_half(HALF, HASH_SPACE))
        every = await core.list_namespace()
        by_namespace = await core.list_namespace(shard_selector=LOW if fnv1a64("") < HALF
                                                 else HIGH)
    names = sorted(n.metadata.name for n in every.items)
    assert sorted(n.metadata.name for n in low.items + high.items) == names
    assert low.items
    assert high.items
    assert sorted(n.metadata.name for n in by_namespace.items) == names
