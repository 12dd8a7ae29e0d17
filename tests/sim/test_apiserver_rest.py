"""REST semantics of the simulated API server checked on the wire (status codes, bodies)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.sim.kube import SimApiServer, apiserver, http, run_apiserver

__all__ = ["apiserver"]

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
ROLLOUTS = "/apis/example.com/v1/namespaces/default/rollouts"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


async def test_missing_token_is_401(apiserver: SimApiServer) -> None:
    """No bearer token: 401 with an Unauthorized Status."""
    result = await http(apiserver, "GET", "/api/v1/pods", token="")
    assert (result.status, result.json()["reason"]) == (401, "Unauthorized")


async def test_authorization_comes_before_lookup(apiserver: SimApiServer) -> None:
    """A denied request for a resource the server does not serve is 403, not 404."""
    apiserver.deny("list", "*")
    result = await http(apiserver, "GET", "/apis/nope.io/v1/namespaces/default/things")
    assert result.status == 403
    apiserver.allow_all()
    assert (await http(apiserver, "GET", "/apis/nope.io/v1/namespaces/default/things")
            ).status == 404


async def test_create_in_a_missing_namespace_is_404(apiserver: SimApiServer) -> None:
    """Creating into a namespace that does not exist names the namespace in the 404."""
    result = await http(apiserver, "POST", "/api/v1/namespaces/ghost/configmaps",
                        body={"metadata": {"name": "x"}})
    assert result.status == 404
    assert result.json()["message"] == 'namespaces "ghost" not found'


async def test_duplicate_create_is_409_already_exists(apiserver: SimApiServer) -> None:
    """A second create of the same name is 409 AlreadyExists."""
    body = {"metadata": {"name": "state"}, "data": {"k": "v"}}
    assert (await http(apiserver, "POST", CONFIGMAPS, body=body)).status == 201
    result = await http(apiserver, "POST", CONFIGMAPS, body=body)
    assert (result.status, result.json()["reason"]) == (409, "AlreadyExists")


async def test_system_metadata_is_the_servers(apiserver: SimApiServer) -> None:
    """uid, creationTimestamp and resourceVersion are set by the server, generation by type."""
    created = (await http(apiserver, "POST", CONFIGMAPS,
                          body={"metadata": {"name": "s", "uid": "mine"}})).json()
    meta = created["metadata"]
    assert meta["uid"] != "mine"
    assert meta["resourceVersion"] == str(apiserver.store.resource_version)
    assert meta["creationTimestamp"].endswith("Z")
    assert "generation" not in meta


async def test_custom_resource_update_needs_a_resource_version(apiserver: SimApiServer) -> None:
    """PUT of a custom resource without metadata.resourceVersion is 422, as upstream."""
    rollout = apiserver.create_workload("Rollout", "default", "x", replicas=1)
    del rollout["metadata"]["resourceVersion"]
    result = await http(apiserver, "PUT", f"{ROLLOUTS}/x", body=rollout)
    assert (result.status, result.json()["reason"]) == (422, "Invalid")


async def test_strategic_merge_patch_is_refused_for_custom_resources(
        apiserver: SimApiServer) -> None:
    """Strategic merge patch on a custom resource is 415, as upstream."""
    apiserver.create_workload("Rollout", "default", "x", replicas=1)
    result = await http(apiserver, "PATCH", f"{ROLLOUTS}/x", body={"spec": {"replicas": 2}},
                        content_type="application/strategic-merge-patch+json")
    assert result.status == 415


async def test_negative_scale_is_invalid(apiserver: SimApiServer) -> None:
    """spec.replicas < 0 through /scale is a 422 on Scale.autoscaling."""
    apiserver.create_deployment("default", "web", replicas=1)
    result = await http(apiserver, "PATCH", f"{DEPLOYMENTS}/web/scale",
                        body={"spec": {"replicas": -1}},
                        content_type="application/merge-patch+json")
    assert result.status == 422
    assert result.json()["message"].startswith('Scale.autoscaling "web" is invalid')


async def test_selector_is_immutable(apiserver: SimApiServer) -> None:
    """Changing an apps/v1 selector is a 422."""
    apiserver.create_deployment("default", "web", replicas=1)
    result = await http(apiserver, "PATCH", f"{DEPLOYMENTS}/web",
                        body={"spec": {"selector": {"matchLabels": {"app": "other"}},
                                       "template": {"metadata": {"labels": {"app": "other"}}}}},
                        content_type="application/merge-patch+json")
    assert result.status == 422


async def test_status_is_ignored_on_the_main_resource(apiserver: SimApiServer) -> None:
    """A PUT of a deployment cannot change its status (status subresource semantics)."""
    dep = apiserver.create_deployment("default", "web", replicas=1)
    dep = apiserver.get("apps/v1", "Deployment", "default", "web")
    dep["status"]["replicas"] = 99
    dep["metadata"]["labels"] = {"touched": "yes"}
    written = (await http(apiserver, "PUT", f"{DEPLOYMENTS}/web", body=dep)).json()
    assert written["status"]["replicas"] == 1
    assert written["metadata"]["labels"] == {"touched": "yes"}


@pytest.mark.parametrize(("data", "status"), [
    ({"ok.key": "v"}, 201), ({"bad/key": "v"}, 422), ({"big": "x" * (1024 * 1024 + 1)}, 422),
], ids=["valid", "bad-key", "over-1MiB"])
async def test_configmap_validation(apiserver: SimApiServer, data: dict[str, str],
                                    status: int) -> None:
    """ConfigMap keys must be config keys and the data at most 1 MiB."""
    result = await http(apiserver, "POST", CONFIGMAPS,
                        body={"metadata": {"name": "state"}, "data": data})
    assert result.status == status


async def test_list_pagination(apiserver: SimApiServer) -> None:
    """limit and continue page through a list; resourceVersion=0 ignores limit."""
    apiserver.create_deployment("default", "web", replicas=3)
    first = (await http(apiserver, "GET", "/api/v1/namespaces/default/pods?limit=2")).json()
    token = first["metadata"]["continue"]
    rest = (await http(apiserver, "GET",
                       f"/api/v1/namespaces/default/pods?limit=2&continue={token}")).json()
    whole = (await http(apiserver, "GET",
                        "/api/v1/namespaces/default/pods?limit=2&resourceVersion=0")).json()
    assert (len(first["items"]), first["metadata"]["remainingItemCount"]) == (2, 1)
    assert len(rest["items"]) == 1
    assert "continue" not in rest["metadata"]
    assert len(whole["items"]) == 3


async def pages(apiserver: SimApiServer, path: str, limit: int) -> list[dict[str, Any]]:
    """Every page of a paginated LIST, following continue tokens."""
    answers, token = [], ""
    while True:
        sep = "&" if "?" in path else "?"
        query = f"{sep}limit={limit}" + (f"&continue={token}" if token else "")
        answer = (await http(apiserver, "GET", path + query)).json()
        answers.append(answer)
        token = answer["metadata"].get("continue", "")
        if not token:
            return answers


async def test_pagination_across_namespaces_in_store_order(apiserver: SimApiServer) -> None:
    """Pages of a cluster-wide LIST give every object once, in namespace-then-name order,
    even where a namespace's name is another's plus a dash ("a", "a-b": comparing the joined
    "a-b/x" and "a/x" would put them the other way round and lose objects)."""
    apiserver.create_deployments([("a", "web"), ("a-b", "web"), ("ab", "web")], replicas=2)
    answers = await pages(apiserver, "/api/v1/pods", limit=1)
    names = [(p["metadata"]["namespace"], p["metadata"]["name"])
             for answer in answers for p in answer["items"]]
    assert len(names) == 6
    assert names == sorted(names)
    assert [a["metadata"]["remainingItemCount"] for a in answers[:-1]] == [5, 4, 3, 2, 1]


async def test_pagination_follows_creates_and_deletes_between_pages(
        apiserver: SimApiServer) -> None:
    """A continue token pages the current state: an object created after the token's place
    comes in a later page, one deleted before its page does not, and what came before the
    token is not given again (the store keeps every kind's places sorted between writes)."""
    async def configmap(method: str, namespace: str, name: str) -> None:
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        body = {"metadata": {"name": name, "labels": {"paged": "yes"}}}
        result = await (http(apiserver, "POST", path, body=body) if method == "POST" else
                        http(apiserver, "DELETE", f"{path}/{name}"))
        assert result.status in (200, 201)

    for name in ("a", "c", "e"):
        await configmap("POST", "default", name)
    path = "/api/v1/configmaps?labelSelector=paged%3Dyes"
    first = (await http(apiserver, "GET", path + "&limit=2")).json()
    token = first["metadata"]["continue"]
    await configmap("DELETE", "default", "c")
    await configmap("DELETE", "default", "e")
    await configmap("POST", "default", "d")
    await configmap("POST", "kube-system", "b")
    rest = (await http(apiserver, "GET", f"{path}&limit=2&continue={token}")).json()
    place = [(c["metadata"]["namespace"], c["metadata"]["name"])
             for c in first["items"] + rest["items"]]
    assert place == [("default", "a"), ("default", "c"), ("default", "d"), ("kube-system", "b")]
    assert "continue" not in rest["metadata"]
    stored = apiserver.store.places(("", "configmaps"))
    assert stored == sorted(stored)
    assert ("default", "e") not in stored
    assert ("kube-system", "b") in stored


async def test_pagination_with_a_selector(apiserver: SimApiServer) -> None:
    """Pages hold only matching objects; their remaining count is left out, as the real
    server leaves it out when selectors filter the list."""
    apiserver.create_deployments([(f"ns-{i}", name) for i in range(3)
                                  for name in ("web", "db")], replicas=2)
    answers = await pages(apiserver, "/api/v1/pods?labelSelector=app%3Dweb", limit=2)
    pods = [p for answer in answers for p in answer["items"]]
    assert [len(a["items"]) for a in answers] == [2, 2, 2]
    assert {p["metadata"]["labels"]["app"] for p in pods} == {"web"}
    assert len({p["metadata"]["uid"] for p in pods}) == 6
    assert all("remainingItemCount" not in a["metadata"] for a in answers)


async def test_a_list_shows_every_version_of_an_object_encoded_once(
        apiserver: SimApiServer) -> None:
    """A LIST sends each stored version's encoding, made once (as the real server's watch
    cache does): an object changed or deleted since the last LIST is shown as it is now,
    the body is the same bytes as the whole list encoded at once, compact, as Go's, and
    only current versions stay encoded."""
    async def listed() -> tuple[str, dict[str, Any]]:
        result = await http(apiserver, "GET", CONFIGMAPS)
        assert result.headers["Content-Type"] == "application/json"
        answer = result.json()
        assert result.text == json.dumps(answer, separators=(",", ":")) + "\n"
        return result.text, {c["metadata"]["name"]: c.get("data") for c in answer["items"]}

    for name in ("a", "b"):
        assert (await http(apiserver, "POST", CONFIGMAPS,
                           body={"metadata": {"name": name}, "data": {"v": "1"}})).status == 201
    first, shown = await listed()
    assert shown == {"a": {"v": "1"}, "b": {"v": "1"}}
    assert (await listed())[0] == first
    assert (await http(apiserver, "PATCH", f"{CONFIGMAPS}/a", body={"data": {"v": "2"}},
                       content_type="application/merge-patch+json")).status == 200
    assert (await listed())[1] == {"a": {"v": "2"}, "b": {"v": "1"}}
    assert (await http(apiserver, "DELETE", f"{CONFIGMAPS}/b")).status == 200
    assert (await listed())[1] == {"a": {"v": "2"}}
    assert (await http(apiserver, "POST", CONFIGMAPS,
                       body={"metadata": {"name": "b"}, "data": {"v": "3"}})).status == 201
    assert (await listed())[1] == {"a": {"v": "2"}, "b": {"v": "3"}}
    assert len(apiserver.encoded) == 2  # no encoding of a replaced or deleted version kept


async def test_table_output(apiserver: SimApiServer) -> None:
    """Accept as=Table returns a meta.k8s.io/v1 Table with PartialObjectMetadata rows."""
    apiserver.create_deployment("default", "web", replicas=2)
    result = await http(apiserver, "GET", DEPLOYMENTS,
                        accept="application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
    table = result.json()
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert [c["name"] for c in table["columnDefinitions"]][:5] == [
        "Name", "Ready", "Up-to-date", "Available", "Age"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


@pytest.mark.parametrize("version", ["v2", "v2beta1"], ids=["v2", "v2beta1"])
async def test_aggregated_discovery_content_type(apiserver: SimApiServer, version: str) -> None:
    """/apis answers aggregated discovery with the parameters kubectl keys on."""
    accept = f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
    result = await http(apiserver, "GET", "/apis", accept=accept + ",application/json")
    assert result.headers["Content-Type"] == accept
    assert result.json()["apiVersion"] == f"apidiscovery.k8s.io/{version}"
    apps = next(i for i in result.json()["items"] if i["metadata"]["name"] == "apps")
    deployments = next(r for r in apps["versions"][0]["resources"]
                       if r["resource"] == "deployments")
    assert deployments["subresources"][0]["responseKind"] == {
        "group": "autoscaling", "version": "v1", "kind": "Scale"}


async def test_watch_bookmarks_and_timeout(apiserver: SimApiServer) -> None:
    """allowWatchBookmarks gets a BOOKMARK before timeoutSeconds ends the stream."""
    apiserver.create_deployment("default", "web", replicas=1)
    rv = apiserver.store.resource_version
    result = await http(apiserver, "GET", f"/api/v1/namespaces/default/pods?watch=1&"
                        f"resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=1")
    events = [json.loads(line) for line in result.text.splitlines()]
    assert [e["type"] for e in events] == ["BOOKMARK"]
    assert events[0]["object"]["metadata"]["resourceVersion"] == str(rv)


async def test_send_initial_events_ends_with_an_annotated_bookmark(
        apiserver: SimApiServer) -> None:
    """sendInitialEvents=true streams the state, then a bookmark marking its end."""
    apiserver.create_deployment("default", "web", replicas=2)
    result = await http(apiserver, "GET", "/api/v1/namespaces/default/pods?watch=1&"
                        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&"
                        "allowWatchBookmarks=true&timeoutSeconds=1")
    events = [json.loads(line) for line in result.text.splitlines()]
    assert [e["type"] for e in events][:3] == ["ADDED", "ADDED", "BOOKMARK"]
    assert events[2]["object"]["metadata"]["annotations"] == {
        "k8s.io/initial-events-end": "true"}


async def test_expired_watch_is_a_200_stream_with_an_error_event(
        apiserver: SimApiServer) -> None:
    """A watch from a compacted resourceVersion is HTTP 200 with one ERROR 410 event."""
    old = apiserver.store.resource_version
    apiserver.create_deployment("default", "web", replicas=1)
    apiserver.compact()
    result = await http(apiserver, "GET", f"/api/v1/pods?watch=true&resourceVersion={old}")
    [event] = [json.loads(line) for line in result.text.splitlines()]
    assert result.status == 200
    assert (event["type"], event["object"]["code"], event["object"]["reason"]) == (
        "ERROR", 410, "Expired")


async def test_self_subject_access_review(apiserver: SimApiServer) -> None:
    """A SelfSubjectAccessReview answers from the deny rules."""
    apiserver.deny("update", "deployments/scale")
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": {"namespace": "default", "verb": "update",
                                              "group": "apps", "resource": "deployments",
                                              "subresource": "scale"}}}
    result = await http(apiserver, "POST",
                        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=review)
    assert (result.status, result.json()["status"]["allowed"]) == (201, False)


async def test_protobuf_bodies_are_refused(apiserver: SimApiServer) -> None:
    """Only JSON bodies are understood: a protobuf body is 415, never misread."""
    result = await http(apiserver, "POST", CONFIGMAPS, body={"metadata": {"name": "x"}},
                        content_type="application/vnd.kubernetes.protobuf")
    assert result.status == 415


HPAS = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"


def _hpa(**spec: object) -> dict[str, object]:
    return {"metadata": {"name": "web"}, "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "maxReplicas": 5, **spec}}


async def test_hpa_defaults(apiserver: SimApiServer) -> None:
    """An HPA gets minReplicas 1, a CPU 80 % metric, and per-field behavior defaults."""
    created = (await http(apiserver, "POST", HPAS, body=_hpa(
        behavior={"scaleDown": {"policies": [{"type": "Pods", "value": 1,
                                              "periodSeconds": 60}]}}))).json()
    spec = created["spec"]
    assert spec["minReplicas"] == 1
    assert spec["metrics"][0]["resource"]["target"] == {"type": "Utilization",
                                                         "averageUtilization": 80}
    assert spec["behavior"]["scaleUp"]["policies"][0] == {"type": "Pods", "value": 4,
                                                          "periodSeconds": 15}
    assert spec["behavior"]["scaleDown"]["policies"] == [{"type": "Pods", "value": 1,
                                                          "periodSeconds": 60}]
    assert "stabilizationWindowSeconds" not in spec["behavior"]["scaleDown"]


@pytest.mark.parametrize("spec", [
    {"minReplicas": 0}, {"minReplicas": 6}, {"scaleTargetRef": {"kind": "Deployment"}},
], ids=["min-zero", "max-below-min", "no-target-name"])
async def test_hpa_validation(apiserver: SimApiServer, spec: dict[str, object]) -> None:
    """Invalid HPA bounds or target are a 422."""
    result = await http(apiserver, "POST", HPAS, body=_hpa(**spec))
    assert (result.status, result.json()["reason"]) == (422, "Invalid")


async def test_dry_run_create_commits_nothing(apiserver: SimApiServer) -> None:
    """dryRun=All answers the would-be object without a resourceVersion and stores nothing."""
    before = apiserver.store.resource_version
    result = await http(apiserver, "POST", f"{CONFIGMAPS}?dryRun=All",
                        body={"metadata": {"name": "state"}, "data": {"k": "v"}})
    assert result.status == 201
    assert "resourceVersion" not in result.json()["metadata"]
    assert apiserver.store.resource_version == before
    assert apiserver.get("v1", "ConfigMap", "default", "state") is None


async def test_replication_controller_scale(apiserver: SimApiServer) -> None:
    """A ReplicationController's Scale carries its map selector as a string; pods follow."""
    await http(apiserver, "POST", "/api/v1/namespaces/default/replicationcontrollers", body={
        "metadata": {"name": "legacy"}, "spec": {"replicas": 2, "template": {
            "metadata": {"labels": {"app": "legacy", "tier": "be"}},
            "spec": {"containers": [{"name": "c", "image": "x:1"}]}}}})
    apiserver.settle()
    scale = (await http(apiserver, "GET",
                        "/api/v1/namespaces/default/replicationcontrollers/legacy/scale")).json()
    assert scale["status"] == {"replicas": 2, "selector": "app=legacy,tier=be"}
    assert len(apiserver.pods("default", "app=legacy")) == 2


async def test_events_v1_event_in_core_shape(apiserver: SimApiServer) -> None:
    """An events.k8s.io/v1 Event read through core/v1 has core's renamed and zero fields."""
    await http(apiserver, "POST", "/apis/events.k8s.io/v1/namespaces/default/events", body={
        "metadata": {"name": "web.1"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "autoscaler", "reportingInstance": "a-1", "action": "Scale",
        "reason": "SuccessfulRescale", "type": "Normal", "note": "New size: 3",
        "regarding": {"kind": "Deployment", "name": "web", "namespace": "default"}})
    core = (await http(apiserver, "GET", "/api/v1/namespaces/default/events/web.1")).json()
    assert (core["message"], core["reportingComponent"], core["involvedObject"]["name"]) == (
        "New size: 3", "autoscaler", "web")
    assert (core["firstTimestamp"], core["lastTimestamp"], core["source"]) == (None, None, {})


async def test_short_history_window_expires_old_versions() -> None:
    """With a small history_limit, a watch from before the window is ERROR 410 by itself."""
    async with run_apiserver(history_limit=5) as api:
        old = api.store.resource_version
        api.create_deployment("default", "web", replicas=3)
        recent = api.store.resource_version - 2
        expired = await http(api, "GET", f"/api/v1/pods?watch=1&resourceVersion={old}")
        fresh = await http(api, "GET",
                           f"/api/v1/pods?watch=1&resourceVersion={recent}&timeoutSeconds=1")
    assert json.loads(expired.text)["object"]["code"] == 410
    assert all(json.loads(line)["type"] != "ERROR" for line in fresh.text.splitlines())
